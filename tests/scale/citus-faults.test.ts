import { randomBytes } from 'node:crypto';
import postgres, { type Sql } from 'postgres';
import request from 'supertest';
import { loadConfig } from '../../gateway/config.js';
import { provisionServerLogin } from '../../gateway/db/connect.js';
import { migrate } from '../../gateway/db/migrate.js';
import { accessToken, startTestApp, type TestApp } from '../harness/app.js';
import { tokenFor, workspaceWithData } from '../harness/fixtures.js';
import { first } from '../harness/present.js';
import { restEnv, TEST_API_KEY } from '../harness/rest.js';
import { startCitusCluster, type CitusCluster, type PgNode } from './harness/citus.js';

// Faults of a cluster, each costing only what it must. A worker stopped: the coordinator
// reports it as a connection failure (08006) on the server's sound connection to it, which the
// server threw away (a new connection for every request of the worker's workspaces, the others
// slowed) and answered "the connection with the database was lost". And `authenticator` is
// the cluster's login, whose password `tally migrate` set: a second deployment migrated with
// its own locked the first one's servers out, which then answered 500.

const FIRST = 'tally_faults';
const SECOND = 'tally_faults_second';
let cluster: CitusCluster;
let url: string;
let owner: Sql;
let app: TestApp;
/** A workspace whose shards one worker holds, and a write token's JWT of it, by the worker's port. */
const byWorker = new Map<number, { id: string; jwt: string }>();

beforeAll(async () => {
  cluster = await startCitusCluster({ workers: 2, passwords: true });
  process.env.TALLY_TEST_AUTHENTICATOR_PASSWORD = randomBytes(18).toString('base64url');
  url = await cluster.createDatabase(FIRST);
  await migrate(url);
  owner = postgres(url, { max: 2, onnotice: () => {} });
  await owner`SELECT tally.set_login_password('authenticator', ${process.env.TALLY_TEST_AUTHENTICATOR_PASSWORD!})`;
  for (let i = 0; byWorker.size < 2; i++) {
    if (i === 20) throw new Error('twenty workspaces, and one worker holds them all');
    const ws = await workspaceWithData(owner, `Faults ${i}`);
    const { port } = first(
      await owner<{ port: number }[]>`
        SELECT n.nodeport AS port FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid
         WHERE p.shardid = get_shard_id_for_distribution_column('public.personal_transactions', ${ws.id}::uuid)`,
    );
    if (byWorker.has(port)) continue;
    const t = await tokenFor(owner, ws.id, 'write');
    byWorker.set(port, {
      id: ws.id,
      jwt: await accessToken({ role: 'api_write', workspace_id: ws.id, scope: 'write', sub: t.id }),
    });
  }
  // A long acquisition deadline: the load below queues behind the per-tenant share, never 429s.
  app = startTestApp(url, restEnv({ TALLY_DB_POOL: '4', TALLY_DB_POOL_ACQUISITION_TIMEOUT_MS: '60000' }));
}, 600_000);

afterAll(async () => {
  await app?.close();
  await owner?.end({ timeout: 5 });
  await cluster?.stop();
});

/** A read of the expenses of the workspace whose shards `worker` holds. */
const readOn = (worker: PgNode, server = app) =>
  request(server.app)
    .get('/rest/v1/personal_transactions?select=id')
    .set('apikey', TEST_API_KEY)
    .set('authorization', `Bearer ${byWorker.get(worker.port)!.jwt}`);

/** A new expense in the workspace whose shards `worker` holds. */
const writeOn = (worker: PgNode, name: string) =>
  request(app.app)
    .post('/rest/v1/personal_transactions')
    .set('apikey', TEST_API_KEY)
    .set('authorization', `Bearer ${byWorker.get(worker.port)!.jwt}`)
    .set('prefer', 'return=minimal')
    .send({ name, amount: 1, category_id: 'essentials', method_id: 'cash' });

/** The expenses named `name` the database holds. */
const written = async (name: string) =>
  Number(first(await owner<{ n: string }[]>`SELECT count(*) AS n FROM personal_transactions WHERE name = ${name}`).n);

/** The server's connections to the coordinator, by backend. */
const backends = async () =>
  (
    await owner<{ pid: number }[]>`
      SELECT pid FROM pg_stat_activity WHERE usename = 'authenticator' AND datname = ${FIRST} ORDER BY pid`
  ).map((r) => r.pid);

/** The backends of `before` no longer there. */
const gone = (before: number[], now: number[]) => before.filter((pid) => !now.includes(pid));

