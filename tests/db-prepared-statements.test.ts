import request from 'supertest';
import type { App } from '../gateway/server.js';
import { MAX_PREPARED_CHARS_PER_CONNECTION, type Pool } from '../gateway/engine/pool.js';
import { jwtKeys } from '../gateway/auth/jwt.js';
import { loadConfig } from '../gateway/config.js';
import { serverPool } from '../gateway/db/connect.js';
import { createApp } from '../gateway/server.js';
import { accessToken, TEST_JWT_SECRET } from './harness/app.js';
import { createTestDatabase, serverUrl, type TestDatabase } from './harness/db.js';
import { tokenFor, workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { first } from './harness/present.js';

// TALLY_DB_PREPARED_STATEMENTS=false: behind a transaction pooler (PgBouncer in transaction
// mode) a statement prepared on one server connection is unknown on the next, so no request
// may leave a named prepared statement behind. The server here has a pool of ONE connection:
// pg_prepared_statements, which shows its own session's statements, read through that pool
// then shows everything the server's requests prepared.

describe('prepared statements switch', () => {
  let db: TestDatabase;
  let ws: WorkspaceFixture;
  let jwt: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    ws = await workspaceWithData(db.admin);
    const { id } = await tokenFor(db.admin, ws.id, 'write');
    jwt = await accessToken({ role: 'api_write', workspace_id: ws.id, scope: 'write', sub: id });
  });
  afterAll(() => db.drop());

  function serverWith(flag: string): { app: App; pool: Pool } {
    const config = loadConfig({
      TALLY_JWT_SECRET: TEST_JWT_SECRET,
      DATABASE_URL: db.url,
      ...restEnv({ TALLY_DB_PREPARED_STATEMENTS: flag }),
    });
    const pool = serverPool(serverUrl(db.url), { max: 1, prepare: config.preparedStatements });
    return { app: createApp({ config, db: pool, jwt: jwtKeys(TEST_JWT_SECRET) }), pool };
  }

  /** A read, a write, a wrapper read and an RPC-free embed: the statements a server prepares. */
  async function exercise(app: App): Promise<void> {
    const rest = { apikey: TEST_API_KEY, authorization: `Bearer ${jwt}` };
    const listed = await request(app)
      .get('/rest/v1/personal_transactions?select=id,name&order=occurred_at.desc&limit=5')
      .set(rest)
      .expect(200);
    expect(listed.body.map((r: { id: string }) => r.id)).toContain(ws.expenseId);
    await request(app)
      .post('/rest/v1/personal_transactions')
      .set(rest)
      .set('Prefer', 'return=minimal')
      .send({ name: 'unprepared', amount: 3, category_id: 'other', method_id: 'cash' })
      .expect(201);
    const funds = await request(app).get('/rest/v1/funds?select=id,fund_transactions(id)').set(rest).expect(200);
    expect(funds.body[0].fund_transactions.map((t: { id: string }) => t.id)).toContain(ws.fundTransactionId);
    await request(app).get('/api/v1/personal_transactions').set('authorization', `Bearer ${jwt}`).expect(200);
  }

  const preparedOf = async (pool: Pool): Promise<number> =>
    first(await pool<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_prepared_statements`).n;

  it('with TALLY_DB_PREPARED_STATEMENTS=false reads and writes work and the session holds no prepared statement', async () => {
    const { app, pool } = serverWith('false');
    try {
      await exercise(app);
      expect(await preparedOf(pool)).toBe(0);
      const { n } = first(
        await db.admin<
          { n: number }[]
        >`SELECT count(*)::int AS n FROM public.personal_transactions WHERE workspace_id = ${ws.id} AND name = 'unprepared'`,
      );
      expect(n).toBe(1);
    } finally {
      await pool.end({ timeout: 5 });
    }
  });

  // Each new statement text a client sends is prepared on the connection and kept there, at
  // about 50 bytes of the backend's memory a character: reads of 49 embeds that differ only in
  // their aliases (42,000 characters of SQL each) grew one backend by 2 MB a request, for as long
  // as the connection lived.
  it('a connection keeps at most MAX_PREPARED_CHARS_PER_CONNECTION characters of statements prepared, however many shapes a client reads', async () => {
    const { app, pool } = serverWith('');
    const preparedChars = async (): Promise<number> =>
      first(
        await pool<{ n: number }[]>`SELECT coalesce(sum(length(statement)), 0)::int AS n FROM pg_prepared_statements`,
      ).n;
    try {
      const rest = { apikey: TEST_API_KEY, authorization: `Bearer ${jwt}` };
      const sessions = new Set<number>();
      let most = 0;
      for (let i = 0; i < 60; i += 1) {
        const embeds = Array.from({ length: 49 }, (_, k) => `e${i}_${k}:fund_transactions(id)`).join(',');
        const res = await request(app).get(`/rest/v1/funds?select=id,${embeds}`).set(rest).expect(200);
        expect(res.body[0][`e${i}_48`].map((t: { id: string }) => t.id)).toContain(ws.fundTransactionId);
        sessions.add(first(await pool<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`).pid);
        most = Math.max(most, await preparedChars());
      }
      // Between requests: what the requests prepared, and the few statements this test and a
      // rollback send outside them (uncounted, under a thousand characters).
      expect(most).toBeLessThanOrEqual(MAX_PREPARED_CHARS_PER_CONNECTION + 1_000);
      expect(most).toBeGreaterThan(MAX_PREPARED_CHARS_PER_CONNECTION / 2);
      // The connection was replaced when its statements passed the bound, not at every request.
      expect(sessions.size).toBeGreaterThan(1);
      expect(sessions.size).toBeLessThanOrEqual(5);
    } finally {
      await pool.end({ timeout: 5 });
    }
  });

  it('by default statements are prepared (the control: the same requests leave some behind)', async () => {
    const { app, pool } = serverWith('');
    try {
      await exercise(app);
      expect(await preparedOf(pool)).toBeGreaterThan(0);
    } finally {
      await pool.end({ timeout: 5 });
    }
  });
});
