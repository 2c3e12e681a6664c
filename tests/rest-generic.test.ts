import request from 'supertest';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import { TEST_API_KEY } from './harness/rest.js';
import { setUpBlog, tearDown } from './harness/suite.js';
import { schemaCacheOf } from '../gateway/engine/run.js';
import { waitFor } from './harness/wait.js';

// The gateway knows no table by name: pointed at another schema by configuration alone, it
// serves it with the same grammar. The blog fixture has composite keys, two foreign keys to one
// table, a many-to-many junction, a view, jsonb, tsvector and a range column.

describe('generic gateway on a second schema (blog)', () => {
  let db: TestDatabase, t: TestApp, userJwt: string;
  beforeAll(async () => {
    ({ db, t, userJwt } = await setUpBlog());
  });
  afterAll(() => tearDown(db, t));

  const get = (path: string, headers: Record<string, string> = {}) =>
    request(t.app)
      .get(`/rest/v1/${path}`)
      .set({ apikey: TEST_API_KEY, ...headers });

  it('reads a table as the anonymous role with Content-Range', async () => {
    const res = await get('users?select=id,name&order=id');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers['content-range']).toBe('0-2/*');
    expect(res.body).toEqual([
      { id: 1, name: 'Ada' },
      { id: 2, name: 'Grace' },
      { id: 3, name: 'Linus' },
    ]);
  });

  it('embeds many-to-one through a composite key and disambiguates two foreign keys to one table', async () => {
    const ambiguous = await get('posts?select=title,users(name)');
    expect(ambiguous.status).toBe(300);
    expect(ambiguous.body.code).toBe('PGRST201');
    expect(ambiguous.body.hint).toContain("'users!posts_editor_fkey'");

    const res = await get(
      'posts?select=site,id,author:users!posts_author_id_fkey(name),editor:users!editor_id(name)&order=site,id',
    );
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { site: 'a', id: 1, author: { name: 'Ada' }, editor: { name: 'Grace' } },
      { site: 'a', id: 2, author: { name: 'Ada' }, editor: null },
      { site: 'b', id: 1, author: { name: 'Grace' }, editor: { name: 'Ada' } },
      { site: 'b', id: 2, author: { name: 'Linus' }, editor: { name: 'Linus' } },
    ]);
  });

  it('embeds one-to-many over a composite foreign key, with embedded filters, order and limit', async () => {
    const res = await get(
      'posts?select=site,id,comments(body)&comments.order=body.desc&comments.limit=1&site=eq.a&order=id',
    );
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { site: 'a', id: 1, comments: [{ body: 'Nice post' }] },
      { site: 'a', id: 2, comments: [{ body: 'More please' }] },
    ]);
  });

  it('embeds many-to-many through the junction table, nested, with !inner', async () => {
    const res = await get('posts?select=id,site,tags(name),comments!inner(body,users(name))&comments.body=eq.Indeed');
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { id: 2, site: 'b', tags: [{ name: 'postgres' }], comments: [{ body: 'Indeed', users: { name: 'Ada' } }] },
    ]);
    const tags = await get('tags?select=name,posts(title)&order=id&posts.order=title');
    expect(tags.body).toEqual([
      { name: 'intro', posts: [{ title: 'Hello world' }] },
      { name: 'postgres', posts: [{ title: 'Hello world' }, { title: 'Kernel notes' }] },
      { name: 'rest', posts: [{ title: 'Second post' }] },
    ]);
  });

  it('serves a view and embeds through it (column origins from the view definition)', async () => {
    const res = await get('published_posts?select=title,users(name)&order=title');
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { title: 'Hello world', users: { name: 'Ada' } },
      { title: 'Kernel notes', users: { name: 'Linus' } },
      { title: 'Second post', users: { name: 'Ada' } },
    ]);
  });

  it('filters jsonb paths, tsvector, ranges and arrays; selects paths, casts and computed fields', async () => {
    const json = await get('users?select=id,theme:prefs->>theme,code:prefs->lang->>code&prefs->lang->>code=eq.fr');
    expect(json.body).toEqual([{ id: 2, theme: 'light', code: 'fr' }]);
    const fts = await get('posts?select=id,site&search=fts(english).postgres&order=site');
    expect(fts.body).toEqual([{ id: 1, site: 'a' }]);
    const wfts = await get('posts?select=title&search=wfts(english).show code');
    expect(wfts.body).toEqual([{ title: 'Kernel notes' }]);
    const range = await get('posts?select=title&active=ov.[2024-03-01,2024-03-02]');
    expect(range.body).toEqual([{ title: 'Hello world' }]);
    const before = await get('posts?select=title&active=sl.[2024-01-01,2024-01-02]');
    expect(before.body).toEqual([{ title: 'Kernel notes' }]);
    const arr = await get('posts?select=title&tags=cs.{pg}&order=title');
    expect(arr.body).toEqual([{ title: 'Hello world' }, { title: 'Kernel notes' }]);
    const cast = await get('posts?select=id::text,upper:title_upper&site=eq.b&order=id');
    expect(cast.body).toEqual([
      { id: '1', upper: 'BONJOUR' },
      { id: '2', upper: 'KERNEL NOTES' },
    ]);
    const computedFilter = await get('posts?select=id&title_upper=eq.BONJOUR');
    expect(computedFilter.body).toEqual([{ id: 1 }]);
    const views = await get('posts?select=title&meta->views=gt.9&order=title');
    expect(views.body).toEqual([{ title: 'Hello world' }, { title: 'Kernel notes' }]);
  });

  it('keeps not-granted tables closed: 401 for anon, 403 with a JWT', async () => {
    const anon = await get('secrets');
    expect(anon.status).toBe(401);
    expect(anon.body.code).toBe('42501');
    const user = await get('secrets', { Authorization: `Bearer ${userJwt}` });
    expect(user.status).toBe(403);
    expect(user.body.code).toBe('42501');
  });

  it('writes with the JWT role: bulk insert, embedded representation, upsert on a composite key', async () => {
    const res = await request(t.app)
      .post('/rest/v1/posts?select=site,id,title,users!posts_author_id_fkey(name)')
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${userJwt}`, Prefer: 'return=representation' })
      .send([
        { site: 'c', id: 1, author_id: 2, title: 'New' },
        { site: 'c', id: 2, author_id: 3, title: 'Newer' },
      ]);
    expect(res.status).toBe(201);
    expect(res.body).toEqual([
      { site: 'c', id: 1, title: 'New', users: { name: 'Grace' } },
      { site: 'c', id: 2, title: 'Newer', users: { name: 'Linus' } },
    ]);
    const upsert = await request(t.app)
      .post('/rest/v1/posts')
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${userJwt}`, Prefer: 'resolution=merge-duplicates' })
      .send({ site: 'c', id: 1, author_id: 1, title: 'Renamed' });
    expect(upsert.status).toBe(200); // it only updated
    const [row] = await db.admin`SELECT title, author_id FROM blog.posts WHERE site = 'c' AND id = 1`;
    expect(row).toEqual({ title: 'Renamed', author_id: 1 });
    const anon = await request(t.app)
      .post('/rest/v1/posts')
      .set({ apikey: TEST_API_KEY })
      .send({ site: 'z', id: 1, author_id: 1, title: 'x' });
    expect(anon.status).toBe(401);
  });

  it('serves a new column after NOTIFY pgrst, without a restart', async () => {
    const before = await get('users?select=nickname');
    expect(before.status).toBe(400);
    expect(before.body.code).toBe('42703');
    await db.admin.unsafe(`ALTER TABLE blog.users ADD COLUMN nickname text DEFAULT 'nick'`);
    await db.admin.unsafe(`NOTIFY pgrst, 'reload schema'`);
    await waitFor(async () => (await get('users?select=nickname&id=eq.1')).status === 200, 'the new column');
    expect((await get('users?select=nickname&id=eq.1')).body).toEqual([{ nickname: 'nick' }]);
  });

  it('answers a column kept from the role as one that does not exist, so internal columns cannot be probed', async () => {
    await db.admin.unsafe(`
      CREATE TABLE blog.members (id int PRIMARY KEY, name text, internal_score int);
      INSERT INTO blog.members VALUES (1, 'Ada', 97);
      GRANT SELECT (id, name) ON blog.members TO blog_anon`);
    await schemaCacheOf(t.ctx).reload();
    expect((await get('members?select=id,name')).body).toEqual([{ id: 1, name: 'Ada' }]);
    for (const probe of ['select=internal_score', 'select=id&internal_score=gt.90', 'select=id&order=internal_score']) {
      const kept = await get(`members?${probe}`);
      const absent = await get(`members?${probe.replace('internal_score', 'no_such_column')}`);
      expect([kept.status, kept.body.code, kept.body.hint]).toEqual([
        absent.status,
        absent.body.code,
        absent.body.hint,
      ]);
      expect([kept.status, kept.body]).toEqual([
        400,
        {
          code: '42703',
          message: 'column members.internal_score does not exist',
          details: null,
          hint: absent.body.hint,
        },
      ]);
      expect(kept.body.hint ?? '').not.toContain('internal_score');
    }
    // Postgres's hint offers a column close to the name asked for: never one kept from the role.
    const close = await get('members?select=internal_scor');
    expect([close.status, close.body.code, close.body.hint]).toEqual([400, '42703', null]);
  });

  it('reports a schema that is not exposed with 406 PGRST106', async () => {
    const res = await get('users', { 'Accept-Profile': 'public' });
    expect(res.status).toBe(406);
    expect(res.body.code).toBe('PGRST106');
  });

  // A write whose end does not depend on its result sends COMMIT with its statement, in one
  // round trip; a constraint checked only at COMMIT must still refuse it, and leave nothing.
  it('refuses a write whose deferred constraint fails at COMMIT, and writes nothing', async () => {
    await db.admin.unsafe(`
      CREATE TABLE blog.slots (id int PRIMARY KEY, code text NOT NULL,
        CONSTRAINT slots_code_key UNIQUE (code) DEFERRABLE INITIALLY DEFERRED);
      GRANT SELECT, INSERT ON blog.slots TO blog_user`);
    await schemaCacheOf(t.ctx).reload();
    const res = await request(t.app)
      .post('/rest/v1/slots')
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${userJwt}` })
      .send([
        { id: 1, code: 'a' },
        { id: 2, code: 'a' },
      ]);
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('23505');
    expect(await db.admin`SELECT count(*)::int AS n FROM blog.slots`).toEqual([{ n: 0 }]);

    const ok = await request(t.app)
      .post('/rest/v1/slots')
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${userJwt}` })
      .send([{ id: 3, code: 'b' }]);
    expect(ok.status).toBe(201);
    expect(await db.admin`SELECT id, code FROM blog.slots`).toEqual([{ id: 3, code: 'b' }]);
  });
});
