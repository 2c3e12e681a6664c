import { jest } from '@jest/globals';
import { accessToken } from './harness/app.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { sigtermUnderLoad, writtenUnderLoad } from './harness/drain.js';
import { tokenFor, workspaceWithData } from './harness/fixtures.js';
import { TEST_API_KEY } from './harness/rest.js';
import { startServers, type Servers } from './harness/servers.js';

// Each test or hook here starts the CLI through tsx (five in a row took 30 s of jest's default
// 60 s on a loaded 2-core machine): the timeout is a safety net, as in cli.test.ts.
jest.setTimeout(180_000);

// SIGTERM of one of two processes under keep-alive load, as a rolling deploy does it
// (tests/harness/drain.ts): no request is lost. Behind PgBouncer: tests/scale/pgbouncer.test.ts.

describe('SIGTERM of one of two processes under keep-alive load', () => {
  let db: TestDatabase;
  let servers: Servers;
  let headers: Record<string, string>;
  let workspace: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    const ws = await workspaceWithData(db.admin, 'drain');
    workspace = ws.id;
    const token = await tokenFor(db.admin, ws.id, 'write');
    const jwt = await accessToken({ role: 'api_write', workspace_id: ws.id, scope: 'write', sub: token.id });
    headers = {
      apikey: TEST_API_KEY,
      authorization: `Bearer ${jwt}`,
      'content-type': 'application/json',
      prefer: 'return=minimal',
    };
    servers = await startServers(2, db.url, {
      TALLY_PUBLISHABLE_KEYS: TEST_API_KEY,
      TALLY_RATE_LIMIT_PER_MINUTE: '1000000',
    });
  });
  afterAll(async () => {
    await servers?.close();
    await db?.drop();
  });

  it('loses no request: every one is answered, or refused before it was sent and retried elsewhere', async () => {
    const outcome = await sigtermUnderLoad(servers, headers);
    expect(outcome.lost).toEqual([]);
    expect(outcome.code).toBe(0);
    expect(outcome.refused).toBeGreaterThan(0); // the process did stop while the load ran
    expect(await writtenUnderLoad(db.admin, workspace)).toBe(outcome.acknowledged);
  });
});
