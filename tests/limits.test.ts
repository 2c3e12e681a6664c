import request from 'supertest';
import { setUpFinance, tearDown, type FinanceSuite } from './harness/suite.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { waitFor } from './harness/wait.js';

// One tenant cannot starve the others: a request's cost is bounded (embed depth, select width,
// work_mem, statement time) and a workspace token holds at most its share of the pool.

let s: FinanceSuite;

beforeAll(async () => {
  // The harness pool has 4 connections, so a token's share is 2.
  s = await setUpFinance(restEnv({ TALLY_DB_STATEMENT_TIMEOUT_MS: '3000', TALLY_DB_WORK_MEM: '2MB' }));
  // 300 expenses in one category make an embed of expenses through their category costly.
  await s.db.admin`
    INSERT INTO public.personal_transactions (workspace_id, name, amount, category_id, method_id)
    SELECT ${s.a.id}, 'bulk ' || n, 1, 'essentials', 'cash' FROM generate_series(1, 300) n`;
  await s.db.admin.unsafe(
    `CREATE VIEW public.work_mem_probe AS SELECT pg_catalog.current_setting('work_mem') AS work_mem`,
  );
  await s.db.admin.unsafe(`GRANT SELECT ON public.work_mem_probe TO api_read, api_write`);
  await s.db.admin`NOTIFY pgrst, 'reload schema'`;
});
afterAll(() => tearDown(s.db, s.t));

const readA = (path: string) =>
  request(s.t.app).get(path).set('apikey', TEST_API_KEY).set('authorization', `Bearer ${s.jwtA}`);

/** Embeds expenses → category → expenses … `depth` levels deep. */
function nested(depth: number): string {
  let inner = 'id';
  for (let d = depth; d >= 1; d--) inner = `id,${d % 2 === 1 ? 'personal_transactions' : 'categories'}(${inner})`;
  return `/rest/v1/categories?select=${inner}`;
}

describe('the cost of one request', () => {
  it('refuses embeds nested deeper than TALLY_DB_MAX_EMBED_DEPTH (3) with a 400', async () => {
    const ok = await readA(nested(3));
    expect(ok.status).not.toBe(400);
    const res = await readA(nested(4));
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'PGRST100', details: 'at most 3 levels of embedding' });
    expect(res.body.hint).toBeTruthy();
  });

  it('refuses a select wider than TALLY_DB_MAX_SELECT_WIDTH (200) with a 400', async () => {
    const select = Array.from({ length: 201 }, (_, i) => `c${i}:id`).join(',');
    const res = await readA(`/rest/v1/categories?select=${select}`);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'PGRST100', details: '201 items, at most 200' });
    const fine = await readA(`/rest/v1/categories?select=${select.split(',').slice(0, 200).join(',')}`);
    expect(fine.status).toBe(200);
  });

  it('runs every request with the configured work_mem (TALLY_DB_WORK_MEM)', async () => {
    await waitFor(async () => (await readA('/rest/v1/work_mem_probe')).status === 200, 'the new view after the reload');
    const res = await readA('/rest/v1/work_mem_probe');
    expect(res.body).toEqual([{ work_mem: '2MB' }]);
  });
});

describe("a workspace's heavy reads", () => {
  it("leave another workspace's simple reads served while they run", async () => {
    let heavyInFlight = 10;
    const heavy = Array.from({ length: 10 }, () =>
      readA(nested(3)).then((r) => {
        heavyInFlight--;
        return r.status;
      }),
    );
    // Workspace B reads while A's heavy reads are in flight.
    const victim: { status: number; ms: number; heavyInFlight: number }[] = [];
    while (heavyInFlight > 0 && victim.length < 200) {
      const started = performance.now();
      const res = await request(s.t.app)
        .get('/rest/v1/contacts?select=id,name&limit=5')
        .set('apikey', TEST_API_KEY)
        .set('authorization', `Bearer ${s.jwtB}`);
      victim.push({ status: res.status, ms: performance.now() - started, heavyInFlight });
    }
    const statuses = await Promise.all(heavy);
    // The heavy reads either ran or were cut by the statement timeout, or waited for their share.
    for (const st of statuses) expect([200, 429, 504]).toContain(st);
    expect(victim.length).toBeGreaterThan(0);
    expect(victim.every((v) => v.status === 200)).toBe(true);
    // Not starved: B's reads completed while A's heavy ones were still running.
    expect(victim.filter((v) => v.heavyInFlight > 0).length).toBeGreaterThan(0);
    const times = victim.map((v) => v.ms).sort((x, y) => x - y);
    console.log(
      `victim reads under a heavy neighbour: n=${times.length}, median ${times[Math.floor(times.length / 2)]?.toFixed(0)} ms, max ${times.at(-1)?.toFixed(0)} ms; heavy statuses ${statuses.join(',')}`,
    );
  }, 120_000);
});
