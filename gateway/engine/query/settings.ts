// The response settings a request's SQL may make (PostgREST's response.status and
// response.headers): a function, a view or a trigger sets them with set_config(…, true) and the
// answer takes them. A read-only plan (a read, a call of a function that is not VOLATILE) reads
// them in its own statement, as PostgREST does: two columns of its one row, which Postgres
// computes once every row has been aggregated, so after every function the statement ran. A plan
// that may write reads them in a statement of its own after it: the AFTER triggers of a
// data-modifying statement fire at its end, after its own columns, and the deployment's report of
// the changes (EngineConfig.changes) runs in that statement.

import type { Row } from 'postgres';
import { compile, ident, join, sql, type CompiledSql } from '../sql.js';

/** The two columns, for the SELECT that aggregates a read's or a call's rows. */
export const RESPONSE_COLUMNS = sql`pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status`;

const READ_SETTINGS = sql`SELECT ${RESPONSE_COLUMNS}`;

export const RESPONSE_SETTINGS: CompiledSql = compile(READ_SETTINGS);

/** One statement per function name: made once, then the same prepared statement for every write. */
const afterReports = new Map<string, CompiledSql>();

/**
 * The response settings read after `report()` ran (EngineConfig.changes): a function in FROM
 * runs before the target list is read, so what it set is in the answer, and a write pays no
 * statement more for it.
 */
export function responseSettingsAfter(report: string): CompiledSql {
  let statement = afterReports.get(report);
  if (!statement) {
    const name = join(report.split('.').map(ident), sql`.`);
    afterReports.set(report, (statement = compile(sql`${READ_SETTINGS} FROM ${name}() AS report`)));
  }
  return statement;
}

type Planned = { kind: string; tx: { readOnly: boolean } };

/**
 * The plans that end with RESPONSE_SETTINGS (or its report variant): a write, and a call whose
 * transaction may write. The planner appends it, the answer reads it, by this one rule.
 */
export const readsResponseSettings = (plan: Planned): boolean =>
  (plan.kind === 'write' || plan.kind === 'call') && !plan.tx.readOnly;

/** The row that holds a plan's response settings: the last statement's, or a read's or read-only call's own. */
export function responseSettingsRow(plan: Planned, results: Row[][]): Row | undefined {
  if (readsResponseSettings(plan)) return results.at(-1)?.[0];
  return plan.kind === 'read' || plan.kind === 'call' ? results[0]?.[0] : undefined;
}

/**
 * Whether a header SQL set (response.headers, or a RAISE's detail) can be sent: its name a token,
 * its value what Node writes (tab, visible Latin-1). Anything else makes Node throw mid-answer.
 */
export const isSendableHeader = (name: string, value: string): boolean =>
  /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name) && /^[\t\x20-\x7e\x80-\xff]*$/.test(value);
