import { randomBytes } from 'node:crypto';
import postgres, { type Sql } from 'postgres';
import request from 'supertest';
import { migrate } from '../../gateway/db/migrate.js';
import { accessToken, startTestApp, type TestApp } from '../harness/app.js';
import { tokenFor, workspaceWithData } from '../harness/fixtures.js';
import { restEnv, TEST_API_KEY } from '../harness/rest.js';
import { waitFor } from '../harness/wait.js';
import { startCitusCluster, type CitusCluster } from './harness/citus.js';

// A worker that refuses the API role's login is an operator's fault, and says so. Citus logs in
// to the workers as the request's role, with the secret `tally migrate` keeps for it in the
// coordinator's pg_dist_authinfo; with that secret wrong or missing, every request that reaches
// a worker failed as 503 PGRST001 "the connection with the database was lost", and the server
// threw away its sound connection to the coordinator. Forged here on a cluster whose servers
// log in with passwords, as in a deployment.

const DB = 'tally_login';
let cluster: CitusCluster;
let url: string;
let owner: Sql;
let app: TestApp;
let jwt: string;

beforeAll(async () => {
  cluster = await startCitusCluster({ workers: 2, passwords: true });
  process.env.TALLY_TEST_AUTHENTICATOR_PASSWORD = randomBytes(18).toString('base64url');
  url = await cluster.createDatabase(DB);
  await migrate(url);
  owner = postgres(url, { max: 2, onnotice: () => {} });
  await owner`SELECT tally.set_login_password('authenticator', ${process.env.TALLY_TEST_AUTHENTICATOR_PASSWORD!})`;
  const ws = await workspaceWithData(owner, 'Login A');
  const t = await tokenFor(owner, ws.id, 'read');
  jwt = await accessToken({ role: 'api_read', workspace_id: ws.id, scope: 'read', sub: t.id });
  app = startTestApp(url, restEnv({ TALLY_DB_POOL: '2' }));
}, 600_000);

afterAll(async () => {
  await app?.close();
  await owner?.end({ timeout: 5 });
  await cluster?.stop();
});

/** A read of the workspace's expenses, which runs on the worker holding its shard. */
const read = () =>
  request(app.app)
    .get('/rest/v1/personal_transactions?select=id')
    .set('apikey', TEST_API_KEY)
    .set('authorization', `Bearer ${jwt}`);

/** The server's connections to the coordinator, by backend: which of them are still the same. */
const backends = async () =>
  (
    await owner<{ pid: number }[]>`
      SELECT pid FROM pg_stat_activity WHERE usename = 'authenticator' AND datname = ${DB} AND application_name <> 'tally-changes'
       ORDER BY pid`
  ).map((r) => r.pid);

/**
 * Breaks api_read's login on the workers (its secret changed or removed in pg_dist_authinfo)
 * and answers what a request then gets. Citus keeps a session's connections to the workers: its
 * cached ones are closed first, as a restart of the worker would.
 */
async function withBrokenLogin(breakIt: string) {
  await owner.unsafe(breakIt);
  for (const w of cluster.workers) {
    const s = postgres(w.url(DB), { max: 1, onnotice: () => {} });
    await s`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'api_read'`;
    // pg_terminate_backend only signals: a request sent before the backend is gone reaches it
    // still there and is cut off (57P01) instead of meeting the refused login.
    await waitFor(
      async () => (await s`SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = 'api_read'`)[0]!.n === 0,
      "the worker's api_read backends to be gone",
    );
    await s.end();
  }
  return read();
}

const REFUSED = {
  code: 'TLY004',
  message: "A database worker refused the login of the request's role",
  details: expect.stringContaining('the server log names the worker and the role'),
  hint: expect.stringContaining('run `tally migrate` against the coordinator'),
};

test.each([
  ['a wrong secret', `UPDATE pg_dist_authinfo SET authinfo = 'password=not-the-secret' WHERE rolename = 'api_read'`],
  ['no secret', `DELETE FROM pg_dist_authinfo WHERE rolename = 'api_read'`],
])('%s: 503 TLY004 saying what to fix, the connection kept; `tally migrate` fixes it', async (_, breakIt) => {
  expect((await read()).status).toBe(200);
  const before = await backends();
  const res = await withBrokenLogin(breakIt);
  expect({ status: res.status, body: res.body }).toEqual({ status: 503, body: REFUSED });
  // Nothing internal reaches the client: no worker address, no role, no Citus wording.
  expect(res.text).not.toMatch(/127\.0\.0\.1|api_read|remote node|password authentication/);
  // The connection to the coordinator was sound: kept, not replaced.
  expect(await backends()).toEqual(before);
  await migrate(url);
  const healed = await read();
  expect({ status: healed.status, rows: healed.body.length }).toEqual({ status: 200, rows: 1 });
});
