// The response settings a request's SQL may make, read after its statements in its own
// transaction (PostgREST's response.status and response.headers): a function, a view or a
// trigger sets them with set_config(…, true) and the answer takes them.

import { compile, sql } from '../sql.js';
import type { Statement } from './read.js';

export const RESPONSE_SETTINGS: Statement = compile(
  sql`SELECT pg_catalog.current_setting('response.headers', true) AS headers, pg_catalog.current_setting('response.status', true) AS status`,
);
