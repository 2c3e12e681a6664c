import request from 'supertest';
import type { AuthContext, GatewayRequest } from '../gateway/engine/call.js';
import { createGateway } from '../gateway/engine/run.js';
import { compile, sql, type Fragment } from '../gateway/engine/sql.js';
import { signJwt, type TestApp } from './harness/app.js';
import type { TestDatabase } from './harness/db.js';
import { TEST_API_KEY } from './harness/rest.js';
import { setUpBlog, tearDown } from './harness/suite.js';

// Every kind of request runs in a transaction made from the same settings (execute.ts,
// transactionSettings): a read, a write, a function call and the OpenAPI description of the
// root. The pre-request function sees the transaction as the request's statements do; this one
// reports what it sees when the caller's claims ask it to.

let db: TestDatabase, t: TestApp, probe: string;

beforeAll(async () => {
  ({ db, t } = await setUpBlog(['blog.sql'], {
    TALLY_DB_PRE_REQUEST: 'blog.report_transaction',
    TALLY_DB_WORK_MEM: '3MB',
    TALLY_DB_STATEMENT_TIMEOUT_MS: '4321',
    // as Supabase configures PostgREST, so that PostGIS installed in schema extensions is found
    TALLY_DB_EXTRA_SEARCH_PATH: 'public, extensions',
  }));
  await db.admin.unsafe(`
    CREATE FUNCTION blog.report_transaction() RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
      IF pg_catalog.current_setting('request.jwt.claims', true)::jsonb ->> 'report' = 'yes' THEN
        RAISE SQLSTATE 'PT418' USING MESSAGE = pg_catalog.concat_ws(' | ',
          'work_mem ' || pg_catalog.current_setting('work_mem'),
          'statement_timeout ' || pg_catalog.current_setting('statement_timeout'),
          'role ' || current_user,
          'search_path ' || pg_catalog.current_setting('search_path'));
      END IF;
    END $$;
    GRANT EXECUTE ON FUNCTION blog.report_transaction() TO blog_anon, blog_user;`);
  probe = await signJwt({ role: 'blog_user', report: 'yes' });
});
afterAll(() => tearDown(db, t));

/** What the pre-request function saw of the transaction of GET `path`. */
async function seen(path: string, headers: Record<string, string> = {}): Promise<string> {
  let req = request(t.app).get(path).set('apikey', TEST_API_KEY).set('authorization', `Bearer ${probe}`);
  for (const [k, v] of Object.entries(headers)) req = req.set(k, v);
  const res = await req;
  expect(res.status).toBe(418);
  return res.body.message as string;
}

describe('the transaction of every kind of request', () => {
  it('is the same for the OpenAPI description as for a read: work_mem, statement timeout, role, search_path', async () => {
    const read = await seen('/rest/v1/posts');
    expect(read).toBe(
      'work_mem 3MB | statement_timeout 4321ms | role blog_user | search_path "blog", "public", "extensions"',
    );
    expect(await seen('/rest/v1/')).toBe(read);
    expect(await seen('/rest/v1/', { Accept: 'application/vnd.oai.openapi+json' })).toBe(read);
  });

  it('describes the root to a caller the pre-request function accepts', async () => {
    const res = await request(t.app)
      .get('/rest/v1/')
      .set('apikey', TEST_API_KEY)
      .set('authorization', `Bearer ${await signJwt({ role: 'blog_user' })}`)
      .expect(200);
    expect(res.headers['content-type']).toBe('application/openapi+json; charset=utf-8');
    expect(Object.keys(res.body.paths)).toContain('/posts');
  });
});

describe("a gateway call's own answer about its transaction", () => {
  const read: GatewayRequest = {
    method: 'GET',
    relation: 'posts',
    query: new URLSearchParams('select=id&limit=1'),
    headers: {},
  };
  const user = (verify?: Fragment): AuthContext => ({
    role: 'blog_user',
    claims: { role: 'blog_user' },
    ...(verify === undefined ? {} : { verify: compile(verify) }),
  });

  it('carries its database time, and whether the caller’s own check passed in it', async () => {
    const call = createGateway(t.ctx);
    const plain = await call(read, user());
    expect(plain.timing).toEqual({ poolMs: expect.any(Number), dbMs: expect.any(Number) });
    expect(plain.verified).toBe(false);
    expect((await call(read, user(sql`SELECT 1`))).verified).toBe(true);
  });

  it('runs the caller’s check before the request’s statements: a refused caller writes nothing', async () => {
    const call = createGateway(t.ctx);
    const write: GatewayRequest = {
      method: 'POST',
      relation: 'posts',
      query: new URLSearchParams(),
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ site: 'checked', id: 1, author_id: 1, title: 'never' }),
    };
    await expect(call(write, user(sql`SELECT 1 / 0`))).rejects.toMatchObject({
      status: 400,
      code: '22012',
      timing: { poolMs: expect.any(Number), dbMs: expect.any(Number) },
    });
    expect(await db.admin`SELECT 1 FROM blog.posts WHERE site = 'checked'`).toHaveLength(0);
  });
});
