import { jest } from '@jest/globals';
import { freePort } from '../gateway/db/free-port.js';
import { apiSwitchAcross, rateLimitAcross, revocationAcross, surfaces } from './harness/access-checks.js';
import { accessToken } from './harness/app.js';
import { createTestDatabase, serverUrl, type TestDatabase } from './harness/db.js';
import { tokenFor, workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { TEST_API_KEY } from './harness/rest.js';
import { startServers, type Servers } from './harness/servers.js';

// Each test or hook here starts the CLI through tsx (five in a row took 30 s of jest's default
// 60 s on a loaded 2-core machine): the timeout is a safety net, as in cli.test.ts.
jest.setTimeout(180_000);

// Three `tally serve` processes on one database at the default limit of 60 requests a minute:
// each has its own pool and caches, and none may let a client past what the database says.

describe('three tally serve processes on one database, at the default rate limit', () => {
  let db: TestDatabase;
  let servers: Servers;
  let ws: WorkspaceFixture;

  beforeAll(async () => {
    db = await createTestDatabase();
    ws = await workspaceWithData(db.admin, 'access');
    servers = await startServers(3, db.url, { TALLY_PUBLISHABLE_KEYS: TEST_API_KEY });
  });
  afterAll(async () => {
    await servers?.close();
    await db?.drop();
  });

  it('count one limit over all of them: of 90 requests of one token, exactly 60 succeed and 30 get 429 with Retry-After', async () => {
    expect(await rateLimitAcross(db.admin, servers.bases, ws.id)).toEqual({
      ok: 60,
      limited: 30,
      retryAfter: 30,
      other: [],
    });
  });

  it('refuse a revoked token on the very next request, on every process and surface', async () => {
    await revocationAcross(db.admin, servers.bases, ws.id);
  });

  it('refuse a workspace whose API is switched off on the very next request, on every process and surface', async () => {
    await apiSwitchAcross(db.admin, servers.bases, ws.id);
  });
});

describe('a database that accepts no writes', () => {
  let db: TestDatabase;
  let servers: Servers;
  let ws: WorkspaceFixture;

  beforeAll(async () => {
    db = await createTestDatabase();
    ws = await workspaceWithData(db.admin, 'read-only');
    // What a hot standby is to its clients: every transaction read-only.
    await db.admin.unsafe(`ALTER DATABASE ${db.name} SET default_transaction_read_only = on`);
    servers = await startServers(1, db.url, { TALLY_PUBLISHABLE_KEYS: TEST_API_KEY });
  });
  afterAll(async () => {
    await servers?.close();
    await db?.drop();
  });

  it('answers 503 TLY003 with Retry-After on every surface, and /readyz says it is not ready', async () => {
    const t = await tokenFor(db.admin, ws.id, 'write');
    const jwt = await accessToken({ role: 'api_write', workspace_id: ws.id, scope: 'write', sub: t.id });
    const s = surfaces(servers.bases[0]!);
    for (const res of [await s.rest(jwt), await s.wrapper(jwt), await s.mcp(t.token), await s.exchange(t.token)]) {
      expect(res).toEqual({
        status: 503,
        body: expect.objectContaining({ code: 'TLY003', message: 'The database is read-only' }),
      });
    }
    const ready = await fetch(`${servers.bases[0]}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({ status: 'read-only' });
  });
});

describe('a TALLY_DB_URI of several hosts', () => {
  let db: TestDatabase;
  let servers: Servers;
  let ws: WorkspaceFixture;

  beforeAll(async () => {
    db = await createTestDatabase();
    ws = await workspaceWithData(db.admin, 'hosts');
    // The first host answers nothing; the second is the database.
    const url = new URL(serverUrl(db.url));
    const hosts = `127.0.0.1:${await freePort()},${url.host}`;
    const login = `postgres://${url.username}:${url.password}@${hosts}${url.pathname}`;
    servers = await startServers(1, db.url, { TALLY_PUBLISHABLE_KEYS: TEST_API_KEY }, login);
  });
  afterAll(async () => {
    await servers?.close();
    await db?.drop();
  });

  it('connects to the next host when one does not answer', async () => {
    const t = await tokenFor(db.admin, ws.id, 'read');
    const jwt = await accessToken({ role: 'api_read', workspace_id: ws.id, scope: 'read', sub: t.id });
    for (let i = 0; i < 5; i++) expect((await surfaces(servers.bases[0]!).rest(jwt)).status).toBe(200);
    expect((await fetch(`${servers.bases[0]}/readyz`)).status).toBe(200);
  });
});
