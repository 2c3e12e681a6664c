import request from 'supertest';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';

// The status and headers a request's SQL sets (response.status, response.headers) are that
// request's alone, whatever the SQL did, on a pool of one connection that every workspace shares.

describe('response settings', () => {
  let db: TestDatabase, t: TestApp, jwtA: string, jwtB: string;

  beforeAll(async () => {
    ({ db, t, jwtA, jwtB } = await setUpFinance(restEnv({ TALLY_DB_POOL: '1' })));
    // A function that sets them for the session (is_local false), a DBA's easy mistake.
    await db.admin.unsafe(`
      CREATE FUNCTION public.session_headers() RETURNS int LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM set_config('response.headers', '[{"X-Workspace": "' || (current_setting('request.jwt.claims')::jsonb ->> 'workspace_id') || '"}]', false);
        PERFORM set_config('response.status', '418', false);
        RETURN 1;
      END $$;
      CREATE FUNCTION public.unsendable_header() RETURNS int LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM set_config('response.headers', '[{"Cache-Control": "public, max-age=600"}, {"X-Price": "5 €"}]', true);
        RETURN 1;
      END $$;
      CREATE FUNCTION public.interim_status() RETURNS int LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM set_config('response.status', '103', true);
        RETURN 1;
      END $$;
      GRANT EXECUTE ON FUNCTION public.session_headers(), public.unsendable_header(), public.interim_status()
        TO api_read, api_write;`);
  });
  afterAll(() => tearDown(db, t));

  const get = (path: string, jwt: string) =>
    request(t.app)
      .get(`/rest/v1/${path}`)
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}` });

  it("are not carried into another request's answer, another workspace's least of all", async () => {
    const first = await get('rpc/session_headers', jwtA);
    expect(first.status).toBe(418);
    const other = await get('categories?select=id&limit=1', jwtB);
    expect(other.headers['x-workspace']).toBeUndefined();
    expect(other.status).toBe(200);
  });

  it("that Node could not send are the SQL's mistake (PGRST111), not a bug of Tally, and none of them is sent", async () => {
    const res = await get('rpc/unsendable_header', jwtA);
    expect(res.status).toBe(500);
    expect(res.body.code).toBe('PGRST111');
    expect(res.headers['cache-control']).toBeUndefined();
  });

  it('answer with a final status only: an interim one (103) is PGRST112', async () => {
    const res = await get('rpc/interim_status', jwtA);
    expect(res.status).toBe(500);
    expect(res.body.code).toBe('PGRST112');
  });
});
