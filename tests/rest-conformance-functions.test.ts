import request from 'supertest';
import type { BlogSuite } from './harness/suite.js';
import { tearDown } from './harness/suite.js';
import { getter, setUpConformance } from './harness/conformance.js';
import { TEST_API_KEY } from './harness/rest.js';
import { first } from './harness/present.js';

// Functions as PostgREST serves them (GET on VOLATILE ones, counts and HEAD, custom statuses
// raised with sqlstate PTxxx, table results with embedding, errors of the query itself), and
// domains shown and filtered through their casts.

describe('PostgREST conformance: functions, data representations and errors', () => {
  let s: BlogSuite;
  beforeAll(async () => {
    s = await setUpConformance();
  });
  afterAll(() => tearDown(s.db, s.t));
  const get = getter(() => s);
  const user = () => ({ Authorization: `Bearer ${s.userJwt}` });

  it('runs a VOLATILE function over GET, read-only: a write inside it is refused and nothing is stored', async () => {
    const res = await get('rpc/volatile_answer');
    expect(res.status).toBe(200);
    expect(res.body).toBe(42);
    const write = await get('rpc/add_client?name=Sneaky', user());
    expect(write.status).toBe(405);
    expect(write.body.code).toBe('25006');
    expect(await s.db.admin`SELECT 1 FROM conf.clients WHERE name = 'Sneaky'`).toHaveLength(0);
  });

  it('counts and HEADs a table-returning function, and embeds from its rows', async () => {
    const res = await get('rpc/projects_of?client=1&select=name,clients(name),tasks(name)&order=id&tasks.order=id', {
      Prefer: 'count=exact',
    });
    expect(res.status).toBe(200);
    expect(res.headers['content-range']).toBe('0-1/2');
    expect(res.body).toEqual([
      { name: 'Windows', clients: { name: 'Microsoft' }, tasks: [{ name: 'Design w' }, { name: 'Code w' }] },
      { name: 'Office', clients: { name: 'Microsoft' }, tasks: [{ name: 'Design o' }] },
    ]);
    const head = await request(s.t.app)
      .head('/rest/v1/rpc/projects_of?client=2')
      .set({ apikey: TEST_API_KEY, Prefer: 'count=exact' });
    expect(head.status).toBe(200);
    expect(head.headers['content-range']).toBe('0-1/2');
    expect(head.text ?? '').toBe('');
  });

  it("selects, filters and orders the rows of a function of another schema's table, with its computed fields", async () => {
    // Before, such rows were sent as they came: select, filters and order were silently ignored.
    const rows = await get('rpc/all_authors?select=name,initials&initials=neq.T&order=name.desc');
    expect(rows.status).toBe(200);
    expect(rows.body).toEqual([
      { name: 'Woolf', initials: 'W' },
      { name: 'Austen', initials: 'A' },
    ]);
    const embedded = await get('books?select=title,writer(name,initials)&id=in.(1,2)&order=id');
    expect(embedded.status).toBe(200);
    expect(embedded.body).toEqual([
      { title: 'Emma', writer: { name: 'Austen', initials: 'A' } },
      { title: 'War and Peace', writer: { name: 'Tolstoy', initials: 'T' } },
    ]);
    // The other schema's table is no resource of its own.
    expect((await get('conf_private.authors')).status).toBe(404);
  });

  it('answers a raised sqlstate PT402 with status 402 and the message, detail and hint', async () => {
    const res = await get('rpc/pay');
    expect(res.status).toBe(402);
    expect(res.body).toEqual({
      code: 'PT402',
      message: 'Payment Required',
      details: 'Quota exceeded',
      hint: 'Upgrade your plan',
    });
  });

  it("answers RAISE SQLSTATE 'PGRST' with the status, headers and body the function gives", async () => {
    const res = await get('rpc/custom_error');
    expect(res.status).toBe(402);
    expect(res.headers['x-powered-by']).toBe('Nerd Rage');
    expect(res.body).toEqual({
      code: '123',
      message: 'Payment Required',
      details: 'Quota exceeded',
      hint: 'Upgrade your plan',
    });
    const bad = await get('rpc/bad_custom_error');
    expect(bad.status).toBe(500);
    expect(bad.body.code).toBe('PGRST121');
  });

  it("answers a cardinality violation (21000) with 400 and Postgres's message", async () => {
    const res = await get('rpc/two_rows_as_one');
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      code: '21000',
      message: 'more than one row returned by a subquery used as an expression',
    });
  });

  it('shows and filters a domain column through its casts (data representations)', async () => {
    const res = await get('swatches?select=name,color&order=id');
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { name: 'red', color: '#ff0000' },
      { name: 'blue', color: '#0000ff' },
    ]);
    const star = await get('swatches?id=eq.2');
    expect(star.body).toEqual([{ id: 2, name: 'blue', color: '#0000ff' }]);
    const filtered = await get(`swatches?select=name&color=eq.${encodeURIComponent('#ff0000')}`);
    expect(filtered.body).toEqual([{ name: 'red' }]);
    const list = await get(`swatches?select=name&color=in.(${encodeURIComponent('#0000ff,#123456')})`);
    expect(list.body).toEqual([{ name: 'blue' }]);
    const embedded = await get('swatches?select=name,color&id=eq.1', { Accept: 'application/vnd.pgrst.object+json' });
    expect(embedded.body).toEqual({ name: 'red', color: '#ff0000' });
  });

  it('reads written values of a domain column through its cast from json', async () => {
    const created = await request(s.t.app)
      .post('/rest/v1/swatches')
      .set({ apikey: TEST_API_KEY, ...user(), Prefer: 'return=representation' })
      .send([{ id: 3, name: 'green', color: '#00ff00' }]);
    expect(created.status).toBe(201);
    expect(created.body).toEqual([{ id: 3, name: 'green', color: '#00ff00' }]);
    expect(first(await s.db.admin`SELECT color FROM conf.swatches WHERE id = 3`).color).toBe(65280);
    const changed = await request(s.t.app)
      .patch('/rest/v1/swatches?id=eq.3')
      .set({ apikey: TEST_API_KEY, ...user() })
      .send({ color: '#000001' });
    expect(changed.status).toBe(204);
    expect(first(await s.db.admin`SELECT color FROM conf.swatches WHERE id = 3`).color).toBe(1);
  });
});
