// Function calls at /rpc (PostgREST's CallPlan compiled). Arguments are one jsonb parameter:
// jsonb_to_record gives each a column of the parameter's type from the schema cache, and the
// call passes them by name, so a parameter with a default may be left out. A function returning
// rows is the FROM of the ordinary read statement (select, filters, embedding, counts apply).

import type { Statement } from '../execute.js';
import type { RoutineCall } from '../plan/types.js';
import type { RowSource } from './read.js';
import { ident, Params, qualified } from './sql.js';

/** The call expression, and the FROM item holding the arguments (empty without arguments). */
function callSql(call: RoutineCall, p: Params): { args: string; call: string } {
  const r = call.routine;
  const fn = qualified(r.schema, r.name);
  const a = call.args;
  if (a.kind === 'single') {
    return { args: '', call: `${fn}(${a.param.name ? `${ident(a.param.name)} := ` : ''}${p.typed(a.json, a.param.typeSql)})` };
  }
  if (a.params.length === 0) return { args: '', call: `${fn}()` };
  const columns = a.params.map((x) => `${ident(x.name)} ${x.typeSql}`).join(', ');
  return {
    args: `pg_catalog.jsonb_to_record(${p.typed(a.json, 'pg_catalog.jsonb')}) AS "pgrst_args"(${columns})`,
    call: `${fn}(${a.params.map((x) => `${ident(x.name)} := "pgrst_args".${ident(x.name)}`).join(', ')})`,
  };
}

/**
 * Rows of a function returning a table or composite type, aliased like a table's rows. A
 * VOLATILE function runs once, in a materialised CTE, even when the count reads its rows again.
 */
export function routineSource(call: RoutineCall, alias: string): RowSource {
  return (p) => {
    const c = callSql(call, p);
    const single = !call.routine.returns.setOf;
    if (call.routine.volatility === 'volatile') {
      return {
        with: `pgrst_call AS MATERIALIZED (SELECT "pgrst_c".* FROM ${c.args ? `${c.args} CROSS JOIN LATERAL ` : ''}${c.call} AS "pgrst_c")`,
        from: `FROM pgrst_call AS ${ident(alias)}`,
        single,
      };
    }
    return { from: `FROM ${c.args ? `${c.args} CROSS JOIN LATERAL ` : ''}${c.call} AS ${ident(alias)}`, single };
  };
}

/** A function returning a scalar (one JSON value), a set of scalars (an array), or void. */
export function scalarStatement(call: RoutineCall): Statement {
  const p = new Params();
  const c = callSql(call, p);
  const r = call.routine.returns;
  const body = r.kind === 'void' ? 'NULL::text'
    : r.setOf ? `coalesce(pg_catalog.json_agg("pgrst_scalar"), '[]')::text`
      : `coalesce((pg_catalog.json_agg("pgrst_scalar") -> 0)::text, 'null')`;
  const text = `WITH pgrst_rows AS (SELECT ${c.call} AS "pgrst_scalar"${c.args ? ` FROM ${c.args}` : ''}) `
    + `SELECT NULL::text AS total_result_set, pg_catalog.count(*)::int AS page_total, ${body} AS body FROM pgrst_rows`;
  return { text, params: p.values };
}
