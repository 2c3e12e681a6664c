import request from 'supertest';
import { PostgrestClient } from '@supabase/postgrest-js';
import type { TestDatabase } from './harness/db.js';
import { startTestApp, type TestApp } from './harness/app.js';
import type { WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { blogEnv, setUpBlog, setUpFinance, tearDown } from './harness/suite.js';
import { first } from './harness/present.js';

// Aggregates (TALLY_DB_AGGREGATES_ENABLED), spread embeds and query plans (TALLY_DB_PLAN_ENABLED)
// as PostgREST 12/13 serve them, on the blog schema and on the finance schema under RLS.

const byJson = <T>(rows: T[]) => [...rows].sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y)));

describe('aggregates, spreads and plans (blog schema)', () => {
  let db: TestDatabase, on: TestApp, off: TestApp, userJwt: string;
  beforeAll(async () => {
    ({
      db,
      t: on,
      userJwt,
    } = await setUpBlog(['blog.sql', 'blog-functions.sql'], {
      TALLY_DB_AGGREGATES_ENABLED: 'true',
      TALLY_DB_PLAN_ENABLED: 'true',
    }));
    off = startTestApp(db.url, blogEnv());
  });
  afterAll(() => tearDown(db, on, off));

  const get = (path: string, headers: Record<string, string> = {}, app = on) =>
    request(app.app)
      .get(`/rest/v1/${path}`)
      .set({ apikey: TEST_API_KEY, ...headers });

  describe('aggregates', () => {
    it('are refused with PGRST123 unless enabled', async () => {
      const res = await get('posts?select=rating.sum()', {}, off);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: 'PGRST123', message: 'Use of aggregate functions is not allowed' });
      expect((await get('posts?select=count()', {}, off)).body.code).toBe('PGRST123');
    });

    it('are refused with PGRST123 before any column is looked up, as PostgREST never reaches Postgres', async () => {
      for (const select of ['missing_column.count()', 'missing_column,rating.sum()', 'id,comments(missing.max())']) {
        const res = await get(`posts?select=${select}`, {}, off);
        expect([select, res.status, res.body.code]).toEqual([select, 400, 'PGRST123']);
      }
      // A missing relationship is still found first: PostgREST resolves embeds before it checks aggregates.
      expect((await get('posts?select=id,nothing(id.sum())', {}, off)).body.code).toBe('PGRST200');
    });

    it('aggregate the whole result, or grouped by the other selected columns', async () => {
      expect((await get('posts?select=count()')).body).toEqual([{ count: 4 }]);
      const res = await get('posts?select=site,count(),rating.sum(),rating.max()&order=site', {
        Prefer: 'count=exact',
      });
      expect(res.status).toBe(200);
      expect(res.headers['content-range']).toBe('0-1/2');
      expect(res.body).toEqual([
        { site: 'a', count: 2, sum: 7.5, max: 4.5 },
        { site: 'b', count: 2, sum: 5, max: 5 },
      ]);
      // count(column) counts non-null values; filters apply before grouping.
      expect((await get('posts?select=rating.count(),published&published=is.true')).body).toEqual([
        { count: 3, published: true },
      ]);
    });

    it('take aliases, input casts and output casts', async () => {
      const res = await get('posts?select=views:meta->>views::int.sum(),mean:rating.avg()::int,n:count()::text');
      expect(res.body).toEqual([{ views: 120, mean: 4, n: '4' }]);
    });

    it('work inside embedded resources and group by an embedded to-one resource', async () => {
      const inside = await get('users?select=name,posts!posts_author_id_fkey(count(),rating.max())&order=id');
      expect(inside.body).toEqual([
        { name: 'Ada', posts: [{ count: 2, max: 4.5 }] },
        { name: 'Grace', posts: [{ count: 1, max: null }] },
        { name: 'Linus', posts: [{ count: 1, max: 5 }] },
      ]);
      const grouped = await get('posts?select=count(),users!posts_author_id_fkey(name)');
      expect(byJson(grouped.body)).toEqual(
        byJson([
          { count: 2, users: { name: 'Ada' } },
          { count: 1, users: { name: 'Grace' } },
          { count: 1, users: { name: 'Linus' } },
        ]),
      );
    });

    it('compose with functions at /rpc', async () => {
      expect((await get('rpc/posts_by?author=1&select=site,rating.avg()')).body).toEqual([{ site: 'a', avg: 3.75 }]);
    });
  });

  describe('spread embeds', () => {
    it("lift a to-one resource's columns into the parent, with aliases", async () => {
      const res = await get('posts?select=site,id,...users!posts_author_id_fkey(author:name,email)&order=site,id');
      expect(res.status).toBe(200);
      expect(res.body).toEqual([
        { site: 'a', id: 1, author: 'Ada', email: 'ada@example.com' },
        { site: 'a', id: 2, author: 'Ada', email: 'ada@example.com' },
        { site: 'b', id: 1, author: 'Grace', email: 'grace@example.com' },
        { site: 'b', id: 2, author: 'Linus', email: null },
      ]);
    });

    it('give a to-many resource one array per column (PostgREST 13), [] without rows', async () => {
      await db.admin`INSERT INTO blog.users (id, name) VALUES (4, 'Nobody') ON CONFLICT DO NOTHING`;
      const res = await get('users?select=name,...posts!posts_author_id_fkey(title,site)&order=id&posts.order=site,id');
      expect(res.body).toEqual([
        { name: 'Ada', title: ['Hello world', 'Second post'], site: ['a', 'a'] },
        { name: 'Grace', title: ['Bonjour'], site: ['b'] },
        { name: 'Linus', title: ['Kernel notes'], site: ['b'] },
        { name: 'Nobody', title: [], site: [] },
      ]);
      await db.admin`DELETE FROM blog.users WHERE id = 4`;
    });

    it("group by spread columns and aggregate them in the parent's context", async () => {
      const grouped = await get('posts?select=count(),...users!posts_author_id_fkey(name)');
      expect(byJson(grouped.body)).toEqual(
        byJson([
          { count: 2, name: 'Ada' },
          { count: 1, name: 'Grace' },
          { count: 1, name: 'Linus' },
        ]),
      );
      const lifted = await get('comments?select=site,...users(longest:name.max())&order=site');
      expect(lifted.body).toEqual([
        { site: 'a', longest: 'Linus' },
        { site: 'b', longest: 'Ada' },
      ]);
    });

    it('order a grouped read by a lifted column, named by its alias too, as PostgREST orders by the output', async () => {
      // The order reads the spread's lateral column, which is a grouping key; a sub-select
      // through the relationship read the parent's ungrouped row (42803), and an alias was
      // looked up as a column of the table (42703).
      const byName = await get('comments?select=...users(name,count())&order=users(name)');
      expect([byName.status, byName.body]).toEqual([
        200,
        [
          { name: 'Ada', count: 1 },
          { name: 'Grace', count: 2 },
          { name: 'Linus', count: 1 },
        ],
      ]);
      const byAlias = await get('comments?select=...users(who:name,n:count())&order=users(who).desc');
      expect(byAlias.body).toEqual([
        { who: 'Linus', n: 1 },
        { who: 'Grace', n: 2 },
        { who: 'Ada', n: 1 },
      ]);
      const nested = await get(
        'comments?select=...posts(where:site,...users!posts_author_id_fkey(authors:count()))&order=posts(where)',
      );
      expect(nested.body).toEqual([
        { where: 'a', authors: 3 },
        { where: 'b', authors: 1 },
      ]);
      // Not aggregated: the alias orders as well.
      const plainRows = await get('comments?select=id,...users(who:name)&order=users(who),id');
      expect(plainRows.body.map((r: { who: string }) => r.who)).toEqual(['Ada', 'Grace', 'Grace', 'Linus']);
    });

    it('group by a resource embedded inside a spread (json, grouped as jsonb)', async () => {
      const res = await get('comments?select=id.count(),...posts(users!posts_author_id_fkey(name))');
      expect(res.status).toBe(200);
      expect(byJson(res.body)).toEqual(
        byJson([
          { count: 3, users: { name: 'Ada' } },
          { count: 1, users: { name: 'Linus' } },
        ]),
      );
    });

    it('inner-join a spread with !inner', async () => {
      const res = await get('posts?select=id,...users!posts_editor_fkey!inner(name)&site=eq.a');
      expect(res.body).toEqual([{ id: 1, name: 'Grace' }]);
    });
  });

  describe('plans', () => {
    const plan = 'application/vnd.pgrst.plan+json';

    it('are refused with 406 unless enabled, as an unavailable media type', async () => {
      const res = await get('posts', { Accept: plan }, off);
      expect(res.status).toBe(406);
      expect(res.body.code).toBe('PGRST107');
    });

    it("answer EXPLAIN of the request's own query as JSON, or as text", async () => {
      const res = await get('posts?select=title,users!posts_author_id_fkey(name)&site=eq.a', { Accept: plan });
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe(
        'application/vnd.pgrst.plan+json; for="application/json"; charset=utf-8',
      );
      const body = JSON.parse(res.text);
      expect(body[0].Plan['Node Type']).toBe('Aggregate');
      expect(res.text).toContain('"posts"');
      expect(res.text).not.toContain('Actual Rows');
      const text = await get('posts?site=eq.a', { Accept: 'application/vnd.pgrst.plan+text' });
      expect(text.headers['content-type']).toBe(
        'application/vnd.pgrst.plan+text; for="application/json"; charset=utf-8',
      );
      expect(text.text).toMatch(/^Aggregate/);
      expect(text.text).toContain("Index Cond: (site = 'a'::text)");
    });

    it('take analyze, verbose, settings and buffers options, and for= another media type', async () => {
      const res = await get('posts?select=id', {
        Accept: `${plan}; for="text/csv"; options=analyze|verbose|settings|buffers`,
      });
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe(
        'application/vnd.pgrst.plan+json; for="text/csv"; options=analyze|verbose|settings|buffers; charset=utf-8',
      );
      const [explained] = JSON.parse(res.text);
      expect(explained.Plan['Actual Rows']).toBe(1);
      expect(explained.Plan.Output).toBeDefined();
      expect(explained.Plan['Shared Hit Blocks']).toBeDefined();
      expect(explained['Execution Time']).toEqual(expect.any(Number));
      expect((await get('posts', { Accept: `${plan}; options=nope` })).status).toBe(406);
    });

    it("explain a write with analyze inside the request's transaction and roll it back", async () => {
      const res = await request(on.app)
        .post('/rest/v1/users')
        .set({
          apikey: TEST_API_KEY,
          Authorization: `Bearer ${userJwt}`,
          Accept: `${plan}; options=analyze`,
          Prefer: 'return=representation',
        })
        .send({ id: 99, name: 'Ghost' });
      expect(res.status).toBe(200);
      expect(JSON.parse(res.text)[0].Plan['Actual Rows']).toBe(1);
      expect(await db.admin`SELECT 1 FROM blog.users WHERE id = 99`).toHaveLength(0);
      const fn = await request(on.app)
        .post('/rest/v1/rpc/rename_user')
        .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${userJwt}`, Accept: `${plan}; options=analyze` })
        .send({ uid: 1, new_name: 'Changed' });
      expect(fn.status).toBe(200);
      expect(first(await db.admin`SELECT name FROM blog.users WHERE id = 1`).name).toBe('Ada');
    });

    it('explain function calls over GET: an inlinable SQL function is inlined, filters pushed into it', async () => {
      const res = await get('rpc/posts_by?author=1&rating=gt.4', { Accept: 'application/vnd.pgrst.plan' });
      expect(res.status).toBe(200);
      expect(res.text).toContain("Filter: (rating > '4'::numeric)");
      expect(res.text).toContain('posts.author_id = pgrst_args.author');
      expect(res.text).not.toContain('Function Scan on posts_by');
    });
  });
});

describe('aggregates and spreads (finance schema, under RLS)', () => {
  let db: TestDatabase, t: TestApp, a: WorkspaceFixture, b: WorkspaceFixture, jwtA: string;
  beforeAll(async () => {
    ({ db, t, a, b, readA: jwtA } = await setUpFinance(restEnv({ TALLY_DB_AGGREGATES_ENABLED: 'true' })));
    await db.admin`
      INSERT INTO public.fund_transactions (workspace_id, fund_id, name, amount, category_id, method_id) VALUES
        (${a.id}, ${a.fundId}, 'More', 50, 'fund-income', 'cash'),
        (${a.id}, ${a.fundId}, 'Hotel', -30, 'hotel', 'cash'),
        (${b.id}, ${b.fundId}, 'B only', 5000, 'fund-income', 'cash')`;
  });
  afterAll(() => tearDown(db, t));

  const get = (path: string) =>
    request(t.app)
      .get(`/rest/v1/${path}`)
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwtA}` });

  it("sums only the caller's workspace, grouped by method", async () => {
    const res = await get('fund_transactions?select=method_id,amount.sum(),count()&order=method_id');
    expect(res.body).toEqual([
      { method_id: 'bank-transfer', sum: 100, count: 1 },
      { method_id: 'cash', sum: 20, count: 2 },
    ]);
    expect(JSON.stringify((await get('fund_transactions?select=amount.sum()')).body)).toBe('[{"sum":120}]');
  });

  it("aggregates a fund's embedded ledger and spreads the fund into its transactions", async () => {
    const ledger = await get('funds?select=name,fund_transactions(amount.sum(),amount.min(),count())');
    expect(ledger.body).toEqual([{ name: 'alpha fund', fund_transactions: [{ sum: 120, min: -30, count: 3 }] }]);
    const spread = await get('fund_transactions?select=name,...funds(fund:name,status)&order=amount');
    expect(spread.body).toEqual([
      { name: 'Hotel', fund: 'alpha fund', status: 'Upcoming' },
      { name: 'More', fund: 'alpha fund', status: 'Upcoming' },
      { name: 'Contribution', fund: 'alpha fund', status: 'Upcoming' },
    ]);
    const toMany = await get('funds?select=name,...fund_transactions(amount)&fund_transactions.order=amount');
    expect(toMany.body).toEqual([{ name: 'alpha fund', amount: [-30, 50, 100] }]);
  });

  it('serves an aggregate select to postgrest-js unmodified', async () => {
    const client = new PostgrestClient('http://tally.test/rest/v1', {
      headers: { apikey: TEST_API_KEY, Authorization: `Bearer ${jwtA}` },
      fetch: (async (input: string | URL, init?: RequestInit) => {
        const url = new URL(String(input));
        let r = request(t.app).get(url.pathname + url.search);
        for (const [k, v] of Object.entries((init?.headers ?? {}) as Record<string, string>)) r = r.set(k, v);
        const res = await r;
        return new Response(res.text, { status: res.status, headers: res.headers as Record<string, string> });
      }) as typeof fetch,
    });
    const { data, error } = await client
      .from('fund_transactions')
      .select('category_id, total:amount.sum(), n:count()')
      .order('category_id');
    expect(error).toBeNull();
    expect(data).toEqual([
      { category_id: 'fund-income', total: 150, n: 2 },
      { category_id: 'hotel', total: -30, n: 1 },
    ]);
  });
});
