import request from 'supertest';
import type { TestDatabase } from './harness/db.js';
import { accessToken, signJwt, startTestApp, type TestApp } from './harness/app.js';
import { tokenFor, type WorkspaceFixture } from './harness/fixtures.js';
import { createWorkspace } from '../gateway/admin/workspaces.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';

// The read path of /rest/v1 on the finance schema: PostgREST's grammar under RLS, its headers
// and its errors, and workspace isolation whatever the query.

describe('GET /rest/v1 (finance schema)', () => {
  let db: TestDatabase, t: TestApp, a: WorkspaceFixture, b: WorkspaceFixture, jwtA: string, jwtB: string, readA: string;

  beforeAll(async () => {
    ({ db, t, a, b, jwtA, jwtB, readA } = await setUpFinance(restEnv()));
    // Five more expenses in A, one in B, with distinct amounts, dates and notes.
    await db.admin`
      INSERT INTO public.personal_transactions (workspace_id, name, amount, category_id, method_id, occurred_at, note) VALUES
        (${a.id}, 'Taxi home', 30, 'local-transport', 'cash', '2024-03-01T10:00:00Z', 'late night'),
        (${a.id}, 'Groceries', 55.25, 'essentials', 'credit-card', '2024-03-02T10:00:00Z', NULL),
        (${a.id}, 'Cinema, with friends', 18, 'entertainment', 'credit-card', '2024-03-03T10:00:00Z', 'fun (really)'),
        (${a.id}, 'Flight', 420, 'travel', 'bank-transfer', '2024-02-01T10:00:00Z', NULL),
        (${a.id}, 'Gym', 40, 'sports', 'mobile-wallet', '2024-01-15T10:00:00Z', 'monthly'),
        (${b.id}, 'B secret', 999, 'other', 'cash', '2024-03-05T10:00:00Z', 'beta only')`;
  });
  afterAll(() => tearDown(db, t));

  const get = (path: string, headers: Record<string, string> = {}, jwt: string | null = jwtA) =>
    request(t.app)
      .get(`/rest/v1/${path}`)
      .set({ apikey: TEST_API_KEY, ...(jwt ? { Authorization: `Bearer ${jwt}` } : {}), ...headers });
  const names = (body: { name: string }[]) => body.map((r) => r.name);

  describe('auth of the surface', () => {
    it('requires the apikey header', async () => {
      const res = await request(t.app)
        .get('/rest/v1/funds')
        .set({ Authorization: `Bearer ${jwtA}` });
      expect(res.status).toBe(401);
      expect(res.body.message).toBe('No API key found in request');
      const bad = await request(t.app)
        .get('/rest/v1/funds')
        .set({ apikey: 'nope', Authorization: `Bearer ${jwtA}` });
      expect(bad.status).toBe(401);
      expect(bad.body.message).toBe('Invalid API key');
    });

    it('refuses bad, expired and alg=none JWTs with PGRST30x', async () => {
      const expired = await signJwt({ role: 'api_write', workspace_id: a.id }, undefined, '-10m');
      expect((await get('funds', {}, expired)).body.code).toBe('PGRST303');
      const none =
        Buffer.from('{"alg":"none"}').toString('base64url') +
        '.' +
        Buffer.from(`{"role":"api_write","workspace_id":"${a.id}"}`).toString('base64url') +
        '.';
      const res = await get('funds', {}, none);
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('PGRST301');
      expect(
        (await get('funds', {}, await signJwt({ role: 'api_write' }, 'another-secret-that-is-at-least-32-chars!')))
          .status,
      ).toBe(401);
    });

    it('answers 401 to anon and 403 to a token for tables that are not granted', async () => {
      for (const table of ['workspace_members', 'api_tokens', 'user_credentials', 'billing_accounts', 'workspaces']) {
        const res = await get(table);
        expect([table, res.status, res.body.code]).toEqual([table, 403, '42501']);
      }
      const anon = await get('funds', {}, null);
      expect(anon.status).toBe(401);
      expect(anon.headers['www-authenticate']).toBe('Bearer');
    });

    it('answers 401 for a revoked workspace token (pre-request function)', async () => {
      const tok = await tokenFor(db.admin, a.id, 'read');
      const jwt = await accessToken({ role: 'api_read', workspace_id: a.id, scope: 'read', sub: tok.id });
      expect((await get('funds?select=name', {}, jwt)).status).toBe(200);
      await db.admin`UPDATE public.api_tokens SET revoked_at = now() WHERE id = ${tok.id}`;
      const res = await get('funds?select=name', {}, jwt);
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('PT401');
    });
  });

  describe('select', () => {
    it('columns, aliases, casts, computed fields and JSON-free embedding', async () => {
      const res = await get(
        `funds?select=title:name,amount:target_amount::text,balance,fund_transactions(name,amount)&id=eq.${a.fundId}`,
      );
      expect(res.status).toBe(200);
      expect(res.body).toEqual([
        {
          title: 'alpha fund',
          amount: '1000',
          balance: 100,
          fund_transactions: [{ name: 'Contribution', amount: 100 }],
        },
      ]);
    });

    it('embeds many-to-one as an object and many-to-many through fund_participants', async () => {
      const tx = await get('fund_transactions?select=name,funds(name)');
      expect(tx.body).toEqual([{ name: 'Contribution', funds: { name: 'alpha fund' } }]);
      const members = await get('funds?select=name,contacts(name,phone)');
      expect(members.body).toEqual([
        { name: 'alpha fund', contacts: [{ name: 'alpha contact', phone: '+1 555 0100' }] },
      ]);
      const cat = await get('personal_transactions?select=name,categories(name)&name=eq.Gym');
      expect(cat.body).toEqual([{ name: 'Gym', categories: { name: 'Sports' } }]);
    });

    it('reports unknown columns, relations and relationships as PostgREST does', async () => {
      const col = await get('funds?select=nope');
      expect([col.status, col.body.code, col.body.message]).toEqual([400, '42703', 'column funds.nope does not exist']);
      const rel = await get('nope');
      expect([rel.status, rel.body.code]).toEqual([404, 'PGRST205']);
      const embed = await get('funds?select=*,payment_methods(*)');
      expect([embed.status, embed.body.code]).toEqual([400, 'PGRST200']);
      const grammar = await get('funds?select=name,fund_transactions(name');
      expect(grammar.status).toBe(400);
      expect(grammar.body).toEqual({
        code: 'PGRST100',
        message: '"failed to parse select parameter (name,fund_transactions(name)" (line 1, column 28)',
        details:
          'unexpected end of input expecting letter, digit, "-", "->>", "->", "::", ".", ")", "," or end of input',
        hint: null,
      });
      const filter = await get('funds?name=foo.bar');
      expect(filter.status).toBe(400);
      expect(filter.body).toEqual({
        code: 'PGRST100',
        message: '"failed to parse filter (foo.bar)" (line 1, column 1)',
        details: 'unexpected "f" expecting "not" or operator (eq, gt, ...)',
        hint: null,
      });
      const syntax = await get('personal_transactions?amount=eq.abc');
      expect([syntax.status, syntax.body.code]).toEqual([400, '22P02']);
      const notEmbedded = await get('funds?fund_transactions.amount=gt.0');
      expect([notEmbedded.status, notEmbedded.body.code]).toEqual([400, 'PGRST108']);
    });

    it('suggests only tables the caller may read: a typo of an internal table names none', async () => {
      const typo = await get('contact');
      expect([typo.status, typo.body.hint]).toEqual([404, "Perhaps you meant the table 'public.contacts'"]);
      // api_tokens is in the same schema, granted to no API role.
      for (const probe of ['api_token', 'api_tokenss']) {
        const res = await get(probe);
        expect([res.status, res.body.code, res.body.hint]).toEqual([404, 'PGRST205', null]);
      }
      const anon = await get('contact', {}, null);
      expect([anon.body.code, anon.body.hint]).toEqual(['PGRST205', null]);
    });
  });

  describe('filters', () => {
    const cases: [string, string[]][] = [
      ['amount=eq.30', ['Taxi home']],
      ['amount=neq.30&amount=lt.41', ['alpha lunch', 'Cinema, with friends', 'Gym']],
      ['amount=gt.40', ['Groceries', 'Flight']],
      ['amount=gte.40&amount=lte.55.25', ['Groceries', 'Gym']],
      ['name=like.*i*', ['Taxi home', 'Groceries', 'Cinema, with friends', 'Flight']],
      ['name=ilike.g*', ['Groceries', 'Gym']],
      ['name=match.^[FG]', ['Groceries', 'Flight', 'Gym']],
      ['name=imatch.^t', ['Taxi home']],
      ['category_id=in.(travel,sports)', ['Flight', 'Gym']],
      ['name=in.("Cinema, with friends",Gym)', ['Cinema, with friends', 'Gym']],
      ['note=is.null', ['alpha lunch', 'Groceries', 'Flight']],
      ['note=not.is.null', ['Taxi home', 'Cinema, with friends', 'Gym']],
      ['note=isdistinct.monthly', ['alpha lunch', 'Taxi home', 'Groceries', 'Cinema, with friends', 'Flight']],
      ['name=fts.taxi', ['Taxi home']],
      ['name=plfts(english).cinema friends', ['Cinema, with friends']],
      ['name=phfts.taxi home', ['Taxi home']],
      ['name=wfts.gym or flight', ['Flight', 'Gym']],
      ['name=like(any).{T*,G*}', ['Taxi home', 'Groceries', 'Gym']],
      ['name=like(all).{*o*,*e*}', ['Taxi home', 'Groceries']],
      ['amount=gt(any).{400,50}', ['Groceries', 'Flight']],
      ['amount=not.gt.30', ['alpha lunch', 'Taxi home', 'Cinema, with friends']],
      ['or=(amount.lt.15,name.eq.Flight)', ['alpha lunch', 'Flight']],
      ['or=(amount.gt.400,and(method_id.eq.credit-card,note.is.null))', ['Groceries', 'Flight']],
      ['not.or=(amount.lt.30,amount.gt.50)', ['Taxi home', 'Gym']],
      [
        'and=(amount.gte.18,or(name.like.C*,not.and(amount.lt.100,note.not.is.null)))&amount=lt.500',
        ['Groceries', 'Cinema, with friends', 'Flight'],
      ],
      ['or=(note.eq."fun (really)",note.eq.monthly)', ['Cinema, with friends', 'Gym']],
      ['occurred_at=gte.2024-03-01&occurred_at=lt.2024-03-03', ['Taxi home', 'Groceries']],
    ];
    it.each(cases)('%s', async (filter, expected) => {
      const res = await get(`personal_transactions?select=name&order=occurred_at.asc&${filter.replace(/ /g, '%20')}`);
      expect(res.status).toBe(200);
      expect(new Set(names(res.body))).toEqual(new Set(expected));
    });

    it('filters embedded resources and uses !inner and is.null on embeds', async () => {
      await db.admin`INSERT INTO public.funds (workspace_id, name) VALUES (${a.id}, 'empty fund')`;
      const left = await get('funds?select=name,fund_transactions(name)&fund_transactions.amount=lt.0&order=name');
      expect(left.body).toEqual([
        { name: 'alpha fund', fund_transactions: [] },
        { name: 'empty fund', fund_transactions: [] },
      ]);
      const inner = await get('funds?select=name,fund_transactions!inner(name)&fund_transactions.amount=gt.0');
      expect(inner.body).toEqual([{ name: 'alpha fund', fund_transactions: [{ name: 'Contribution' }] }]);
      const isNull = await get('funds?select=name,fund_transactions(name)&fund_transactions=is.null');
      expect(names(isNull.body)).toEqual(['empty fund']);
      await db.admin`DELETE FROM public.funds WHERE name = 'empty fund'`;
    });
  });

  describe('order, ranges and counts', () => {
    it('orders by several keys, directions and nulls', async () => {
      const res = await get('personal_transactions?select=name&order=note.desc.nullsfirst,amount.asc');
      expect(names(res.body)).toEqual([
        'alpha lunch',
        'Groceries',
        'Flight',
        'Gym',
        'Taxi home',
        'Cinema, with friends',
      ]);
      const last = await get('personal_transactions?select=name&order=note.asc.nullslast,amount.desc&limit=2');
      expect(names(last.body)).toEqual(['Cinema, with friends', 'Taxi home']);
    });

    it('orders by a to-one embedded column and embedded arrays by their own order', async () => {
      const res = await get('personal_transactions?select=name,categories(name)&order=categories(name).desc&limit=2');
      expect(names(res.body)).toEqual(['Flight', 'Gym']);
    });

    it('pages with limit/offset and the Range header; Content-Range and 206 with counts', async () => {
      const page = await get('personal_transactions?select=name&order=amount&limit=2&offset=1', {
        Prefer: 'count=exact',
      });
      expect(page.status).toBe(206);
      expect(page.headers['content-range']).toBe('1-2/6');
      expect(page.headers['preference-applied']).toBe('count=exact');
      expect(names(page.body)).toEqual(['Cinema, with friends', 'Taxi home']);
      const range = await get('personal_transactions?select=name&order=amount', {
        Range: '4-10',
        'Range-Unit': 'items',
      });
      expect(range.status).toBe(200);
      expect(range.headers['content-range']).toBe('4-5/*');
      expect(names(range.body)).toEqual(['Groceries', 'Flight']);
      const all = await get('personal_transactions?select=name', { Prefer: 'count=exact' });
      expect([all.status, all.headers['content-range']]).toEqual([200, '0-5/6']);
      const planned = await get('personal_transactions?select=name&limit=1', { Prefer: 'count=planned' });
      expect(planned.headers['content-range']).toMatch(/^0-0\/\d+$/);
      const estimated = await get('personal_transactions?select=name&limit=1', { Prefer: 'count=estimated' });
      expect(estimated.headers['content-range']).toBe('0-0/6');
    });

    it("planned and estimated counts of a workspace's rows are exact: statistics would tell of the others", async () => {
      // 120 other workspaces of 20 rows each: the table's statistics now describe them, and a
      // workspace of 6 rows outside their most common values would be estimated at their average.
      const crowd = await Promise.all(
        Array.from({ length: 120 }, (_, i) => createWorkspace(db.admin, `Crowd ${i}`, 'EUR', 'test')),
      );
      const ids = crowd.map((w) => w.id);
      try {
        await db.admin`
          INSERT INTO public.personal_transactions (workspace_id, name, amount, category_id, method_id)
          SELECT w, 'Crowd', 1, 'other', 'cash' FROM unnest(${ids}::uuid[]) AS w, generate_series(1, 20)`;
        await db.admin`ANALYZE public.personal_transactions`;
        for (const count of ['planned', 'estimated']) {
          const res = await get('personal_transactions?select=name&limit=1', { Prefer: `count=${count}` });
          expect([res.status, res.headers['content-range'], res.headers['preference-applied']]).toEqual([
            206,
            '0-0/6',
            `count=${count}`,
          ]);
        }
      } finally {
        await db.admin`DELETE FROM public.personal_transactions WHERE workspace_id = ANY(${ids}::uuid[])`;
        await db.admin`DELETE FROM public.workspaces WHERE id = ANY(${ids}::uuid[])`;
      }
    });

    it('answers 416 for an offset past the end when the count is known, and */0 for an empty result', async () => {
      const res = await get('personal_transactions?offset=10', { Prefer: 'count=exact' });
      expect([res.status, res.body.code, res.headers['content-range']]).toEqual([416, 'PGRST103', '*/6']);
      const empty = await get('personal_transactions?name=eq.none', { Prefer: 'count=exact' });
      expect([empty.status, empty.headers['content-range'], empty.body]).toEqual([200, '*/0', []]);
      const bad = await get('personal_transactions', { Range: '5-2' });
      expect(bad.status).toBe(416);
    });

    it('HEAD carries the headers without a body', async () => {
      const res = await request(t.app)
        .head('/rest/v1/personal_transactions')
        .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwtA}`, Prefer: 'count=exact' });
      expect(res.status).toBe(200);
      expect(res.headers['content-range']).toBe('0-5/6');
      expect(res.text ?? '').toBe('');
    });
  });

  describe('media types', () => {
    it('returns one object for vnd.pgrst.object+json and 406 PGRST116 otherwise', async () => {
      const one = await get(`funds?select=name&id=eq.${a.fundId}`, { Accept: 'application/vnd.pgrst.object+json' });
      expect(one.status).toBe(200);
      expect(one.headers['content-type']).toBe('application/vnd.pgrst.object+json; charset=utf-8');
      expect(JSON.parse(one.text)).toEqual({ name: 'alpha fund' });
      const many = await get('personal_transactions', { Accept: 'application/vnd.pgrst.object+json' });
      expect([many.status, many.body.code]).toEqual([406, 'PGRST116']);
      const none = await get(`funds?id=eq.${b.fundId}`, { Accept: 'application/vnd.pgrst.object+json' });
      expect([none.status, none.body.code]).toEqual([406, 'PGRST116']);
    });

    it('writes CSV with a header line', async () => {
      const res = await get('personal_transactions?select=name,amount&order=amount&limit=2', { Accept: 'text/csv' });
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('text/csv; charset=utf-8');
      expect(res.text).toBe(
        'name,amount\n"alpha lunch",12.5\nCinema, with friends,18'.replace(
          'Cinema, with friends',
          '"Cinema, with friends"',
        ),
      );
    });

    it('refuses media types it cannot produce with 406', async () => {
      const res = await get('funds', { Accept: 'application/xml' });
      expect([res.status, res.body.code]).toEqual([406, 'PGRST107']);
    });
  });

  describe('workspace isolation', () => {
    it('never returns a row of another workspace, whatever the filter, embedding or or=', async () => {
      const probes = [
        'personal_transactions',
        `personal_transactions?workspace_id=eq.${b.id}`,
        `personal_transactions?or=(workspace_id.eq.${b.id},name.eq.B%20secret)`,
        `funds?id=eq.${b.fundId}`,
        'funds?select=*,fund_transactions(*),contacts(*)',
        `fund_transactions?fund_id=eq.${b.fundId}`,
        `contacts?id=eq.${b.contactId}`,
        'fund_participants?select=*,funds(*),contacts(*)',
        'categories?select=id,personal_transactions(name,workspace_id)',
        'payment_methods?select=*,fund_transactions!inner(*)',
      ];
      for (const path of probes) {
        const res = await get(path);
        expect([path, res.status]).toEqual([path, 200]);
        expect(res.text).not.toContain(b.id);
        expect(res.text).not.toContain('B secret');
        expect(res.text).not.toContain('beta');
      }
      const fromB = await get('personal_transactions?select=name', {}, jwtB);
      expect(names(fromB.body).sort()).toEqual(['B secret', 'beta lunch']);
    });

    it('a read token reads', async () => {
      const res = await get('funds?select=name', {}, readA);
      expect(res.body).toEqual([{ name: 'alpha fund' }]);
    });
  });

  it('GET /rest/v1/ describes the relations and columns the role can read', async () => {
    const res = await request(t.app)
      .get('/rest/v1/')
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${readA}` });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/openapi+json; charset=utf-8');
    const doc = JSON.parse(res.text);
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(['/funds', '/personal_transactions', '/fund_transactions', '/contacts']),
    );
    expect(Object.keys(doc.paths)).not.toContain('/api_tokens');
    expect(Object.keys(doc.paths)).not.toContain('/workspace_members');
    expect(doc.definitions.personal_transactions.properties.amount.type).toBe('number');
    const anon = await request(t.app).get('/rest/v1/').set({ apikey: TEST_API_KEY });
    expect(Object.keys(JSON.parse(anon.text).paths)).toEqual([]);
  });

  it('cancels a query that outlives the statement timeout with 504', async () => {
    await db.admin.unsafe(`CREATE VIEW public.slow_view AS SELECT 1 AS x FROM pg_sleep(0.5)`);
    await db.admin.unsafe(`GRANT SELECT ON public.slow_view TO api_read`);
    const slow = startTestApp(db.url, restEnv({ TALLY_DB_STATEMENT_TIMEOUT_MS: '50' }));
    try {
      const res = await request(slow.app)
        .get('/rest/v1/slow_view')
        .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwtA}` });
      expect([res.status, res.body.code]).toEqual([504, '57014']);
      expect(res.body.details).toBe('statement timeout: 50 ms');
      expect(JSON.stringify(res.body)).not.toMatch(/select|pg_sleep/i);
    } finally {
      await slow.close();
      await db.admin.unsafe('DROP VIEW public.slow_view');
    }
  });
});
