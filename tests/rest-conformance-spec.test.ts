import request from 'supertest';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import type { WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';
import { first } from './harness/present.js';

// Where the interface's rules meet PostgREST's grammar on /rest/v1: the database enforces them,
// so /rest/v1 answers as the other surfaces do. An invalid category_id/method_id is a 400 naming
// the field and its allowed values, occurred_at must be finite, and a contact's gender and
// nationality are create-only.

describe('interface rules on /rest/v1, enforced in the database', () => {
  let db: TestDatabase, t: TestApp, a: WorkspaceFixture, jwtA: string;
  beforeAll(async () => {
    ({ db, t, a, jwtA } = await setUpFinance(restEnv()));
  });
  afterAll(() => tearDown(db, t));

  const auth = () => ({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwtA}` });
  const post = (path: string, body: unknown) =>
    request(t.app)
      .post(`/rest/v1/${path}`)
      .set(auth())
      .send(body as object);
  const patch = (path: string, body: unknown) =>
    request(t.app)
      .patch(`/rest/v1/${path}`)
      .set(auth())
      .send(body as object);
  const expense = (over: Record<string, unknown> = {}) => ({
    name: 'Rule',
    amount: 3.5,
    category_id: 'food-drinks',
    method_id: 'cash',
    ...over,
  });
  const count = async (name: string) =>
    Number(first(await db.admin`SELECT count(*)::int AS n FROM personal_transactions WHERE name = ${name}`).n);

  it('answers an unknown or wrong-list category_id with 400 naming the field and the allowed values', async () => {
    const unknown = await post('personal_transactions', expense({ name: 'BadCat', category_id: 'yachts' }));
    expect(unknown.status).toBe(400);
    expect(unknown.body.code).toBe('23514');
    expect(unknown.body.message).toBe('category_id "yachts" is not a known category');
    expect(unknown.body.details).toMatch(/^category_id must be one of: .*food-drinks/);
    expect(unknown.body.details).not.toContain('fund-income'); // a category of funds only
    const wrongList = await post('fund_transactions', {
      fund_id: a.fundId,
      name: 'BadCat',
      amount: 1,
      category_id: 'investments',
      method_id: 'cash',
    });
    expect(wrongList.status).toBe(400);
    expect(wrongList.body.details).toMatch(/^category_id must be one of: .*fund-income/);
    const update = await patch(`personal_transactions?id=eq.${a.expenseId}`, { category_id: 'yachts' });
    expect(update.status).toBe(400);
    expect(await count('BadCat')).toBe(0);
  });

  it('answers an unknown method_id with 400 naming the field and the allowed values', async () => {
    const res = await post('personal_transactions', expense({ name: 'BadMethod', method_id: 'barter' }));
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: '23514', message: 'method_id "barter" is not a known payment method' });
    expect(res.body.details).toMatch(/^method_id must be one of: .*cash/);
    expect(await count('BadMethod')).toBe(0);
  });

  it('refuses an occurred_at that is not a finite instant', async () => {
    for (const when of ['infinity', '-infinity']) {
      const res = await post('personal_transactions', expense({ name: 'Forever', occurred_at: when }));
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('23514');
    }
    const update = await patch(`personal_transactions?id=eq.${a.expenseId}`, { occurred_at: 'infinity' });
    expect(update.status).toBe(400);
    expect(await count('Forever')).toBe(0);
    const row = first(
      await db.admin`SELECT isfinite(occurred_at) AS ok FROM personal_transactions WHERE id = ${a.expenseId}`,
    );
    expect(row.ok).toBe(true);
  });

  it("keeps a contact's gender and nationality create-only, while other columns change", async () => {
    const created = await post('contacts', { name: 'Nia', gender: 'female', nationality: 'KE' });
    expect(created.status).toBe(201);
    const { id } = first(await db.admin`SELECT id FROM contacts WHERE name = 'Nia'`);
    for (const body of [{ gender: 'male' }, { nationality: 'UK' }, { name: 'Nia B', nationality: 'UK' }]) {
      const res = await patch(`contacts?id=eq.${id}`, body);
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('42501');
    }
    const renamed = await patch(`contacts?id=eq.${id}`, { nickname: 'N' });
    expect(renamed.status).toBe(204);
    const [row] = await db.admin`SELECT name, nickname, gender, nationality FROM contacts WHERE id = ${id}`;
    expect(row).toEqual({ name: 'Nia', nickname: 'N', gender: 'female', nationality: 'KE' });
  });
});
