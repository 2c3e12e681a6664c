import request from 'supertest';
import { onCitus, type TestDatabase } from './harness/db.js';
import { accessToken, type TestApp } from './harness/app.js';
import { tokenFor, type WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';
import { first } from './harness/present.js';

// The write path of /rest/v1: inserts (bulk, columns=, missing=default), upserts, PUT, PATCH and
// DELETE with PostgREST's preferences; each checked against the database afterwards.

describe('writes through /rest/v1', () => {
  let db: TestDatabase, t: TestApp, a: WorkspaceFixture, b: WorkspaceFixture, jwtA: string, readA: string;

  beforeAll(async () => {
    ({ db, t, a, b, jwtA, readA } = await setUpFinance(restEnv({ TALLY_MAX_BODY_BYTES: '4096' })));
  });
  afterAll(() => tearDown(db, t));

  const auth = (jwt: string | null = jwtA) => ({
    apikey: TEST_API_KEY,
    ...(jwt ? { Authorization: `Bearer ${jwt}` } : {}),
  });
  const post = (path: string, body: unknown, headers: Record<string, string> = {}, jwt: string | null = jwtA) =>
    request(t.app)
      .post(`/rest/v1/${path}`)
      .set({ ...auth(jwt), ...headers })
      .send(body as object);
  const patch = (path: string, body: unknown, headers: Record<string, string> = {}, jwt: string | null = jwtA) =>
    request(t.app)
      .patch(`/rest/v1/${path}`)
      .set({ ...auth(jwt), ...headers })
      .send(body as object);
  const del = (path: string, headers: Record<string, string> = {}, jwt: string | null = jwtA) =>
    request(t.app)
      .delete(`/rest/v1/${path}`)
      .set({ ...auth(jwt), ...headers });
  const expense = (over: Record<string, unknown> = {}) => ({
    name: 'Coffee',
    amount: 3.5,
    category_id: 'food-drinks',
    method_id: 'cash',
    ...over,
  });
  const count = async (table: string, where = 'true') =>
    Number(first(await db.admin.unsafe(`SELECT count(*) AS n FROM public.${table} WHERE ${where}`)).n);
  const snapshot = () =>
    db.admin.unsafe(
      `SELECT workspace_id, id, name, amount, note FROM public.personal_transactions ORDER BY workspace_id, id`,
    );

  describe('POST', () => {
    it("inserts one object into the caller's workspace: 201, minimal by default; Location with headers-only", async () => {
      const res = await post('personal_transactions', expense({ name: 'Single' }));
      expect(res.status).toBe(201);
      expect(res.text).toBe('');
      expect(res.headers['content-range']).toBe('*/*');
      const row = first(
        await db.admin`SELECT workspace_id, id, amount FROM public.personal_transactions WHERE name = 'Single'`,
      );
      expect(row.workspace_id).toBe(a.id);
      expect(Number(row.amount)).toBe(3.5);
      expect(res.headers.location).toBeUndefined();
      const located = await post('personal_transactions', expense({ name: 'Located' }), {
        Prefer: 'return=headers-only',
      });
      const locatedRow = first(await db.admin`SELECT id FROM public.personal_transactions WHERE name = 'Located'`);
      expect([located.status, located.text, located.headers.location]).toEqual([
        201,
        '',
        `/personal_transactions?workspace_id=eq.${a.id}&id=eq.${locatedRow.id}`,
      ]);
    });

    it('returns the representation shaped by select=, with embedding', async () => {
      const res = await post(
        'fund_transactions?select=name,amount,funds(name)',
        { fund_id: a.fundId, name: 'Dinner', amount: -42, category_id: 'food-drinks', method_id: 'cash' },
        { Prefer: 'return=representation' },
      );
      expect(res.status).toBe(201);
      expect(res.headers['preference-applied']).toBe('return=representation');
      expect(res.body).toEqual([{ name: 'Dinner', amount: -42, funds: { name: 'alpha fund' } }]);
      const single = await post('personal_transactions?select=name', expense({ name: 'One' }), {
        Prefer: 'return=representation',
        Accept: 'application/vnd.pgrst.object+json',
      });
      expect(JSON.parse(single.text)).toEqual({ name: 'One' });
    });

    it('inserts an array in one statement, and nothing at all when one row fails', async () => {
      const ok = await post(
        'personal_transactions?select=name',
        [expense({ name: 'Bulk 1' }), expense({ name: 'Bulk 2' })],
        { Prefer: 'return=representation,count=exact' },
      );
      expect(ok.status).toBe(201);
      expect(ok.body).toEqual([{ name: 'Bulk 1' }, { name: 'Bulk 2' }]);
      expect(ok.headers['content-range']).toBe('*/2');
      const before = await snapshot();
      const bad = await post('personal_transactions', [
        expense({ name: 'Bulk 3' }),
        expense({ name: 'Bulk 4', amount: -1 }),
      ]);
      expect([bad.status, bad.body.code]).toEqual([400, '23514']);
      expect(await snapshot()).toEqual(before);
      const keys = await post('personal_transactions', [expense(), { name: 'x' }]);
      expect([keys.status, keys.body.code, keys.body.message]).toEqual([400, 'PGRST102', 'All object keys must match']);
    });

    it('columns= picks the keys; missing ones are NULL, or defaults with missing=default', async () => {
      const nul = await post('personal_transactions?columns=name,amount,category_id,method_id,note', [
        expense({ name: 'Cols 1', note: 'n' }),
        expense({ name: 'Cols 2' }),
      ]);
      expect(nul.status).toBe(201);
      expect(
        (await db.admin`SELECT note FROM public.personal_transactions WHERE name LIKE 'Cols%' ORDER BY name`).map(
          (r) => r.note,
        ),
      ).toEqual(['n', null]);
      const missing = await post(
        'funds?columns=name,status&select=name,status,currency',
        [{ name: 'F1', status: 'Completed' }, { name: 'F2' }],
        { Prefer: 'missing=default,return=representation' },
      );
      expect(missing.status).toBe(201);
      expect(missing.headers['preference-applied']).toBe('missing=default, return=representation');
      expect(missing.body).toEqual([
        { name: 'F1', status: 'Completed', currency: 'EUR' },
        { name: 'F2', status: 'Upcoming', currency: 'EUR' },
      ]);
      const ids = await db.admin`SELECT id FROM public.funds WHERE name IN ('F1', 'F2')`;
      expect(new Set(ids.map((r) => r.id)).size).toBe(2); // defaults are evaluated per row
    });

    it('upserts with merge-duplicates and ignore-duplicates (on_conflict)', async () => {
      const res = await post(
        'contacts?select=name,email',
        { id: a.contactId, name: 'Merged', email: 'm@example.com' },
        { Prefer: 'resolution=merge-duplicates,return=representation' },
      );
      expect(res.status).toBe(200); // it only updated, as PostgREST answers
      expect(res.body).toEqual([{ name: 'Merged', email: 'm@example.com' }]);
      expect(first(await db.admin`SELECT name FROM public.contacts WHERE id = ${a.contactId}`).name).toBe('Merged');
      const ignored = await post(
        'contacts?on_conflict=workspace_id,id',
        { id: a.contactId, name: 'Ignored' },
        { Prefer: 'resolution=ignore-duplicates,return=representation' },
      );
      expect([ignored.status, ignored.body]).toEqual([201, []]);
      expect(first(await db.admin`SELECT name FROM public.contacts WHERE id = ${a.contactId}`).name).toBe('Merged');
      const dup = await post('contacts', { id: a.contactId, name: 'Dup' });
      expect([dup.status, dup.body.code]).toEqual([409, '23505']);
    });

    it('reads form-urlencoded and CSV bodies', async () => {
      const form = await request(t.app)
        .post('/rest/v1/contacts')
        .set(auth())
        .type('form')
        .send('name=Formy&nickname=F');
      expect(form.status).toBe(201);
      expect(first(await db.admin`SELECT nickname FROM public.contacts WHERE name = 'Formy'`).nickname).toBe('F');
      const csv = await request(t.app)
        .post('/rest/v1/contacts?select=name,phone')
        .set({ ...auth(), 'Content-Type': 'text/csv', Prefer: 'return=representation' })
        .send('name,phone\n"Csv, One",+1 555 1000\nCsv Two,\n');
      expect(csv.status).toBe(201);
      expect(csv.body).toEqual([
        { name: 'Csv, One', phone: '+1 555 1000' },
        { name: 'Csv Two', phone: null },
      ]);
    });

    it('maps body and database errors as PostgREST does', async () => {
      const malformed = await request(t.app)
        .post('/rest/v1/contacts')
        .set({ ...auth(), 'Content-Type': 'application/json' })
        .send('{"name": ');
      expect([malformed.status, malformed.body.code]).toEqual([400, 'PGRST102']);
      const unknown = await post('contacts', { name: 'x', shoe_size: 44 });
      expect([unknown.status, unknown.body.code, unknown.body.message]).toEqual([
        400,
        'PGRST204',
        "Could not find the 'shoe_size' column of 'contacts' in the schema cache",
      ]);
      const big = await post('contacts', { name: 'x'.repeat(5000) });
      expect([big.status, big.body.code]).toEqual([413, 'TLY001']);
      const notNull = await post('personal_transactions', { amount: 1, category_id: 'other', method_id: 'cash' });
      expect([notNull.status, notNull.body.code]).toEqual([400, '23502']);
      const enumBad = await post('personal_transactions', expense({ method_id: 'barter' }));
      expect([enumBad.status, enumBad.body.code]).toEqual([400, '23514']);
      const syntax = await post('personal_transactions', expense({ amount: 'lots' }));
      expect([syntax.status, syntax.body.code]).toEqual([400, '22P02']);
      const range = await post('funds', {
        name: 'x',
        contribution_amount: 1,
        contribution_frequency: 'monthly',
        contribution_due_day: 99999,
      });
      expect([range.status, range.body.code]).toEqual([400, '22003']);
      const media = await request(t.app)
        .post('/rest/v1/contacts')
        .set({ ...auth(), 'Content-Type': 'application/xml' })
        .send('<x/>');
      expect(media.status).toBe(415);
      for (const r of [malformed, unknown, notNull, enumBad, syntax, range])
        expect(JSON.stringify(r.body)).not.toMatch(/INSERT|SELECT|jsonb_/);
    });
  });

  describe('tenancy and scopes', () => {
    it("refuses a body naming another workspace, or another workspace's fund; nothing is written", async () => {
      const before = await count('personal_transactions', `workspace_id = '${b.id}'`);
      const other = await post('personal_transactions', expense({ workspace_id: b.id, name: 'Smuggled' }));
      expect([other.status, other.body.code]).toEqual([403, '42501']);
      expect(await count('personal_transactions', `workspace_id = '${b.id}'`)).toBe(before);
      const bulk = await post('personal_transactions', [
        expense({ workspace_id: a.id, name: 'Legit' }),
        expense({ workspace_id: b.id, name: 'Smuggled' }),
      ]);
      expect(bulk.status).toBe(403);
      expect(await count('personal_transactions', `name IN ('Legit', 'Smuggled')`)).toBe(0);
      const fund = await post('fund_transactions', {
        fund_id: b.fundId,
        name: 'Steal',
        amount: -500,
        category_id: 'other',
        method_id: 'cash',
      });
      expect([fund.status, fund.body.code]).toEqual([409, '23503']);
      expect(await count('fund_transactions', `name = 'Steal'`)).toBe(0);
      const participant = await post('fund_participants', { fund_id: a.fundId, contact_id: b.contactId });
      expect(participant.status).toBe(409);
    });

    it('cannot move or touch rows of another workspace with PATCH or DELETE', async () => {
      const move = await patch(`personal_transactions?id=eq.${a.expenseId}`, { workspace_id: b.id });
      expect([move.status, move.body.code]).toEqual(onCitus ? [400, '0A000'] : [403, '42501']);
      expect(
        first(await db.admin`SELECT workspace_id FROM public.personal_transactions WHERE id = ${a.expenseId}`),
      ).toEqual({
        workspace_id: a.id,
      });
      const touch = await patch(
        `personal_transactions?id=eq.${b.expenseId}`,
        { name: 'hacked' },
        { Prefer: 'return=representation,count=exact' },
      );
      expect([touch.status, touch.body, touch.headers['content-range']]).toEqual([200, [], '*/0']);
      const gone = await del(`contacts?id=eq.${b.contactId}`);
      expect(gone.status).toBe(204);
      expect(await count('contacts', `id = '${b.contactId}'`)).toBe(1);
      expect(first(await db.admin`SELECT name FROM public.personal_transactions WHERE id = ${b.expenseId}`).name).toBe(
        'beta lunch',
      );
    });

    it('answers 403 "read-only" to a read token and 401 to anon for every write', async () => {
      for (const res of [
        await post('contacts', { name: 'ro' }, {}, readA),
        await patch(`contacts?id=eq.${a.contactId}`, { name: 'ro' }, {}, readA),
        await del(`contacts?id=eq.${a.contactId}`, {}, readA),
      ]) {
        expect([res.status, res.body.code]).toEqual([403, '42501']);
        expect(res.body.message).toMatch(/read-only/);
      }
      const anon = await post('contacts', { name: 'anon' }, {}, null);
      expect(anon.status).toBe(401);
      expect(await count('contacts', `name IN ('ro', 'anon')`)).toBe(0);
    });
  });

  describe('PATCH, DELETE and PUT', () => {
    it('PATCH updates the filtered rows: 204, or 200 with the representation and Content-Range', async () => {
      const min = await patch(`contacts?id=eq.${a.contactId}`, { nickname: 'Nick' });
      expect(min.status).toBe(204);
      const rep = await patch(
        'personal_transactions?name=like.Bulk*&select=name,note',
        { note: 'bulk' },
        { Prefer: 'return=representation,count=exact' },
      );
      expect(rep.status).toBe(200);
      expect(rep.headers['content-range']).toBe('0-1/2');
      expect(rep.body).toEqual(
        [
          { name: 'Bulk 1', note: 'bulk' },
          { name: 'Bulk 2', note: 'bulk' },
        ].sort(() => 0),
      );
      expect(await count('personal_transactions', `note = 'bulk'`)).toBe(2);
    });

    it('refuses PATCH and DELETE without a filter', async () => {
      const before = await snapshot();
      const p = await patch('personal_transactions', { note: 'all' });
      expect(p.status).toBe(400);
      expect(p.body.message).toMatch(/requires a filter/);
      const d = await del('personal_transactions');
      expect(d.status).toBe(400);
      expect(d.body.message).toMatch(/requires a filter/);
      expect(await snapshot()).toEqual(before);
    });

    it('max-affected with handling=strict refuses a change touching more rows, atomically', async () => {
      const before = await snapshot();
      const res = await patch(
        'personal_transactions?amount=gt.0',
        { note: 'too many' },
        { Prefer: 'handling=strict, max-affected=1' },
      );
      expect([res.status, res.body.code]).toEqual([400, 'PGRST124']);
      expect(await snapshot()).toEqual(before);
      const ok = await patch(
        `personal_transactions?id=eq.${a.expenseId}`,
        { note: 'just one' },
        { Prefer: 'handling=strict, max-affected=1' },
      );
      expect(ok.status).toBe(204);
      expect(ok.headers['preference-applied']).toBe('handling=strict, max-affected=1');
      const strictBad = await patch(
        `personal_transactions?id=eq.${a.expenseId}`,
        { note: 'x' },
        { Prefer: 'handling=strict, bogus=1' },
      );
      expect([strictBad.status, strictBad.body.code]).toEqual([400, 'PGRST122']);
    });

    it('tx=rollback runs the change, answers, and leaves the database unchanged', async () => {
      const before = await snapshot();
      const res = await del('personal_transactions?amount=gt.0&select=name', {
        Prefer: 'tx=rollback,return=representation',
      });
      expect(res.status).toBe(200);
      expect(res.body.length).toBeGreaterThan(3);
      expect(res.headers['preference-applied']).toBe('return=representation, tx=rollback');
      expect(await snapshot()).toEqual(before);
    });

    it('DELETE removes the filtered rows', async () => {
      const res = await del('personal_transactions?name=in.(Cols 1,Cols 2)&select=name', {
        Prefer: 'return=representation',
      });
      expect(res.status).toBe(200);
      expect(res.body.map((r: { name: string }) => r.name).sort()).toEqual(['Cols 1', 'Cols 2']);
      expect(await count('personal_transactions', `name LIKE 'Cols%'`)).toBe(0);
    });

    it('PUT upserts one row whose key matches the filters', async () => {
      const id = '00000000-0000-4000-8000-000000000001';
      const res = await request(t.app)
        .put(`/rest/v1/contacts?workspace_id=eq.${a.id}&id=eq.${id}&select=name`)
        .set({ ...auth(), Prefer: 'return=representation' })
        .send({ workspace_id: a.id, id, name: 'Put 1' });
      expect([res.status, res.body]).toEqual([201, [{ name: 'Put 1' }]]); // inserted
      const again = await request(t.app)
        .put(`/rest/v1/contacts?workspace_id=eq.${a.id}&id=eq.${id}`)
        .set(auth())
        .send({ workspace_id: a.id, id, name: 'Put 2' });
      expect(again.status).toBe(204);
      expect(first(await db.admin`SELECT name FROM public.contacts WHERE id = ${id}`).name).toBe('Put 2');
      const mismatch = await request(t.app)
        .put(`/rest/v1/contacts?workspace_id=eq.${a.id}&id=eq.${id}`)
        .set(auth())
        .send({ workspace_id: a.id, id: a.contactId, name: 'x' });
      expect([mismatch.status, mismatch.body.code]).toEqual([400, 'PGRST115']);
      const partial = await request(t.app).put(`/rest/v1/contacts?id=eq.${id}`).set(auth()).send({ id, name: 'x' });
      expect([partial.status, partial.body.code]).toEqual([405, 'PGRST105']);
      const foreign = await request(t.app)
        .put(`/rest/v1/contacts?workspace_id=eq.${b.id}&id=eq.${id}`)
        .set(auth())
        .send({ workspace_id: b.id, id, name: 'x' });
      expect(foreign.status).toBe(403);
    });
  });

  it('concurrent writers on one fund: every insert and update lands, totals are exact', async () => {
    const tokA2 = await tokenFor(db.admin, a.id, 'write');
    const jwtA2 = await accessToken({ role: 'api_write', workspace_id: a.id, scope: 'write', sub: tokA2.id });
    const { id: fundId } = first(
      await db.admin`INSERT INTO public.funds (workspace_id, name) VALUES (${a.id}, 'Shared') RETURNING id`,
    );
    const tx = (i: number) => ({
      fund_id: fundId,
      name: `c${i}`,
      amount: i % 2 === 0 ? 10 : -3,
      category_id: 'other',
      method_id: 'cash',
    });
    const writers = [jwtA, jwtA2].map((jwt, w) =>
      (async () => {
        for (let i = 0; i < 15; i++) {
          const res = await post('fund_transactions', [tx(i), tx(i + 1)], {}, jwt);
          expect(res.status).toBe(201);
          const up = await patch(`funds?id=eq.${fundId}`, { description: `writer ${w} step ${i}` }, {}, jwt);
          expect(up.status).toBe(204);
        }
      })(),
    );
    await Promise.all(writers);
    const row = first(
      await db.admin`SELECT count(*)::int AS n, sum(amount)::numeric AS total FROM public.fund_transactions WHERE fund_id = ${fundId}`,
    );
    expect(row.n).toBe(60);
    expect(Number(row.total)).toBe(2 * 15 * 7);
    const res = await request(t.app).get(`/rest/v1/funds?select=balance&id=eq.${fundId}`).set(auth());
    expect(res.body).toEqual([{ balance: 210 }]);
  });
  // A write refused after it ran (a singular answer of more rows, max-affected) was answered as
  // it should be, but its pooled connection was destroyed: every such request opened a new
  // database session (719 in 32 s under a flood of them). Its statements all answered, so the
  // connection is in a known state: rolled back and kept.
  it('rolls a write refused for its results back on the same connection: no new database session', async () => {
    const sessions = async () =>
      (
        await db.admin<{ pid: number }[]>`
        SELECT pid FROM pg_catalog.pg_stat_activity
         WHERE datname = pg_catalog.current_database() AND application_name = 'tally' ORDER BY pid`
      ).map((r) => r.pid);
    // Requests one after the other take the pool's first free slot: make its connection exist.
    expect((await post('personal_transactions', [expense({ name: 'Twin' }), expense({ name: 'Twin' })])).status).toBe(
      201,
    );
    const before = await sessions();
    const rows = await snapshot();
    for (let i = 0; i < 10; i++) {
      const singular = await post('personal_transactions', [expense({ name: 'One of two' }), expense()], {
        Prefer: 'return=representation',
        Accept: 'application/vnd.pgrst.object+json',
      });
      expect([singular.status, singular.body.code]).toEqual([406, 'PGRST116']);
      const strict = await patch(
        'personal_transactions?name=eq.Twin',
        { note: 'too many' },
        {
          Prefer: 'handling=strict, max-affected=1',
        },
      );
      expect([strict.status, strict.body.code]).toEqual([400, 'PGRST124']);
    }
    expect(await snapshot()).toEqual(rows);
    expect(await sessions()).toEqual(before);
  });
});
