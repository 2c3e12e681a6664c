import type { Sql } from 'postgres';
import type { JwtKeys } from './auth/jwt.js';
import type { Config } from './config.js';

/** What every surface of the server shares, built once at start. */
export interface AppContext {
  config: Config;
  /** The server's pool: connections are `authenticator` and switch role per transaction. */
  db: Sql;
  /** HS256 keys: the current secret signs; it and the previous one verify. */
  jwt: JwtKeys;
}