test("a stopped worker costs only its own workspaces' requests: 503 TLY006 naming it, the connections kept", async () => {
  const [up, down] = cluster.workers as [PgNode, PgNode];
  // Every slot of the pool opened: requests of both workspaces at once, more than it holds.
  const both = () => Promise.all([...Array<PgNode>(4).fill(up), ...Array<PgNode>(4).fill(down)].map((w) => readOn(w)));
  expect((await both()).map((r) => r.status)).toEqual(Array(8).fill(200));
  const before = await backends();
  await cluster.stopNode(down);
  try {
    // Under load: each round reads both workspaces at once.
    for (let round = 0; round < 3; round++) {
      const answers = await both();
      for (const served of answers.slice(0, 4))
        expect([served.status, served.body]).toEqual([200, [expect.anything()]]);
      for (const refused of answers.slice(4)) {
        expect([refused.status, refused.body]).toEqual([
          503,
          {
            code: 'TLY006',
            message: 'A database node is unreachable',
            details: expect.stringContaining('requests whose data other nodes hold are served'),
            hint: expect.stringMatching(/^Retry in 2 seconds/),
          },
        ]);
        expect(refused.headers['retry-after']).toBe('2');
        // Nothing internal: no node's address, no role, no Citus wording.
        expect(refused.text).not.toMatch(/127\.0\.0\.1|api_read|remote node/);
      }
    }
    // A write of the stopped worker's workspace is refused alike, one of the other's is made.
    const [refused, made] = await Promise.all([writeOn(down, 'during the outage'), writeOn(up, 'beside the outage')]);
    expect([refused.status, refused.body.code, made.status]).toEqual([503, 'TLY006', 201]);
    // The coordinator answered every time: every connection to it there was is still there (a
    // destroyed one is replaced by a backend of another pid).
    expect(gone(before, await backends())).toEqual([]);
  } finally {
    await cluster.startNode(down);
  }
  expect((await readOn(down)).status).toBe(200);
  expect(gone(before, await backends())).toEqual([]);
  // Nothing of the refused write was kept.
  expect([await written('during the outage'), await written('beside the outage')]).toEqual([0, 1]);
});

describe("a second deployment on the cluster, with a password of its own for the cluster's login", () => {
  let secondUrl: string;
  beforeAll(async () => {
    secondUrl = await cluster.createDatabase(SECOND);
    await migrate(secondUrl);
  }, 300_000);
  afterAll(() => cluster.dropDatabase(SECOND));

  /** What `tally migrate` of a deployment ends with: its TALLY_DB_URI's password for the login. */
  const provision = (database: string, password: string) => {
    const login = new URL(database);
    login.username = 'authenticator';
    login.password = password;
    const config = loadConfig({
      DATABASE_URL: database,
      TALLY_DB_URI: login.toString(),
      TALLY_JWT_SECRET: 'x'.repeat(40),
    });
    return provisionServerLogin(config, { url: database, embedded: false, stop: async () => {} });
  };
  const refusal = (databases: string) =>
    `not changing the password of authenticator: the login is shared by every database of this cluster, and the deployments of these databases log in with the password it has, which TALLY_DB_URI's is not: ${databases} (TALLY_DB_URI: password authentication failed for user "authenticator")`;

  test('cannot lock the first out: its `tally migrate` refuses to change the password, and says what to share', async () => {
    const [worker] = cluster.workers as [PgNode];
    await expect(provision(secondUrl, 'a-password-of-its-own')).rejects.toThrow(refusal(FIRST));
    // A server of the first deployment started now (new connections) logs in and serves.
    const fresh = startTestApp(url, restEnv());
    try {
      expect((await readOn(worker, fresh)).status).toBe(200);
    } finally {
      await fresh.close();
    }
    // With the first deployment's password, the second is provisioned (nothing to change), and
    // joins the deployments that log in with it: now the first may not change it either.
    await provision(secondUrl, process.env.TALLY_TEST_AUTHENTICATOR_PASSWORD!);
    await expect(provision(url, 'a-new-password-of-the-first')).rejects.toThrow(refusal(SECOND));
    expect((await readOn(worker)).status).toBe(200);
    const [role] = await owner<{ databases: string[] }[]>`SELECT tally.login_databases('authenticator') AS databases`;
    expect(role!.databases).toEqual([FIRST, SECOND]);
  });

  test('a password changed anyway (by hand) is a 503 to a new server of the first, never a 500; a running one keeps its connections', async () => {
    const [worker] = cluster.workers as [PgNode];
    expect((await readOn(worker)).status).toBe(200);
    const before = await backends();
    await owner`ALTER ROLE authenticator PASSWORD 'changed-by-hand'`;
    const fresh = startTestApp(url, restEnv());
    try {
      const res = await readOn(worker, fresh);
      expect([res.status, res.body.code, res.headers['retry-after']]).toEqual([503, 'PGRST000', '2']);
      // The running server's connections logged in before the change: they go on serving.
      expect((await readOn(worker)).status).toBe(200);
      expect(gone(before, await backends())).toEqual([]);
    } finally {
      await fresh.close();
      await owner`SELECT tally.set_login_password('authenticator', ${process.env.TALLY_TEST_AUTHENTICATOR_PASSWORD!})`;
    }
  });
});
