// Write statements: one INSERT/UPDATE/DELETE in a data-modifying CTE, whose returned rows are
// shaped by the same select tree as a read (embeds included). The body is one JSON parameter
// expanded by jsonb_populate_record, so a bulk insert is one statement, all rows or none.

import type { MutationPlan } from '../plan/write.js';
import type { ReadNode } from '../plan/types.js';
import type { MediaType } from '../request/types.js';
import type { Column } from '../schema-cache/types.js';
import { bodySql, compileNode } from './read.js';
import { aliasRow, conditionSql, ident, Params, qualified, type RowRef } from './sql.js';

const returned: RowRef = {
  col: (name) => `("pgrst_src"."pgrst_row").${ident(name)}`,
  row: () => `"pgrst_src"."pgrst_row"`,
  star: () => `("pgrst_src"."pgrst_row").*`,
};

export type ReturnShape = 'representation' | 'headers-only' | 'minimal';

/**
 * A JSON body's record, and each written column's value from it. A column whose domain has a
 * cast from json (a data representation) reads its value through that function; its key is
 * taken out of what jsonb_populate_record parses, which would read it as the base type.
 */
function bodyRecord(plan: MutationPlan, elem: string, p: Params): { record: string; value: (c: Column) => string } {
  const table = qualified(plan.relation.schema, plan.relation.name);
  const represented = plan.columns.filter((c) => c.representation?.fromJson);
  const stripped = represented.reduce((e, c) => `(${e} - ${p.text(c.name)})`, elem);
  return {
    record: `pg_catalog.jsonb_populate_record(NULL::${table}, ${stripped}) AS "pgrst_rec"`,
    value: (c) => c.representation?.fromJson
      ? `${c.representation.fromJson}((${elem} -> ${p.text(c.name)})::pg_catalog.json)`
      : `"pgrst_rec".${ident(c.name)}`,
  };
}

function mutationSql(plan: MutationPlan, root: ReadNode, p: Params): string {
  const rel = plan.relation;
  const table = qualified(rel.schema, rel.name);
  const alias = ident(root.alias);
  if (plan.kind === 'insert') {
    const body = p.typed(plan.bodyJson, 'pg_catalog.jsonb');
    const rec = bodyRecord(plan, '"pgrst_body"."elem"', p);
    const cols = plan.columns.length > 0 ? plan.columns : rel.columnList.filter((c) => !c.generated).slice(0, 1);
    const values = cols.map((c) => {
      if (plan.columns.length === 0) return c.defaultExpr ?? 'NULL';
      const value = rec.value(c);
      if (!plan.missingDefault) return value;
      return `CASE WHEN "pgrst_body"."elem" ? ${p.text(c.name)} THEN ${value} ELSE ${c.defaultExpr ?? 'NULL'} END`;
    });
    let sql = `INSERT INTO ${table} AS ${alias} (${cols.map((c) => ident(c.name)).join(', ')}) `
      + `SELECT ${values.join(', ')} FROM pg_catalog.jsonb_array_elements(${body}) WITH ORDINALITY AS "pgrst_body"("elem", "ord") `
      + `CROSS JOIN LATERAL ${rec.record} ORDER BY "pgrst_body"."ord"`;
    if (plan.onConflict) {
      sql += ` ON CONFLICT (${plan.onConflict.columns.map(ident).join(', ')}) `;
      sql += plan.onConflict.action === 'nothing' || plan.columns.length === 0
        ? 'DO NOTHING'
        : `DO UPDATE SET ${plan.columns.map((c) => `${ident(c.name)} = EXCLUDED.${ident(c.name)}`).join(', ')}`;
    }
    return `${sql} RETURNING ${alias} AS "pgrst_row"`;
  }
  const where = plan.conditions.map((c) => conditionSql(c, aliasRow(root.alias), p)).join(' AND ');
  if (plan.kind === 'update') {
    if (plan.columns.length === 0) {
      // An empty PATCH changes nothing, but still runs (and is authorised) as a statement.
      return `SELECT ${alias} AS "pgrst_row" FROM ${table} AS ${alias} WHERE false`;
    }
    const rec = bodyRecord(plan, p.typed(plan.bodyJson, 'pg_catalog.jsonb'), p);
    const set = plan.columns.map((c) => `${ident(c.name)} = ${rec.value(c)}`).join(', ');
    return `UPDATE ${table} AS ${alias} SET ${set} FROM ${rec.record} `
      + `WHERE ${where} RETURNING ${alias} AS "pgrst_row"`;
  }
  return `DELETE FROM ${table} AS ${alias} WHERE ${where} RETURNING ${alias} AS "pgrst_row"`;
}

export function writeStatement(plan: MutationPlan, root: ReadNode, shape: ReturnShape, media: MediaType) {
  const p = new Params();
  const mutation = mutationSql(plan, root, p);
  const pk = plan.relation.primaryKey;
  const location = pk.length > 0
    ? `(SELECT pg_catalog.json_agg(pg_catalog.json_build_array(${pk.map((k) => `(${returned.col(k)})::text`).join(', ')}))::text FROM pgrst_source AS "pgrst_src")`
    : 'NULL';
  let text: string;
  if (shape === 'representation') {
    const representation: ReadNode = { ...root, conditions: [], order: [], limit: undefined, offset: undefined };
    const c = compileNode(representation, returned, 'FROM pgrst_source AS "pgrst_src"', p);
    text = `WITH pgrst_source AS (${mutation}), pgrst_rows AS (SELECT ${c.select} ${c.fromWhere}) `
      + `SELECT (SELECT pg_catalog.count(*) FROM pgrst_source)::text AS total_result_set, pg_catalog.count("_postgrest_t")::int AS page_total, `
      + `${bodySql(media)} AS body, ${location} AS location FROM pgrst_rows AS "_postgrest_t"`;
  } else {
    text = `WITH pgrst_source AS (${mutation}) SELECT pg_catalog.count(*)::text AS total_result_set, pg_catalog.count(*)::int AS page_total, `
      + `NULL::text AS body, ${location} AS location FROM pgrst_source`;
  }
  return { text, params: p.values };
}
