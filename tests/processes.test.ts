import { jest } from '@jest/globals';
import postgres from 'postgres';
import { accessToken } from './harness/app.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { tokenFor, workspaceWithData } from './harness/fixtures.js';
import { expectWithinBound, liveChangeTimes } from './harness/live-changes.js';
import { TEST_API_KEY } from './harness/rest.js';
import { startServers, type Servers } from './harness/servers.js';

// Each test or hook here starts the CLI through tsx (five in a row took 30 s of jest's default
// 60 s on a loaded 2-core machine): the timeout is a safety net, as in cli.test.ts.
jest.setTimeout(180_000);

// Three `tally serve` processes on one database, as a deployment behind a load balancer runs
// them: each has its own pool and caches, and every one of them must agree with the database.

describe('three tally serve processes on one database', () => {
  let db: TestDatabase;
  let servers: Servers;
  let headers: Record<string, string>;

  beforeAll(async () => {
    db = await createTestDatabase();
    const ws = await workspaceWithData(db.admin, 'processes');
    const token = await tokenFor(db.admin, ws.id, 'write');
    const jwt = await accessToken({ role: 'api_write', workspace_id: ws.id, scope: 'write', sub: token.id });
    headers = { apikey: TEST_API_KEY, authorization: `Bearer ${jwt}` };
    servers = await startServers(3, db.url, {
      TALLY_PUBLISHABLE_KEYS: TEST_API_KEY,
      TALLY_RATE_LIMIT_PER_MINUTE: '100000',
    });
  });
  afterAll(async () => {
    await servers?.close();
    await db?.drop();
  });

  it('are told of a schema change when it commits, not before: a poll in between would load the old schema', async () => {
    const version = async () => (await db.admin<{ v: string }[]>`SELECT tally.change_version() AS v`)[0]!.v;
    const before = await version();
    const dba = postgres(db.url, { max: 1, onnotice: () => {} });
    try {
      await dba.begin(async (tx) => {
        await tx.unsafe('CREATE TABLE public.pending_change (id int PRIMARY KEY)');
        await tx.unsafe('GRANT SELECT ON public.pending_change TO api_read');
        expect(await version()).toBe(before);
      });
    } finally {
      await dba.end();
    }
    expect(await version()).not.toBe(before);
  });

  it('see a new category and payment method, a new column and a new table within the bound', async () => {
    const times = await liveChangeTimes(db.admin, servers.bases, headers, 'live');
    expectWithinBound(times);
  });
});
