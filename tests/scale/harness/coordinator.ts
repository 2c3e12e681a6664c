import type { Notice } from 'postgres';
import { jwtKeys } from '../../../gateway/auth/jwt.js';
import { loadConfig } from '../../../gateway/config.js';
import type { AppContext } from '../../../gateway/context.js';
import { createPool } from '../../../gateway/engine/pool.js';
import { TEST_JWT_SECRET } from '../../harness/app.js';
import { TEST_API_KEY } from '../../harness/rest.js';

// Tally in the test's own process on a Citus coordinator, logged in as authenticator as tally
// serve is, whose sessions tell what they send to the workers: with citus.log_remote_commands on,
// every command a request sends a worker comes back as a notice "issuing …", which the suites
// that count a request's worker commands read.

export interface CoordinatorOptions {
  acquireTimeoutMs: number;
  /** Each notice's message (the issued commands among them). */
  onNotice: (message: string) => void;
  /** Settings of the sessions besides citus.log_remote_commands (client_min_messages: notice). */
  connection?: Record<string, string>;
  /** postgres.js's debug hook: each statement a session runs. */
  debug?: (connection: unknown, text: string, params: unknown[]) => void;
}

export function coordinatorContext(ownerUrl: string, options: CoordinatorOptions): AppContext {
  const config = loadConfig({
    TALLY_JWT_SECRET: TEST_JWT_SECRET,
    DATABASE_URL: ownerUrl,
    TALLY_PUBLISHABLE_KEYS: TEST_API_KEY,
    TALLY_RATE_LIMIT_PER_MINUTE: '100000',
  });
  const serverUrl = new URL(ownerUrl);
  serverUrl.username = 'authenticator';
  const db = createPool(serverUrl.toString(), {
    size: 2,
    acquireTimeoutMs: options.acquireTimeoutMs,
    perKey: 2,
    client: {
      prepare: true,
      connect_timeout: 10,
      connection: {
        application_name: 'tally',
        'citus.log_remote_commands': 'on',
        client_min_messages: 'notice',
        ...options.connection,
      },
      onnotice: (n: Notice) => options.onNotice(String(n.message)),
      ...(options.debug ? { debug: options.debug } : {}),
    } as never,
  });
  return { config, db, jwt: jwtKeys(TEST_JWT_SECRET) };
}
