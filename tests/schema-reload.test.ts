import request from 'supertest';
import { loadConfig } from '../gateway/config.js';
import { notServedYet, runSql } from '../gateway/cli/db-access.js';
import { NEW_FUNCTION_HINT } from '../gateway/engine/errors/catalogue.js';
import { schemaCacheOf } from '../gateway/engine/run.js';
import { accessToken, startTestApp, type TestApp } from './harness/app.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { tokenFor, workspaceWithData } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { stallProxy, type StallProxy } from './harness/stall-proxy.js';
import { waitFor } from './harness/wait.js';

// A DBA's schema change reaches the running servers before `tally sql` returns: each server says
// when it serves it (after its schema cache reloads), and `tally sql` waits for every one of
// them, for five seconds at most. A server that cannot reload in that time is named in a note,
// and while a server reloads, a name its cache misses is answered with a hint to retry.

let db: TestDatabase;
let jwt: string;
const apps: TestApp[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  const ws = await workspaceWithData(db.admin, 'Reload');
  const token = await tokenFor(db.admin, ws.id, 'write');
  jwt = await accessToken({ role: 'api_write', workspace_id: ws.id, scope: 'write', sub: token.id });
});

afterAll(async () => {
  for (const app of apps) await app.close();
  await db.drop();
});

/** `tally sql` as the command runs it: the script, then the wait for the running servers. */
const tallySql = (script: string) => runSql(loadConfig({ DATABASE_URL: db.url }), script);

const functionScript = (name: string) => `
  CREATE FUNCTION public.${name}() RETURNS int LANGUAGE sql STABLE AS $$ SELECT 42 $$;
  GRANT EXECUTE ON FUNCTION public.${name}() TO api_read, api_write;`;

const call = (app: TestApp, name: string) =>
  request(app.app)
    .post(`/rest/v1/rpc/${name}`)
    .set({ apikey: TEST_API_KEY, authorization: `Bearer ${jwt}` })
    .send({});

function started(url: string): TestApp {
  const app = startTestApp(url, restEnv());
  apps.push(app);
  return app;
}

it('returns once every running server serves the change: the very next request to each is a 200', async () => {
  const servers = [started(db.url), started(db.url), started(db.url)];
  // Two have loaded their schema cache (a first request); the third has not asked the database
  // anything yet, and its first request will load the schema as it is then.
  for (const app of servers.slice(0, 2)) expect((await call(app, 'answer')).status).toBe(404);

  const { lines, served } = await tallySql(functionScript('answer'));
  expect(lines).toEqual(['GRANT']);
  expect(served).toEqual({ servers: 2, serving: 2 });
  expect(notServedYet(served)).toBeUndefined();
  for (const app of servers) expect([(await call(app, 'answer')).body]).toEqual([42]);
});

describe('a server whose database connection for the schema hangs', () => {
  let proxy: StallProxy;
  let stuck: TestApp;

  beforeAll(async () => {
    proxy = await stallProxy(db.url, 'tally-control');
    stuck = started(proxy.url);
  });

  afterAll(async () => {
    proxy.resume();
    await stuck.close();
    await proxy.close();
  });

  it('makes tally sql say after five seconds that it may not see the change, and answers its miss with a hint to retry', async () => {
    // No reload: PostgREST's hint, whose cache reloads only when asked.
    const miss = await call(stuck, 'later');
    expect([miss.status, miss.body.code, miss.body.hint]).toEqual([404, 'PGRST202', NEW_FUNCTION_HINT]);
    proxy.stall();

    const { served } = await tallySql(functionScript('later'));
    expect(served.serving).toBe(served.servers - 1);
    expect(notServedYet({ servers: 2, serving: 1 })).toBe(
      '1 of 2 running servers had not reloaded the schema 5 s after the change; until they do, requests to them may not see it',
    );
    // It saw the change (its poll has a connection of its own), and reloads on the connection that hangs.
    await waitFor(() => schemaCacheOf(stuck.ctx).isReloading(), 'the reload to begin');
    const stale = await call(stuck, 'later');
    expect(stale.status).toBe(404);
    expect(stale.body).toMatchObject({
      code: 'PGRST202',
      hint: 'The schema cache is reloading after a change in the database; retry the request in a moment',
    });
    // A miss that suggests another name keeps its hint.
    const close = await request(stuck.app)
      .get('/rest/v1/personal_transaction')
      .set({ apikey: TEST_API_KEY, authorization: `Bearer ${jwt}` });
    expect([close.body.code, close.body.hint]).toEqual([
      'PGRST205',
      "Perhaps you meant the table 'public.personal_transactions'",
    ]);

    proxy.resume();
    await waitFor(async () => (await call(stuck, 'later')).status === 200, 'the server to serve the function');
    await waitFor(() => !schemaCacheOf(stuck.ctx).isReloading(), 'the reloads to end');
    const gone = await call(stuck, 'never_made');
    expect([gone.status, gone.body.hint]).toEqual([404, NEW_FUNCTION_HINT]);
  });
});
