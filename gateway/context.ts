import type { JwtKeys } from './auth/jwt.js';
import type { Config } from './config.js';
import type { EngineContext } from './engine/config.js';

/** What every surface of the server shares, built once at start: the engine's context and more. */
export interface AppContext extends EngineContext {
  config: Config;
  /** HS256 keys: the current secret signs; it and the previous one verify. */
  jwt: JwtKeys;
}
