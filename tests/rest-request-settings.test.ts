import { jest } from '@jest/globals';
import request from 'supertest';
import { log } from '../gateway/engine/log.js';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';
import { startTestApp } from './harness/app.js';
import { stallProxy } from './harness/stall-proxy.js';
import { createKey } from '../gateway/admin/keys.js';

// What SQL reads of the HTTP request, as behind PostgREST: request.headers, request.cookies,
// request.method and request.path, set in the request's own transaction (a function, the
// pre-request function and row-level security read them), parameters only, gone afterwards.
// One pooled connection, so every request here runs on the one before's connection.

describe('request settings', () => {
  let db: TestDatabase, t: TestApp, jwtA: string, jwtB: string;

  beforeAll(async () => {
    ({ db, t, jwtA, jwtB } = await setUpFinance(
      restEnv({ TALLY_DB_POOL: '1', TALLY_DB_PRE_REQUEST: 'public.guc_pre_request' }),
    ));
    await db.admin.unsafe(`
      CREATE FUNCTION public.guc_value(name text) RETURNS text LANGUAGE sql STABLE
        AS $$ SELECT current_setting(name, true) $$;
      -- The finance check, then an answer that shows what the pre-request function read, when asked.
      CREATE FUNCTION public.guc_pre_request() RETURNS void LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM tally.check_request();
        IF current_setting('request.headers', true)::json ->> 'x-echo' = 'yes' THEN
          RAISE sqlstate 'PT418' USING message = json_build_object(
            'method', current_setting('request.method', true), 'path', current_setting('request.path', true),
            'agent', current_setting('request.headers', true)::json ->> 'user-agent',
            'cookies', current_setting('request.cookies', true)::json)::text;
        END IF;
      END $$;
      -- A policy on a header, as Supabase users write them.
      CREATE TABLE public.guc_notes (id int PRIMARY KEY, label text NOT NULL);
      INSERT INTO public.guc_notes VALUES (1, 'red'), (2, 'blue'), (3, 'red');
      ALTER TABLE public.guc_notes ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
      CREATE POLICY by_header ON public.guc_notes
        USING (label = current_setting('request.headers', true)::json ->> 'x-label');
      GRANT SELECT ON public.guc_notes TO api_read, api_write;
      GRANT EXECUTE ON FUNCTION public.guc_value(text), public.guc_pre_request() TO api_read, api_write;`);
  });
  afterAll(() => tearDown(db, t));

  const auth = (jwt: string) => ({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}` });
  const setting = (name: string, headers: Record<string, string> = {}, jwt = jwtA) =>
    request(t.app)
      .post('/rest/v1/rpc/guc_value')
      .set({ ...auth(jwt), ...headers })
      .send({ name });

  it('gives a function the method and the path below /rest/v1, as sent', async () => {
    expect((await setting('request.method')).body).toBe('POST');
    expect((await setting('request.path')).body).toBe('/rpc/guc_value');
    const get = await request(t.app).get('/rest/v1/rpc/guc_value?name=request.method').set(auth(jwtA));
    expect(get.body).toBe('GET');
    const path = await request(t.app).get('/rest/v1/rpc/%67uc_value?name=request.path').set(auth(jwtA));
    expect(path.body).toBe('/rpc/%67uc_value');
  });

  it('gives the headers as one JSON object, names lower-cased, the cookies apart', async () => {
    const res = await setting('request.headers', { 'X-Custom-Header': 'test', Cookie: 'session=secret' });
    expect(res.status).toBe(200);
    const headers = JSON.parse(res.body as string) as Record<string, string>;
    expect(headers).toMatchObject({ 'x-custom-header': 'test', 'content-type': 'application/json' });
    // Neither the cookies nor the credentials: who the caller is, SQL reads in request.jwt.claims.
    expect(Object.keys(headers).filter((h) => ['cookie', 'authorization', 'apikey'].includes(h))).toEqual([]);
    // Header bytes are read as UTF-8, as PostgREST reads them; bytes that are not UTF-8 as Latin-1.
    // (A GET: Node's client writes its header text as Latin-1 bytes only when no body follows.)
    const bytes = await request(t.app)
      .get('/rest/v1/rpc/guc_value?name=request.headers')
      .set({
        ...auth(jwtA),
        'X-Utf8': Buffer.from('caf\u00e9 \u20ac', 'utf8').toString('latin1'),
        'X-Latin': 'caf\u00e9',
      });
    expect(JSON.parse(bytes.body as string)).toMatchObject({ 'x-utf8': 'caf\u00e9 \u20ac', 'x-latin': 'caf\u00e9' });
    const cookies = await setting('request.cookies', { Cookie: 'acookie=cookievalue;secondcookie=anothervalue' });
    expect(JSON.parse(cookies.body as string)).toEqual({ acookie: 'cookievalue', secondcookie: 'anothervalue' });
    expect(JSON.parse((await setting('request.cookies')).body as string)).toEqual({});
  });

  it('lets a row-level security policy decide on a header', async () => {
    const notes = (label?: string) =>
      request(t.app)
        .get('/rest/v1/guc_notes?select=id&order=id')
        .set({ ...auth(jwtA), ...(label ? { 'X-Label': label } : {}) });
    expect((await notes('red')).body).toEqual([{ id: 1 }, { id: 3 }]);
    expect((await notes('blue')).body).toEqual([{ id: 2 }]);
    expect((await notes()).body).toEqual([]);
  });

  it('takes hostile values as data: quotes, backslashes, non-ASCII bytes, a long value, many headers, cookies twice', async () => {
    const hostile = `'); DROP TABLE public.guc_notes; --\\"\\u0000 $1 \\\\' E'`;
    const many = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`x-many-${i}`, `v${i}'"`]));
    const res = await setting('request.headers', {
      'X-Hostile': hostile,
      'X-Long': 'x'.repeat(8000),
      ...many,
    });
    expect(res.status).toBe(200);
    const headers = JSON.parse(res.body as string) as Record<string, string>;
    expect(headers['x-hostile']).toBe(hostile);
    expect(headers['x-long']).toHaveLength(8000);
    expect(headers['x-many-99']).toBe(`v99'"`);
    const cookies = await setting('request.cookies', {
      Cookie: `a=1; __proto__=polluted; a="2\\"'"; noequals; =nameless; b=x=y`,
    });
    expect(cookies.status).toBe(200);
    expect(JSON.parse(cookies.body as string)).toEqual({
      a: `"2\\"'"`,
      ['__proto__']: 'polluted',
      noequals: '',
      b: 'x=y',
    });
    expect(
      (
        await request(t.app)
          .get('/rest/v1/guc_notes?select=id')
          .set({ ...auth(jwtA), 'X-Label': hostile })
      ).body,
    ).toEqual([]);
    expect(await db.admin`SELECT count(*)::int AS count FROM public.guc_notes`).toEqual([{ count: 3 }]);
  });

  it("are the request's own: the next request on the connection sees its own, another workspace's too", async () => {
    await setting('request.headers', { 'X-Secret': 'only-for-a', Cookie: 'a=only-for-a' });
    const next = await setting('request.headers', {}, jwtB);
    expect(next.body).not.toContain('only-for-a');
    expect(JSON.parse(next.body as string)).toMatchObject({ 'content-type': 'application/json' });
    expect((await setting('request.cookies', {}, jwtB)).body).toBe('{}');
  });

  it('are read by the pre-request function, and on /api/v1 are the call\u2019s method and path with its own headers', async () => {
    const rest = await request(t.app)
      .get('/rest/v1/categories?select=id')
      .set({ ...auth(jwtA), 'X-Echo': 'yes', 'User-Agent': 'guc-test', Cookie: 'c=1' });
    expect(rest.status).toBe(418);
    expect(JSON.parse(rest.body.message as string)).toEqual({
      method: 'GET',
      path: '/categories',
      agent: 'guc-test',
      cookies: { c: '1' },
    });
    const api = await request(t.app)
      .get('/api/v1/personal_transactions')
      .set({ Authorization: `Bearer ${jwtA}`, 'X-Echo': 'yes', 'User-Agent': 'guc-test', Cookie: 'c=2' });
    expect(api.status).toBe(418);
    expect(JSON.parse(api.body.message as string)).toEqual({
      method: 'GET',
      path: '/personal_transactions',
      agent: 'guc-test',
      cookies: { c: '2' },
    });
  });

  it('never puts a header value in the log, even of a request that failed', async () => {
    const spies = (['debug', 'info', 'warn', 'error'] as const).map((level) => jest.spyOn(log, level));
    try {
      await setting('request.headers', { 'X-Secret': 'logged-nowhere' });
      await request(t.app)
        .post('/rest/v1/rpc/guc_value')
        .set({ ...auth(jwtA), 'X-Secret': 'logged-nowhere' })
        .send('{');
      const logged = JSON.stringify(spies.flatMap((s) => s.mock.calls));
      expect(logged).not.toContain('logged-nowhere');
      expect(logged).not.toContain(jwtA);
    } finally {
      for (const s of spies) s.mockRestore();
    }
  });
  // A database that logs statements with their parameters (log_statement = 'all',
  // log_min_duration_statement) logs what the server sends it: the setup statement carried the
  // caller's JWT and apikey there, in request.headers. Now no credential crosses the wire.
  it('sends the database no credential: neither the JWT nor the apikey is in any byte it is sent', async () => {
    const proxy = await stallProxy(db.url, 'tally');
    const tapped = startTestApp(proxy.url, restEnv({ TALLY_DB_PRE_REQUEST: 'public.guc_pre_request' }));
    try {
      const { key } = await createKey(db.admin, 'wire test', 'test');
      const headers = { apikey: key, Authorization: `Bearer ${jwtA}`, 'X-Visible': 'sent-to-sql' };
      const rest = await request(tapped.app)
        .post('/rest/v1/rpc/guc_value')
        .set(headers)
        .send({ name: 'request.headers' });
      expect(rest.status).toBe(200);
      expect(JSON.parse(rest.body as string)).toMatchObject({ 'x-visible': 'sent-to-sql' });
      const api = await request(tapped.app)
        .get('/api/v1/contacts')
        .set({ Authorization: `Bearer ${jwtA}` });
      expect(api.status).toBe(200);
      const wire = proxy.sent().toString('latin1');
      expect(wire).toContain('sent-to-sql'); // the tap sees the request's headers
      for (const [what, secret] of [
        ['the JWT', jwtA],
        ['its signature', jwtA.split('.')[2]!],
        ['the apikey', key],
      ] as const)
        expect(`${what}: ${wire.includes(secret)}`).toBe(`${what}: false`);
    } finally {
      await tapped.close();
      await proxy.close();
    }
  });
});
