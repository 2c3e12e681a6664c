import type { Sql } from 'postgres';
import type { Config } from './config.js';

/** What every surface of the server shares: configuration and the authenticator pool. */
export interface AppContext {
  config: Config;
  /** The server's pool: connections are `authenticator` and switch role per transaction. */
  db: Sql;
  /** The HS256 secret that signs access tokens (with config.jwtPreviousSecret, verifies them). */
  jwtSecret: string;
}
