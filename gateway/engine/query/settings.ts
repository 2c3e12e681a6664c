// The response settings a request's SQL may make, read after its statements in its own
// transaction (PostgREST's response.status and response.headers): a function, a view or a
// trigger sets them with set_config(…, true) and the answer takes them.

import { compile, ident, join, sql } from '../sql.js';
import type { Statement } from './read.js';

const READ_SETTINGS = sql`SELECT pg_catalog.current_setting('response.headers', true) AS headers, pg_catalog.current_setting('response.status', true) AS status`;

export const RESPONSE_SETTINGS: Statement = compile(READ_SETTINGS);

/** One statement per function name: made once, then the same prepared statement for every write. */
const afterReports = new Map<string, Statement>();

/**
 * The response settings read after `report()` ran (EngineConfig.changes): a function in FROM
 * runs before the target list is read, so what it set is in the answer, and a write pays no
 * statement more for it.
 */
export function responseSettingsAfter(report: string): Statement {
  let statement = afterReports.get(report);
  if (!statement) {
    const name = join(report.split('.').map(ident), sql`.`);
    afterReports.set(report, (statement = compile(sql`${READ_SETTINGS} FROM ${name}() AS report`)));
  }
  return statement;
}

/** The plans that end with RESPONSE_SETTINGS: the planner appends it, the answer reads it, by this one rule. */
export const readsResponseSettings = (plan: { kind: string }): boolean =>
  plan.kind === 'read' || plan.kind === 'write' || plan.kind === 'call';

/**
 * Whether a header SQL set (response.headers, or a RAISE's detail) can be sent: its name a token,
 * its value what Node writes (tab, visible Latin-1). Anything else makes Node throw mid-answer.
 */
export const isSendableHeader = (name: string, value: string): boolean =>
  /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name) && /^[\t\x20-\x7e\x80-\xff]*$/.test(value);
