import { jwtKeys, signAccessToken, type AccessClaims } from '../../gateway/auth/jwt.js';
import { loadConfig, type Config } from '../../gateway/config.js';
import type { AppContext } from '../../gateway/context.js';
import { configuredPool } from '../../gateway/db/connect.js';
import { createApp, type App } from '../../gateway/server.js';
import { setLogLevel } from '../../gateway/log.js';
import { serverUrl } from './db.js';
import { SignJWT } from 'jose';

// The real server in-process for supertest: the same createApp and authenticator login as
// `tally serve`, on a test database, with a fixed JWT secret tests can sign with.

export const TEST_JWT_SECRET = 'test-secret-that-is-at-least-32-characters-long';

export interface TestApp {
  app: App;
  ctx: AppContext;
  close(): Promise<void>;
}

/** `login`: where the server's pool logs in, if not the database itself (a proxy in front of it). */
export function startTestApp(
  databaseUrl: string,
  env: Record<string, string> = {},
  login: string = serverUrl(databaseUrl),
): TestApp {
  const config: Config = loadConfig({
    TALLY_JWT_SECRET: TEST_JWT_SECRET,
    DATABASE_URL: databaseUrl,
    TALLY_DB_POOL: '4',
    LOG_LEVEL: process.env.LOG_LEVEL, // the suite's (tests/harness/quiet.mjs)
    ...env,
  });
  setLogLevel(config.logLevel);
  const ctx: AppContext = {
    config,
    db: configuredPool(login, config),
    jwt: jwtKeys(config.jwtSecret!, config.jwtPreviousSecret),
  };
  return { app: createApp(ctx), ctx, close: () => ctx.db.end({ timeout: 5 }) };
}

/** An access token as the exchange would mint it, for a workspace token id. */
export function accessToken(claims: AccessClaims, secret = TEST_JWT_SECRET): Promise<string> {
  return signAccessToken(jwtKeys(secret), claims);
}

/** Any JWT, signed with the test secret, for tests of the generic gateway. */
export function signJwt(payload: Record<string, unknown>, secret = TEST_JWT_SECRET, expiresIn = '1h'): Promise<string> {
  return new SignJWT(payload)
    .setProtectedHeader({ alg: 'HS256' })
    .setIssuedAt()
    .setExpirationTime(expiresIn)
    .sign(new TextEncoder().encode(secret));
}
