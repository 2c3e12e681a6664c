import request from 'supertest';
import { accessToken, startTestApp } from './harness/app.js';
import { tokenFor } from './harness/fixtures.js';
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
/** Workspace B's notes: each 2,000 control characters, which Postgres stores compressed in a few dozen bytes and JSON writes as 12,002. */
const NOTES = 40;
const NOTE_JSON_BYTES = 12_002;
let readB: string;

beforeAll(async () => {
  s = await setUpFinance(restEnv({ TALLY_DB_STATEMENT_TIMEOUT_MS: '60000' }));
  await s.db.admin`
    INSERT INTO public.personal_transactions (workspace_id, name, amount, category_id, method_id)
    SELECT ${s.a.id}, 'bulk ' || n, 1, 'other', 'cash' FROM generate_series(1, 5000) n`;
  await s.db.admin`
    INSERT INTO public.personal_transactions (workspace_id, name, amount, category_id, method_id, note)
    SELECT ${s.b.id}, 'note ' || n, 1, 'other', 'cash', repeat(chr(1), 2000) FROM generate_series(1, ${NOTES}) n`;
  await s.db.admin`ANALYZE public.personal_transactions`;
  // A function of B's notes as a set of scalars: an RPC's body is counted as a read's.
  await s.db.admin`
    CREATE FUNCTION public.notes_of_workspace() RETURNS SETOF text LANGUAGE sql STABLE
    AS 'SELECT note FROM public.personal_transactions WHERE note IS NOT NULL'`;
  await s.db.admin`GRANT EXECUTE ON FUNCTION public.notes_of_workspace() TO api_read`;
  const read = await tokenFor(s.db.admin, s.b.id, 'read');
  readB = await accessToken({ role: 'api_read', workspace_id: s.b.id, scope: 'read', sub: read.id });
  small = startTestApp(
    s.db.url,
    restEnv({ TALLY_DB_MAX_RESPONSE_BYTES: String(SMALL), TALLY_DB_AGGREGATES_ENABLED: 'true' }),
  );
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

describe('a value Postgres stores compressed counts as the bytes it is sent as', () => {
  const aliases = (column: string, n: number) =>
    Array.from({ length: n }, (_, i) => `${column}${i}:${column}`).join(',');
  const asB = (path: string, jwt = s.jwtB) =>
    request(small.app).get(path).set('apikey', TEST_API_KEY).set('authorization', `Bearer ${jwt}`);
  /** The bytes the statement had counted when it stopped, from TLY010's message. */
  const countedOf = (res: request.Response): number => {
    expect([res.status, res.body.code]).toEqual([400, 'TLY010']);
    const m = /^The response would be too large: more than (\d+) bytes$/.exec(res.body.message);
    expect(m).not.toBeNull();
    return Number(m![1]);
  };

  test('the premise: each note takes a few dozen bytes in Postgres and 12,002 in JSON', async () => {
    const [row] = await s.db.admin<{ stored: number; sent: number }[]>`
      SELECT max(pg_column_size(note)) AS stored, max(octet_length(to_json(note)::text)) AS sent
      FROM public.personal_transactions WHERE workspace_id = ${s.b.id} AND note IS NOT NULL`;
    expect(row!.stored).toBeLessThan(100);
    expect(row!.sent).toBe(NOTE_JSON_BYTES);
  });

  // Five aliases of the note make a row of about 60 kB of JSON (more than half the 64 kB bound)
  // that Postgres stores in under 500 bytes: counted by storage, the forty rows (2.4 MB) passed
  // the bound and were built whole (199 aliases of 1,000 such rows built 400 MB in one backend,
  // 1.5 GB at its peak). Counted as sent, the read stops at the second row: the bytes counted are
  // two rows' JSON, at most one row past the bound, whatever the column's compression.
  const ROW = 5 * NOTE_JSON_BYTES;
  test.each([
    ['JSON', `/rest/v1/personal_transactions?select=id,${aliases('note', 5)}&note=not.is.null`, undefined],
    ['an embed', `/rest/v1/categories?select=id,personal_transactions(${aliases('note', 5)})&id=eq.other`, undefined],
    ['an aggregate', `/rest/v1/personal_transactions?select=id,${aliases('note', 5)},count()`, undefined],
  ])('%s stops at the row that passes the bound, counted as sent', async (_, path) => {
    const counted = countedOf(await asB(path));
    expect(counted).toBeGreaterThanOrEqual(2 * ROW);
    expect(counted).toBeLessThan(SMALL + ROW + 100);
  });

  test('CSV, and a function returning the notes as scalars, too', async () => {
    // A CSV line writes the characters raw (10 kB a row); a scalar is one note's JSON.
    const csv = countedOf(
      await asB(`/rest/v1/personal_transactions?select=id,${aliases('note', 5)}&note=not.is.null`).set(
        'accept',
        'text/csv',
      ),
    );
    expect(csv).toBeGreaterThan(SMALL);
    expect(csv).toBeLessThan(SMALL + 5 * 2000 + 100);
    const scalars = countedOf(await asB('/rest/v1/rpc/notes_of_workspace'));
    expect(scalars).toBeGreaterThanOrEqual(Math.ceil(SMALL / NOTE_JSON_BYTES) * NOTE_JSON_BYTES);
    expect(scalars).toBeLessThan(SMALL + NOTE_JSON_BYTES + 2);
  });

  test('the activity log, read with a read token, too (each entry holds the note in its after)', async () => {
    const res = await asB(
      `/rest/v1/activity?select=id,${aliases('after', 5)}&table_name=eq.personal_transactions`,
      readB,
    );
    const counted = countedOf(res);
    expect(counted).toBeGreaterThanOrEqual(2 * ROW);
    expect(counted).toBeLessThan(SMALL + ROW + 5 * 1024);
  });

  test('a write whose representation passes the bound is refused and writes nothing', async () => {
    const res = await request(small.app)
      .patch(`/rest/v1/personal_transactions?note=not.is.null&select=id,${aliases('note', 5)}`)
      .set('apikey', TEST_API_KEY)
      .set('authorization', `Bearer ${s.jwtB}`)
      .set('prefer', 'return=representation')
      .send({ name: 'renamed' });
    expect(countedOf(res)).toBeGreaterThanOrEqual(2 * ROW);
    const [row] = await s.db.admin<{ n: number }[]>`
      SELECT count(*)::int AS n FROM public.personal_transactions WHERE name = 'renamed'`;
    expect(row!.n).toBe(0);
  });

  test('within the bound, the same notes are served whole', async () => {
    const res = await asB(`/rest/v1/personal_transactions?select=id,note&note=not.is.null&limit=4`);
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(4);
    expect(res.body[0].note).toBe('\u0001'.repeat(2000));
  });
});
