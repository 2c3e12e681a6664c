import request from 'supertest';
import { startTestApp } from './harness/app.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown, type FinanceSuite } from './harness/suite.js';

// One read's cost in Postgres and in the server's memory is bounded by the size of its body
// (TALLY_DB_MAX_RESPONSE_BYTES), counted while Postgres builds it. Embeds nested through one
// category of 5,000 expenses made 25 million embedded rows: a backend grew by about 1 GB before
// `54000 out of memory` (the planner costed it below a plain read of the 5,000 rows, and
// work_mem does not bound it), and a 441 MB response took the server from 0.3 to 2.2 GB.

let s: FinanceSuite;
/** Two servers on one database: the default bound, and a small one. */
let small: FinanceSuite['t'];
const SMALL = 65_536;

beforeAll(async () => {
  s = await setUpFinance(restEnv({ TALLY_DB_STATEMENT_TIMEOUT_MS: '60000' }));
  small = startTestApp(s.db.url, restEnv({ TALLY_DB_MAX_RESPONSE_BYTES: String(SMALL) }));
  await s.db.admin`
    INSERT INTO public.personal_transactions (workspace_id, name, amount, category_id, method_id)
    SELECT ${s.a.id}, 'bulk ' || n, 1, 'other', 'cash' FROM generate_series(1, 5000) n`;
  await s.db.admin`ANALYZE public.personal_transactions`;
}, 60_000);
afterAll(async () => {
  await small.close();
  await tearDown(s.db, s.t);
});

const read = (app: FinanceSuite['t'], path: string) =>
  request(app.app).get(path).set('apikey', TEST_API_KEY).set('authorization', `Bearer ${s.jwtA}`);

test('embeds nested through one category are refused once their body passes the bound, not after a gigabyte', async () => {
  const res = await read(
    s.t,
    '/rest/v1/categories?select=id,personal_transactions(id,categories(id,personal_transactions(id)))&id=eq.other',
  );
  expect(res.status).toBe(400);
  expect(res.body).toMatchObject({ code: 'TLY010', details: `at most ${16 * 1024 * 1024} bytes per response` });
  expect(res.body.message).toMatch(/^The response would be too large: more than \d+ bytes$/);
  expect(res.body.hint).toBeTruthy();
});

test('a read whose body passes the bound is refused with a 400 naming it; within it, served in full', async () => {
  const all = await read(small, '/rest/v1/personal_transactions?select=*');
  expect(all.status).toBe(400);
  expect(all.body).toMatchObject({ code: 'TLY010', details: `at most ${SMALL} bytes per response` });
  // Postgres stopped at the first row past the bound, not once the whole body (5,000 rows, more
  // than a megabyte) was built: the bytes counted are the bound and at most one row more.
  const counted = Number(/more than (\d+) bytes/.exec(all.body.message)?.[1]);
  expect(counted).toBeGreaterThan(SMALL);
  expect(counted).toBeLessThan(SMALL + 1024);

  const page = await read(small, '/rest/v1/personal_transactions?select=id,name&order=name&limit=100');
  expect(page.status).toBe(200);
  expect(page.body).toHaveLength(100);
  expect(Buffer.byteLength(page.text)).toBeLessThanOrEqual(SMALL);
});

test('the bound holds for embedded rows and for CSV, and reads within it are unchanged', async () => {
  const embedded = await read(small, '/rest/v1/categories?select=id,personal_transactions(id,name)&id=eq.other');
  expect(embedded.status).toBe(400);
  expect(embedded.body.code).toBe('TLY010');

  const csv = await read(small, '/rest/v1/personal_transactions?select=id,name,amount').set('accept', 'text/csv');
  expect(csv.status).toBe(400);
  expect(csv.body.code).toBe('TLY010');

  const funds = await read(small, '/rest/v1/funds?select=*,fund_transactions(*)');
  expect(funds.status).toBe(200);
  expect(funds.body).toEqual([expect.objectContaining({ id: s.a.fundId, fund_transactions: [expect.any(Object)] })]);
  const counted = await read(small, '/rest/v1/personal_transactions?select=id&limit=3').set('prefer', 'count=exact');
  expect(counted.status).toBe(206);
  expect(counted.headers['content-range']).toBe('0-2/5001');
});
