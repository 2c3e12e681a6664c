// Accept: application/vnd.pgrst.plan: EXPLAIN of the very statement a request would run.

import type { PlanMedia, PlanOption } from '../request/types.js';
import { join, prefixed, sql, type Fragment } from '../sql.js';
import type { Statement } from './read.js';

const EXPLAIN_FORMATS: Record<PlanMedia['format'], Fragment> = { json: sql`FORMAT JSON`, text: sql`FORMAT TEXT` };
const EXPLAIN_OPTIONS: Record<PlanOption, Fragment> = {
  analyze: sql`ANALYZE`,
  verbose: sql`VERBOSE`,
  settings: sql`SETTINGS`,
  buffers: sql`BUFFERS`,
  wal: sql`WAL`,
};

/** `statement` under EXPLAIN with the format and options the Accept header asked for. */
export function explainStatement(statement: Statement, media: PlanMedia): Statement {
  const options = [EXPLAIN_FORMATS[media.format], ...media.options.map((o) => EXPLAIN_OPTIONS[o])];
  return prefixed(sql`EXPLAIN (${join(options)}) `, statement);
}
