import request from 'supertest';
import type { BlogSuite } from './harness/suite.js';
import { tearDown } from './harness/suite.js';
import { getter, setUpConformance } from './harness/conformance.js';
import { TEST_API_KEY } from './harness/rest.js';

// Empty embeds, JSON/array/composite paths with PostgREST's output names, logic trees and
// lists, unicode and spaced names.

describe('PostgREST conformance: empty embeds, paths, logic trees and names', () => {
  let s: BlogSuite;
  beforeAll(async () => {
    s = await setUpConformance();
  });
  afterAll(() => tearDown(s.db, s.t));
  const get = getter(() => s);

  it('leaves out embeds used only for filtering, at any depth', async () => {
    const res = await get('projects?select=id,clients!inner()&clients.id=eq.2&order=id');
    expect(res.status).toBe(200);
    expect(res.body).toEqual([{ id: 3 }, { id: 4 }]);
    const nested = await get('users?select=name,tasks(projects())&id=eq.1');
    expect(nested.body).toEqual([{ name: 'Angela' }]);
    const mixed = await get('clients?select=id,projects!inner(name,tasks!inner())&projects.tasks.name=eq.Code w');
    expect(mixed.body).toEqual([{ id: 1, projects: [{ name: 'Windows' }] }]);
    const notNull = await get('projects?select=id,clients()&clients=not.is.null&order=id&limit=2');
    expect(notNull.body).toEqual([{ id: 1 }, { id: 2 }]);
  });

  it('names JSON, array and composite paths as PostgREST does, in select, filters and order', async () => {
    const res = await get(
      `things?select=${encodeURIComponent('id,data->a->>b,data->list->0,numbers->0,num->i,data->>!@#$%^&*_d')}&order=id&id=lt.3`,
    );
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { id: 1, b: 'x', list: 1, numbers: 1, i: 2, '!@#$%^&*_d': 'odd' },
      { id: 2, b: 'y', list: 3, numbers: 4, i: -1, '!@#$%^&*_d': null },
    ]);
    const filtered = await get('things?select=id&numbers->1=eq.5');
    expect(filtered.body).toEqual([{ id: 2 }]);
    const composite = await get('things?select=id&num->>r=eq.1.5');
    expect(composite.body).toEqual([{ id: 1 }]);
    const ordered = await get('things?select=id&data->n=not.is.null&order=data->n.asc');
    expect(ordered.body).toEqual([{ id: 2 }, { id: 1 }]);
    const aliased = await get('things?select=id,first:numbers->0&id=eq.1');
    expect(aliased.body).toEqual([{ id: 1, first: 1 }]);
  });

  it('reads logic trees with whitespace, array and range literals and quoted list values', async () => {
    const spaced = await get(
      `things?select=id&or=(${encodeURIComponent(' id.eq.1 , and( status.eq.done, id.gt.2 ) ')})&order=id`,
    );
    expect(spaced.status).toBe(200);
    expect(spaced.body).toEqual([{ id: 1 }, { id: 3 }]);
    const arrays = await get(
      `things?select=id&or=(${encodeURIComponent('numbers.cs.{1,2,3},tags.cd.{c,d}')})&order=id`,
    );
    expect(arrays.body).toEqual([{ id: 1 }, { id: 2 }, { id: 3 }]);
    const quoted = await get(`clients?select=id&name=in.(${encodeURIComponent('"Apple","Mic\\"rosoft"')})`);
    expect(quoted.body).toEqual([{ id: 2 }]);
    const empty = await get('clients?select=id&id=in.()');
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual([]);
    const bad = await get('clients?select=id&or=(id.eq.1');
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('PGRST100');
  });

  it('serves unicode and spaced table and column names, percent-encoded', async () => {
    const arabic = await get(`${encodeURIComponent('موارد')}?select=${encodeURIComponent('هویت,اسم کامل')}`);
    expect(arabic.status).toBe(200);
    expect(arabic.body).toEqual([{ هویت: 1, 'اسم کامل': 'یک' }]);
    const spaced = await get(`my%20table?select=id,full%20name&${encodeURIComponent('full name')}=like.Ada*`);
    expect(spaced.status).toBe(200);
    expect(spaced.body).toEqual([{ id: 1, 'full name': 'Ada Lovelace' }]);
    const quoted = await get('my%20table?select=%22full%20name%22');
    expect(quoted.body).toEqual([{ 'full name': 'Ada Lovelace' }]);
  });

  it('answers PGRST205 for an unknown table, never a raw 42P01', async () => {
    const res = await request(s.t.app).get('/rest/v1/nowhere').set({ apikey: TEST_API_KEY });
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('PGRST205');
    expect(res.body.message).toBe("Could not find the table 'conf.nowhere' in the schema cache");
  });
});
