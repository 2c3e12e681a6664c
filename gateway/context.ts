import type { Pool } from './db/pool.js';
import type { JwtKeys } from './auth/jwt.js';
import type { Config } from './config.js';

/** What every surface of the server shares, built once at start. */
export interface AppContext {
  config: Config;
  /** The server's pool (db/pool.ts): connections are `authenticator` and switch role per transaction. */
  db: Pool;
  /** HS256 keys: the current secret signs; it and the previous one verify. */
  jwt: JwtKeys;
}
