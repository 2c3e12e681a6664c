// Function calls at /rpc (PostgREST's CallPlan compiled). Arguments are one jsonb parameter:
// jsonb_to_record gives each a column of the parameter's type from the schema cache, and the
// call passes them by name, so a parameter with a default may be left out. A function returning
// rows is the FROM of the ordinary read statement (select, filters, embedding, counts apply).

import { catalog, compile, ident, join, qualified, sql, text, type Fragment } from '../sql.js';
import type { RoutineCall } from '../plan/types.js';
import { scalarShape, sentBody, topBudget, type ReadBounds, type RowSource, type Statement } from './read.js';
import { typed } from './expressions.js';
import { RESPONSE_COLUMNS } from './settings.js';

const ARGS = ident('pgrst_args');

/** The call expression, and the FROM item holding the arguments (undefined without arguments). */
function callSql(call: RoutineCall): { args?: Fragment; call: Fragment } {
  const r = call.routine;
  const fn = qualified(r.schema, r.name);
  const a = call.args;
  if (a.kind === 'single') {
    const name = a.param.name ? sql`${ident(a.param.name)} := ` : sql``;
    return { call: sql`${fn}(${name}${typed(a.json, a.param.typeSql)})` };
  }
  if (a.kind === 'body') {
    // The surface reads every body as UTF-8 text; its bytes again for a bytea parameter.
    const value =
      a.param.baseType === 'bytea'
        ? sql`pg_catalog.convert_to(${text(a.text)}, 'UTF8')`
        : typed(a.text, a.param.typeSql);
    return { call: sql`${fn}(${value})` };
  }
  if (a.params.length === 0) return { call: sql`${fn}()` };
  const columns = join(a.params.map((x) => sql`${ident(x.name)} ${catalog(x.typeSql)}`));
  return {
    args: sql`pg_catalog.jsonb_to_record(${text(a.json)}::pg_catalog.jsonb) AS ${ARGS}(${columns})`,
    call: sql`${fn}(${join(a.params.map((x) => sql`${x.variadic ? sql`VARIADIC ` : sql``}${ident(x.name)} := ${ARGS}.${ident(x.name)}`))})`,
  };
}

/**
 * Rows of a function returning a table or composite type, aliased like a table's rows. A
 * VOLATILE function runs once, in a materialised CTE, even when the count reads its rows again.
 */
export function routineSource(call: RoutineCall, alias: string): RowSource {
  const c = callSql(call);
  const single = !call.routine.returns.setOf;
  const rows = c.args ? sql`${c.args} CROSS JOIN LATERAL ${c.call}` : c.call;
  if (call.routine.volatility === 'volatile') {
    return {
      with: sql`pgrst_call AS MATERIALIZED (SELECT "pgrst_c".* FROM ${rows} AS "pgrst_c")`,
      from: sql`FROM pgrst_call AS ${ident(alias)}`,
      single,
    };
  }
  return { from: sql`FROM ${rows} AS ${ident(alias)}`, single };
}

/** A function returning a scalar (one JSON value), a set of scalars (an array), or void. */
export function scalarStatement(call: RoutineCall, bounds: ReadBounds = {}): Statement {
  const c = callSql(call);
  const r = call.routine.returns;
  const args = c.args ? sql` FROM ${c.args}` : sql``;
  const rows = sql`WITH pgrst_rows AS (SELECT ${c.call} AS "pgrst_scalar"${args})`;
  if (r.kind === 'void')
    return compile(
      sql`${rows} SELECT NULL::text AS total_result_set, pg_catalog.count(*)::int AS page_total, NULL::text AS body, ${RESPONSE_COLUMNS} FROM pgrst_rows`,
    );
  const sent = sentBody(scalarShape(r.setOf), topBudget(bounds));
  return compile(
    sql`${rows} SELECT NULL::text AS total_result_set, pg_catalog.count(*)::int AS page_total, ${sent.body} AS body, ${RESPONSE_COLUMNS} ${sent.from}`,
  );
}
