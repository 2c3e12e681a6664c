import { randomBytes } from 'node:crypto';
import postgres, { type Sql } from 'postgres';
import request from 'supertest';
import { migrate } from '../../gateway/db/migrate.js';
import { accessToken, startTestApp } from '../harness/app.js';
import { tokenFor, workspaceWithData } from '../harness/fixtures.js';
import { restEnv, TEST_API_KEY } from '../harness/rest.js';
import { startCitusCluster, type CitusCluster } from './harness/citus.js';

// Two Tally databases on one Citus cluster, whose servers log in with passwords as in a
// deployment. The API roles are the cluster's (roles are cluster-wide) and log in to the workers
// with the secret each database keeps in its pg_dist_authinfo: `tally migrate` of the second
// database once gave the roles new secrets, and every request of the first that reached a worker
// then failed to log in there.

let cluster: CitusCluster;
const owners: Sql[] = [];

beforeAll(async () => {
  cluster = await startCitusCluster({ workers: 2, passwords: true });
  process.env.TALLY_TEST_AUTHENTICATOR_PASSWORD = randomBytes(18).toString('base64url');
});
afterAll(async () => {
  for (const owner of owners) await owner.end({ timeout: 5 });
  await cluster?.stop();
});

/** A migrated Tally database on the cluster, a workspace in it, and a server on it. */
async function tallyDatabase(name: string) {
  const url = await cluster.createDatabase(name);
  await migrate(url);
  const owner = postgres(url, { max: 2, onnotice: () => {} });
  owners.push(owner);
  await owner`SELECT tally.set_login_password('authenticator', ${process.env.TALLY_TEST_AUTHENTICATOR_PASSWORD!})`;
  const ws = await workspaceWithData(owner, name);
  const t = await tokenFor(owner, ws.id, 'read');
  const jwt = await accessToken({ role: 'api_read', workspace_id: ws.id, scope: 'read', sub: t.id });
  /**
   * A read of the workspace's expenses, which runs on the worker holding its shard, by a server
   * started for it: Citus keeps a session's connections to the workers, and one that logged in
   * before a password changed goes on working, so only new connections show it.
   */
  const read = async () => {
    const app = startTestApp(url, restEnv());
    try {
      const res = await request(app.app)
        .get('/rest/v1/personal_transactions?select=id')
        .set('apikey', TEST_API_KEY)
        .set('authorization', `Bearer ${jwt}`);
      return `${res.status} ${Array.isArray(res.body) ? `${res.body.length} rows` : JSON.stringify(res.body)}`;
    } finally {
      await app.close();
    }
  };
  return { read };
}

it('each serves its requests on the workers, whichever was migrated last, and again', async () => {
  const first = await tallyDatabase('tally_first');
  expect(await first.read()).toBe('200 1 rows');
  const second = await tallyDatabase('tally_second');
  expect(await second.read()).toBe('200 1 rows');
  expect(await first.read()).toBe('200 1 rows');
  // Migrating either again changes no secret the other relies on.
  await migrate(cluster.coordinator.url('tally_first'));
  expect(await second.read()).toBe('200 1 rows');
  expect(await first.read()).toBe('200 1 rows');
});
