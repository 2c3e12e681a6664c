import request from 'supertest';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import type { WorkspaceFixture } from './harness/fixtures.js';
import { restEnv } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';

// Optimistic concurrency on /api/v1: GET of one record answers an ETag; a PATCH or DELETE with
// If-Match answers 412 when the record changed since, and writes nothing.

let db: TestDatabase, t: TestApp, a: WorkspaceFixture, jwtA: string;

beforeAll(async () => {
  ({ db, t, a, jwtA } = await setUpFinance(restEnv(), ['ETag A', 'ETag B']));
});
afterAll(() => tearDown(db, t));

const api = (method: 'get' | 'post' | 'patch' | 'delete', path: string, headers: Record<string, string> = {}) => {
  const agent = request(t.app);
  return agent[method](`/api/v1/${path}`).set({ Authorization: `Bearer ${jwtA}`, ...headers });
};

const created = async (name: string, amount: number): Promise<string> =>
  (
    await api('post', 'personal_transactions')
      .send({ name, amount, category_id: 'other', method_id: 'cash' })
      .expect(201)
  ).body.id as string;

const stored = async (id: string) =>
  (await db.admin<{ amount: string }[]>`SELECT amount::text FROM public.personal_transactions WHERE id = ${id}`)[0];

describe('ETag and If-Match on /api/v1', () => {
  it('GET of one record answers a strong ETag that changes when the record does', async () => {
    const id = await created('Tagged', 10);
    const first = await api('get', `personal_transactions/${id}`).expect(200);
    expect(first.headers.etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
    expect((await api('get', `personal_transactions/${id}`).expect(200)).headers.etag).toBe(first.headers.etag);
    await db.admin`UPDATE public.personal_transactions SET amount = 11 WHERE id = ${id}`;
    expect((await api('get', `personal_transactions/${id}`).expect(200)).headers.etag).not.toBe(first.headers.etag);
    // A fund's detail is more than its row; its ETag is the row's, as its PATCH compares.
    const fund = await api('get', `funds/${a.fundId}`).expect(200);
    expect(fund.headers.etag).toMatch(/^"/);
    await api('patch', `funds/${a.fundId}`, { 'If-Match': fund.headers.etag! }).send({ name: 'Renamed' }).expect(200);
  });

  it('PATCH with the current ETag writes and answers the new one; with an old one it is 412 and writes nothing', async () => {
    const id = await created('Raced, (really) "quoted" * %_ \\ done', 20); // the grammar's characters in a value
    const read = await api('get', `personal_transactions/${id}`).expect(200);
    const patched = await api('patch', `personal_transactions/${id}`, { 'If-Match': read.headers.etag! })
      .send({ amount: 21 })
      .expect(200);
    expect(patched.headers.etag).toBe((await api('get', `personal_transactions/${id}`)).headers.etag);
    // Another client changed it since the first read: the stale tag is refused.
    const stale = await api('patch', `personal_transactions/${id}`, { 'If-Match': read.headers.etag! })
      .send({ amount: 99 })
      .expect(412);
    expect(stale.body).toMatchObject({ code: 'TLY101', message: `The expense ${id} changed since it was read` });
    expect(Object.keys(stale.body).sort()).toEqual(['code', 'details', 'hint', 'message']);
    expect(await stored(id)).toEqual({ amount: '21' });
    const changes = await db.admin`SELECT 1 FROM public.activity WHERE record_id = ${id} AND action = 'update'`;
    expect(changes).toHaveLength(1);
  });

  it('DELETE with a stale ETag is 412 and deletes nothing; with the current one it deletes', async () => {
    const id = await created('Kept', 30);
    const read = await api('get', `personal_transactions/${id}`).expect(200);
    await api('patch', `personal_transactions/${id}`).send({ amount: 31 }).expect(200);
    await api('delete', `personal_transactions/${id}`, { 'If-Match': read.headers.etag! }).expect(412);
    expect(await stored(id)).toEqual({ amount: '31' });
    const now = await api('get', `personal_transactions/${id}`).expect(200);
    await api('delete', `personal_transactions/${id}`, { 'If-Match': now.headers.etag! }).expect(200);
    expect(await stored(id)).toBeUndefined();
  });

  it('If-Match: * and a list containing the tag match; a weak tag does not; no If-Match writes as before', async () => {
    const id = await created('Listed tags', 40);
    const etag = (await api('get', `personal_transactions/${id}`).expect(200)).headers.etag!;
    await api('patch', `personal_transactions/${id}`, { 'If-Match': `"other", ${etag}` })
      .send({ amount: 41 })
      .expect(200);
    await api('patch', `personal_transactions/${id}`, { 'If-Match': '*' }).send({ amount: 42 }).expect(200);
    const now = (await api('get', `personal_transactions/${id}`).expect(200)).headers.etag!;
    await api('patch', `personal_transactions/${id}`, { 'If-Match': `W/${now}` })
      .send({ amount: 43 })
      .expect(412);
    await api('patch', `personal_transactions/${id}`).send({ amount: 44 }).expect(200);
    expect(await stored(id)).toEqual({ amount: '44' });
    await api('patch', `personal_transactions/00000000-0000-4000-8000-000000000000`, { 'If-Match': '*' })
      .send({ amount: 1 })
      .expect(404);
  });
});

describe('the ETag in the OpenAPI document', () => {
  it('is answered by GET of one record, and taken as If-Match by PATCH and DELETE (412)', async () => {
    const doc = (await request(t.app).get('/api/v1/openapi.json').expect(200)).body as {
      paths: Record<string, Record<string, { parameters?: { name: string }[]; responses: Record<string, unknown> }>>;
    };
    const member = doc.paths['/personal_transactions/{id}']!;
    expect(member.get!.responses['200']).toMatchObject({ headers: { ETag: expect.anything() } });
    for (const op of [member.patch!, member.delete!]) {
      expect(op.parameters!.map((p) => p.name)).toContain('If-Match');
      expect(op.responses['412']).toBeDefined();
    }
  });
});
