import request from 'supertest';
import { PostgrestClient } from '@supabase/postgrest-js';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import { TEST_API_KEY } from './harness/rest.js';
import { setUpBlog, tearDown } from './harness/suite.js';
import { first } from './harness/present.js';
import { waitFor } from './harness/wait.js';

// Functions as endpoints (PostgREST's /rpc) on the generic blog schema: named, single-object and
// GET arguments, overloads and their errors, table-typed results composed with the read grammar,
// scalars, void, and the transaction model (READ ONLY for GET and non-VOLATILE functions).

describe('/rest/v1/rpc (blog schema)', () => {
  let db: TestDatabase, t: TestApp, userJwt: string;
  beforeAll(async () => {
    ({ db, t, userJwt } = await setUpBlog(['blog.sql', 'blog-functions.sql']));
  });
  afterAll(() => tearDown(db, t));

  const get = (path: string, headers: Record<string, string> = {}) =>
    request(t.app)
      .get(`/rest/v1/rpc/${path}`)
      .set({ apikey: TEST_API_KEY, ...headers });
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    request(t.app)
      .post(`/rest/v1/rpc/${path}`)
      .set({ apikey: TEST_API_KEY, 'Content-Type': 'application/json', ...headers })
      .send(JSON.stringify(body));

  describe('arguments', () => {
    it('takes named arguments from a JSON object (POST) and from the query (GET)', async () => {
      const p = await post('add_them', { a: 1, b: 2 });
      expect(p.status).toBe(200);
      expect(p.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(p.text).toBe('3');
      const g = await get('add_them?a=40&b=2');
      expect(g.status).toBe(200);
      expect(g.body).toBe(42);
    });

    it('casts arguments to the parameter types: arrays from JSON and from array literals', async () => {
      expect((await post('tag_ids', { ids: [3, 1] })).body).toEqual(['intro', 'rest']);
      expect((await get('tag_ids?ids=%7B2,3%7D')).body).toEqual(['postgres', 'rest']);
      const bad = await get('add_them?a=one&b=2');
      expect(bad.status).toBe(400);
      expect(bad.body.code).toBe('22P02');
    });

    it('passes the whole body to one unnamed json parameter, and to a named one with Prefer: params=single-object', async () => {
      const unnamed = await post('echo', { x: 4, y: [1, 2] });
      expect(unnamed.status).toBe(200);
      expect(unnamed.body).toEqual({ x: 4, y: [1, 2] });
      const single = await post('wrap', { anything: 'goes' }, { Prefer: 'params=single-object' });
      expect(single.body).toEqual({ got: { anything: 'goes' } });
      const named = await post('wrap', { payload: { anything: 'goes' } });
      expect(named.body).toEqual({ got: { anything: 'goes' } });
    });

    it('resolves overloads by argument names, defaults included', async () => {
      expect((await post('greet', { name: 'Ada', title: 'Dr' })).body).toBe('Hello, Dr Ada');
      expect((await get('greet?name=Ada&shout=false')).body).toBe('hello, Ada');
    });

    it('answers PGRST203 (300) when the names fit more than one overload', async () => {
      const res = await get('greet?name=Ada');
      expect(res.status).toBe(300);
      expect(res.body.code).toBe('PGRST203');
      expect(res.body.message).toContain(
        'Could not choose the best candidate function between: blog.greet(name => text)',
      );
      expect(res.body.message).toContain('blog.greet(name => text, shout => bool)');
    });

    it('answers PGRST202 (404) for unknown functions and unknown argument names', async () => {
      const unknown = await post('nope', { a: 1 });
      expect(unknown.status).toBe(404);
      expect(unknown.body).toMatchObject({
        code: 'PGRST202',
        message: 'Could not find the function blog.nope(a) in the schema cache',
      });
      const wrongArgs = await post('add_them', { a: 1, c: 2 });
      expect(wrongArgs.status).toBe(404);
      expect(wrongArgs.body.code).toBe('PGRST202');
      expect(wrongArgs.body.details).toContain('with parameters a, c');
      const missing = await get('add_them?a=1');
      expect(missing.status).toBe(404);
      expect(missing.body.code).toBe('PGRST202');
    });

    it("words PGRST202 as PostgREST does for the request's method, media type and argument count", async () => {
      const notFound = (res: request.Response) => {
        expect(res.status).toBe(404);
        return { code: res.body.code, message: res.body.message, details: res.body.details };
      };
      const searched = (what: string) =>
        `Searched for the function ${what}, but no matches were found in the schema cache.`;
      expect(notFound(await get('add_thm'))).toEqual({
        code: 'PGRST202',
        message: 'Could not find the function blog.add_thm without parameters in the schema cache',
        details: searched('blog.add_thm without parameters'),
      });
      expect(notFound(await get('add_them?c=1'))).toMatchObject({
        message: 'Could not find the function blog.add_them(c) in the schema cache',
        details: searched('blog.add_them with parameter c'),
      });
      expect(notFound(await get('add_them?a=1&b=2&c=3'))).toMatchObject({
        message: 'Could not find the function blog.add_them(a, b, c) in the schema cache',
        details: searched('blog.add_them with parameters a, b, c'),
      });
      // The hint suggests the overload whose parameter names read closest, as PostgREST's does.
      expect((await get('add_them?a=1&b=2&c=3')).body.hint).toBe(
        'Perhaps you meant to call the function blog.add_them(a, b)',
      );
      expect((await get('add_them?zzzzzzzzzz=1')).body.hint).toBe(
        'If a new function was created in the database with this name and parameters, try reloading the schema cache.',
      );
      expect(notFound(await post('add_them', { c: 1 }))).toMatchObject({
        details: searched('blog.add_them with parameter c or with a single unnamed json/jsonb parameter'),
      });
      expect(notFound(await post('nope', {}))).toMatchObject({
        message: 'Could not find the function blog.nope without parameters in the schema cache',
        details: searched('blog.nope without parameters or with a single unnamed json/jsonb parameter'),
      });
      const form = await request(t.app)
        .post('/rest/v1/rpc/add_them')
        .set({ apikey: TEST_API_KEY, 'Content-Type': 'application/x-www-form-urlencoded' })
        .send('c=1');
      expect(notFound(form).details).toBe(searched('blog.add_them with parameter c'));
      for (const [type, param] of [
        ['text/plain', 'text'],
        ['text/xml', 'xml'],
        ['application/octet-stream', 'bytea'],
      ]) {
        const raw = await request(t.app)
          .post('/rest/v1/rpc/add_them')
          .set({ apikey: TEST_API_KEY, 'Content-Type': type! })
          .send('1');
        expect(raw.status).toBe(404);
        expect(raw.body).toEqual({
          code: 'PGRST202',
          message: 'Could not find the function blog.add_them in the schema cache',
          details: searched(`blog.add_them with a single unnamed ${param} parameter`),
          hint: null,
        });
      }
    });

    it('passes a text/plain, text/xml or application/octet-stream body whole to the one unnamed parameter of its type', async () => {
      const raw = (type: string, body: string | Buffer) =>
        request(t.app).post('/rest/v1/rpc/raw_body').set({ apikey: TEST_API_KEY, 'Content-Type': type }).send(body);
      const text = await raw('text/plain', 'a {"not": json}');
      expect(text.status).toBe(200);
      expect(text.body).toBe('text:a {"not": json}');
      expect((await raw('text/plain; charset=utf-8', 'ü')).body).toBe('text:ü');
      expect((await raw('text/xml', '<a>1</a>')).body).toBe('xml:<a>1</a>');
      expect((await raw('application/octet-stream', Buffer.from('AZ\u00e9'))).body).toBe('bytea:415ac3a9');
      // A GET reads no body: its Content-Type does not choose the overload.
      expect((await get('raw_body', { 'Content-Type': 'text/plain' })).body).toBe(1);
    });

    it('only allows GET, HEAD and POST', async () => {
      const res = await request(t.app)
        .patch('/rest/v1/rpc/add_them')
        .set({ apikey: TEST_API_KEY })
        .send({ a: 1, b: 2 });
      expect(res.status).toBe(405);
      expect(res.body.code).toBe('PGRST101');
    });
  });

  describe('results', () => {
    it('composes a set-returning table-typed function with select, embedding, filters, order, limit and counts', async () => {
      const res = await get(
        'posts_by?author=1&select=site,id,title,users!posts_editor_fkey(name),comments(body)&order=id.desc&comments.order=body',
        { Prefer: 'count=exact' },
      );
      expect(res.status).toBe(200);
      expect(res.headers['content-range']).toBe('0-1/2');
      expect(res.body).toEqual([
        { site: 'a', id: 2, title: 'Second post', users: null, comments: [{ body: 'More please' }] },
        {
          site: 'a',
          id: 1,
          title: 'Hello world',
          users: { name: 'Grace' },
          comments: [{ body: 'Agreed' }, { body: 'Nice post' }],
        },
      ]);
      const filtered = await post('posts_by?select=title&rating=gt.4&limit=1&offset=0', { author: 1 });
      expect(filtered.body).toEqual([{ title: 'Hello world' }]);
      const page = await get('posts_by?author=1&select=id&order=id&offset=1', { Prefer: 'count=exact' });
      expect(page.status).toBe(206);
      expect(page.headers['content-range']).toBe('1-1/2');
    });

    it('answers one object with Accept: application/vnd.pgrst.object+json, 406 when not exactly one row', async () => {
      const one = await get('posts_by?author=3&select=title', { Accept: 'application/vnd.pgrst.object+json' });
      expect(one.status).toBe(200);
      expect(one.body).toEqual({ title: 'Kernel notes' });
      const many = await get('posts_by?author=1&select=title', { Accept: 'application/vnd.pgrst.object+json' });
      expect(many.status).toBe(406);
      expect(many.body.code).toBe('PGRST116');
    });

    it('returns one object for a function returning a single row, with select and embedding', async () => {
      const res = await get('post_of?site=b&id=2&select=title,users!posts_author_id_fkey(name)');
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ title: 'Kernel notes', users: { name: 'Linus' } });
    });

    it('filters and orders OUT columns of RETURNS TABLE; a set of scalars is an array', async () => {
      const res = await get('post_counts?posts=gte.1&order=author');
      expect(res.body).toEqual([
        { author: 'Ada', posts: 2 },
        { author: 'Grace', posts: 1 },
        { author: 'Linus', posts: 1 },
      ]);
      expect((await get('numbers?n=3')).body).toEqual([1, 2, 3]);
    });

    it('runs a VOLATILE void function over POST (204) and commits; Prefer: tx=rollback undoes it', async () => {
      const auth = { Authorization: `Bearer ${userJwt}` };
      const rolled = await post('rename_user', { uid: 3, new_name: 'Torvalds' }, { ...auth, Prefer: 'tx=rollback' });
      expect(rolled.status).toBe(204);
      expect(rolled.headers['preference-applied']).toBe('tx=rollback');
      expect(first(await db.admin`SELECT name FROM blog.users WHERE id = 3`).name).toBe('Linus');
      const res = await post('rename_user', { uid: 3, new_name: 'Torvalds' }, auth);
      expect(res.status).toBe(204);
      expect(res.text).toBe('');
      expect(first(await db.admin`SELECT name FROM blog.users WHERE id = 3`).name).toBe('Torvalds');
      await db.admin`UPDATE blog.users SET name = 'Linus' WHERE id = 3`;
    });

    it('runs a VOLATILE function over GET read-only, as PostgREST: its write fails with 405 / 25006', async () => {
      const res = await get('rename_user?uid=3&new_name=x', { Authorization: `Bearer ${userJwt}` });
      expect(res.status).toBe(405);
      expect(res.body.code).toBe('25006');
      expect(first(await db.admin`SELECT name FROM blog.users WHERE id = 3`).name).toBe('Linus');
    });

    it('runs GET (and POST to a STABLE function) READ ONLY: a write inside fails with 405 / 25006', async () => {
      const viaGet = await get('sneaky_count');
      expect(viaGet.status).toBe(405);
      expect(viaGet.body.code).toBe('25006');
      expect(viaGet.body.message).toContain('read-only transaction');
      const viaPost = await post('sneaky_count', {});
      expect(viaPost.status).toBe(405);
      expect(viaPost.body.code).toBe('25006');
    });

    it('runs as the JWT role, and EXECUTE grants hold', async () => {
      expect((await get('whoami')).body).toBe('blog_anon');
      expect((await get('whoami', { Authorization: `Bearer ${userJwt}` })).body).toBe('blog_user');
      const anon = await post('rename_user', { uid: 3, new_name: 'x' });
      expect(anon.status).toBe(401);
      expect(anon.body.code).toBe('42501');
    });

    it('serves a new function after NOTIFY pgrst', async () => {
      await db.admin.unsafe(
        `CREATE FUNCTION blog.late(x int) RETURNS int LANGUAGE sql IMMUTABLE AS $$ SELECT x * 2 $$`,
      );
      await db.admin.unsafe(`NOTIFY pgrst, 'reload schema'`);
      await waitFor(async () => (await get('late?x=21')).status === 200, 'the new function');
      expect((await get('late?x=21')).body).toBe(42);
    });
  });

  describe('supabase-js (postgrest-js) rpc()', () => {
    const client = () =>
      new PostgrestClient('http://tally.test/rest/v1', {
        headers: { apikey: TEST_API_KEY },
        schema: 'blog',
        fetch: (async (input: string | URL, init?: RequestInit) => {
          const url = new URL(String(input));
          const method = (init?.method ?? 'GET').toLowerCase() as 'get' | 'post' | 'head';
          let r = request(t.app)[method](url.pathname + url.search);
          for (const [k, v] of Object.entries((init?.headers ?? {}) as Record<string, string>)) r = r.set(k, v);
          const res = init?.body !== undefined ? await r.send(String(init.body)) : await r;
          return new Response(method === 'head' || res.status === 204 ? null : res.text, {
            status: res.status,
            headers: res.headers as Record<string, string>,
          });
        }) as typeof fetch,
      });

    it('calls functions by POST and GET, with filters and single()', async () => {
      const sum = await client().rpc('add_them', { a: 2, b: 3 });
      expect(sum.error).toBeNull();
      expect(sum.data).toBe(5);
      const viaGet = await client().rpc('add_them', { a: 2, b: 5 }, { get: true });
      expect(viaGet.data).toBe(7);
      const posts = await client().rpc('posts_by', { author: 1 }).select('title').gt('rating', 4).single();
      expect(posts.error).toBeNull();
      expect(posts.data).toEqual({ title: 'Hello world' });
      const missing = await client().rpc('nope' as never);
      expect(missing.error?.code).toBe('PGRST202');
    });
  });
});
