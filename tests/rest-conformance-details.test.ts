import request from 'supertest';
import type { BlogSuite } from './harness/suite.js';
import { tearDown } from './harness/suite.js';
import { getter, setUpConformance } from './harness/conformance.js';
import { TEST_API_KEY } from './harness/rest.js';
import { first } from './harness/present.js';

// Details where clients notice a difference: estimated counts with HEAD and ranges, bulk insert
// with missing=default and return=representation, error bodies.

describe('PostgREST conformance: counts, bulk inserts and error bodies', () => {
  let s: BlogSuite;
  beforeAll(async () => {
    s = await setUpConformance();
  });
  afterAll(() => tearDown(s.db, s.t));
  const get = getter(() => s);
  const user = () => ({ apikey: TEST_API_KEY, Authorization: `Bearer ${s.userJwt}` });

  it('answers count=estimated with 206 and the total on a partial range, for GET and HEAD', async () => {
    for (const method of ['get', 'head'] as const) {
      const agent = request(s.t.app);
      const res = await agent[method]('/rest/v1/projects?limit=2&order=id').set({
        apikey: TEST_API_KEY,
        Prefer: 'count=estimated',
      });
      expect(res.status).toBe(206);
      expect(res.headers['content-range']).toBe('0-1/5');
    }
    const ranged = await get('projects?order=id', { Prefer: 'count=estimated', Range: '1-2' });
    expect(ranged.status).toBe(206);
    expect(ranged.headers['content-range']).toBe('1-2/5');
    const whole = await get('projects', { Prefer: 'count=estimated' });
    expect(whole.status).toBe(200);
    expect(whole.headers['content-range']).toBe('0-4/5');
  });

  it('bulk-inserts with missing=default and return=representation, returning every row with its defaults', async () => {
    const res = await request(s.t.app)
      .post('/rest/v1/things?columns=id,status')
      .set({ ...user(), Prefer: 'missing=default,return=representation' })
      .send([{ id: 10, status: 'open' }, { id: 11 }]);
    expect(res.status).toBe(201);
    expect(res.headers['preference-applied']).toContain('missing=default');
    expect(res.body.map((r: { id: number; status: string; created: string }) => [r.id, r.status, r.created])).toEqual([
      [10, 'open', '2020-01-01'],
      [11, 'new', '2020-01-01'],
    ]);
    expect(first(await s.db.admin`SELECT status FROM conf.things WHERE id = 11`).status).toBe('new');
    const noColumns = await request(s.t.app)
      .post('/rest/v1/things?select=id,status,created')
      .set({ ...user(), Prefer: 'missing=default,return=representation' })
      .send([
        { id: 12, status: null },
        { id: 13, status: 'x' },
      ]);
    expect(noColumns.status).toBe(400); // status is NOT NULL: an explicit null is not "missing"
    expect(noColumns.body.code).toBe('23502');
    const ok = await request(s.t.app)
      .post('/rest/v1/things?select=id,status,created')
      .set({ ...user(), Prefer: 'missing=default,return=representation' })
      .send([{ id: 12 }, { id: 13 }]);
    expect(ok.status).toBe(201);
    expect(ok.body).toEqual([
      { id: 12, status: 'new', created: '2020-01-01' },
      { id: 13, status: 'new', created: '2020-01-01' },
    ]);
  });

  it("answers errors with PostgREST's code, message and details", async () => {
    const column = await get('projects?select=nope');
    expect(column.status).toBe(400);
    expect(column.body).toMatchObject({ code: '42703', message: 'column projects.nope does not exist' });
    const parse = await get('projects?id=xx.1');
    expect(parse.status).toBe(400);
    expect(parse.body.code).toBe('PGRST100');
    const notEmbedded = await get('projects?select=id&clients.id=eq.1');
    expect([notEmbedded.status, notEmbedded.body]).toEqual([
      400,
      {
        code: 'PGRST108',
        message: "'clients' is not an embedded resource in this request",
        details: null,
        hint: "Verify that 'clients' is included in the 'select' query parameter.",
      },
    ]);
    const single = await get('projects', { Accept: 'application/vnd.pgrst.object+json' });
    expect(single.status).toBe(406);
    expect(single.body).toEqual({
      code: 'PGRST116',
      message: 'Cannot coerce the result to a single JSON object',
      details: 'The result contains 5 rows',
      hint: null,
    });
  });

  it('answers a negative limit 416, skips a negative offset, and words a reversed Range as PostgREST', async () => {
    const negative = await get('projects?select=id&limit=-1');
    expect([negative.status, negative.body]).toEqual([
      416,
      {
        code: 'PGRST103',
        message: 'Requested range not satisfiable',
        details: 'Limit should be greater than or equal to zero.',
        hint: null,
      },
    ]);
    const offset = await get('projects?select=id&order=id&offset=-4');
    expect([offset.status, offset.body, offset.headers['content-range']]).toEqual([
      200,
      [{ id: 1 }, { id: 2 }, { id: 3 }, { id: 4 }, { id: 5 }],
      '0-4/*',
    ]);
    const reversed = await get('projects?select=id', { Range: '3-1' });
    expect([reversed.status, reversed.body.details]).toEqual([
      416,
      'The lower boundary must be lower than or equal to the upper boundary in the Range header.',
    ]);
  });

  it('refuses a write of several rows under the object media type, returned or not, and changes nothing', async () => {
    const object = { ...user(), Accept: 'application/vnd.pgrst.object+json' };
    const del = await request(s.t.app).delete('/rest/v1/assignments?site=eq.x&day=eq.1').set(object);
    expect(del.status).toBe(406);
    expect(del.body).toMatchObject({ code: 'PGRST116', details: 'The result contains 2 rows' });
    expect(await s.db.admin`SELECT id FROM conf.assignments WHERE day = 1`).toHaveLength(2);
    const patch = await request(s.t.app).patch('/rest/v1/assignments?id=eq.3').set(object).send({ who: 'Dee' });
    expect(patch.status).toBe(204);
    expect(first(await s.db.admin`SELECT who FROM conf.assignments WHERE id = 3`).who).toBe('Dee');
  });
});
