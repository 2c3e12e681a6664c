import request from 'supertest';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import type { WorkspaceFixture } from './harness/fixtures.js';
import { restEnv } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';

// The activity log on the /api/v1 wrapper: GET /activity (table, record_id and since, paged as
// the other lists), GET /activity/{id}, and POST /activity/{id}/undo, which puts a record back as
// it was before a change; a workspace sees and undoes only its own changes.

let db: TestDatabase, t: TestApp, b: WorkspaceFixture, jwtA: string, jwtB: string;

beforeAll(async () => {
  ({ db, t, b, jwtA, jwtB } = await setUpFinance(restEnv(), ['Wrapper activity A', 'Wrapper activity B']));
});
afterAll(() => tearDown(db, t));

const api = (method: 'get' | 'post' | 'patch' | 'delete', path: string, jwt = jwtA) => {
  const agent = request(t.app);
  return agent[method](`/api/v1/${path}`).set({ Authorization: `Bearer ${jwt}` });
};

interface Change {
  id: string;
  at: string;
  table_name: string;
  record_id: string;
  action: string;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
  surface: string;
  undo_of: string | null;
}

const expense = (name: string, amount = 10) => ({ name, amount, category_id: 'other', method_id: 'cash' });

/** A new expense of A, through the wrapper; its id. */
const created = async (name: string, amount = 10): Promise<string> =>
  (await api('post', 'personal_transactions').send(expense(name, amount)).expect(201)).body.id as string;

/** A's changes of one record, newest first, through the wrapper. */
const changesOf = async (id: string): Promise<Change[]> =>
  (await api('get', `activity?record_id=${id}`).expect(200)).body as Change[];

/** The expense as the database holds it (undefined when there is none). */
const stored = async (id: string) =>
  (
    await db.admin<{ name: string; amount: string }[]>`
    SELECT name, amount::text FROM public.personal_transactions WHERE id = ${id}`
  )[0];

describe('GET /api/v1/activity', () => {
  it('lists the changes of a record newest first, with the surface, and narrows by table, record and time', async () => {
    const id = await created('Listed lunch', 12);
    await api('patch', `personal_transactions/${id}`).send({ amount: 14 }).expect(200);
    await api('delete', `personal_transactions/${id}`).expect(200);
    const log = await changesOf(id);
    expect(log.map((c) => c.action)).toEqual(['delete', 'update', 'insert']);
    expect(log.every((c) => c.table_name === 'personal_transactions' && c.surface === 'api')).toBe(true);
    expect(log[1]).toMatchObject({ before: { amount: 12 }, after: { amount: 14 } });

    const ofContacts = (await api('get', `activity?table=contacts&record_id=${id}`).expect(200)).body as Change[];
    expect(ofContacts).toEqual([]);
    const ofExpenses = (await api('get', `activity?table=personal_transactions&record_id=${id}`).expect(200))
      .body as Change[];
    expect(ofExpenses).toHaveLength(3);
    const future = (await api('get', `activity?record_id=${id}&since=2999-01-01T00:00:00Z`).expect(200)).body;
    expect(future).toEqual([]);
    const since = encodeURIComponent(log[1]!.at);
    const recent = (await api('get', `activity?record_id=${id}&since=${since}`).expect(200)).body as Change[];
    expect(recent.map((c) => c.action)).toEqual(['delete', 'update']);
    // PostgREST's filters pass through, as on the other lists.
    const updates = (await api('get', `activity?record_id=${id}&action=eq.update`).expect(200)).body as Change[];
    expect(updates.map((c) => c.action)).toEqual(['update']);
  });

  it('pages as the other lists do: limit and offset, 20 by default', async () => {
    const id = await created('Paged', 1);
    for (const amount of [2, 3, 4]) await api('patch', `personal_transactions/${id}`).send({ amount }).expect(200);
    const first = (await api('get', `activity?record_id=${id}&limit=2`).expect(200)).body as Change[];
    const second = (await api('get', `activity?record_id=${id}&limit=2&offset=2`).expect(200)).body as Change[];
    expect(first.map((c) => c.after?.amount)).toEqual([4, 3]);
    expect(second.map((c) => c.after?.amount)).toEqual([2, 1]);
    const all = (await api('get', 'activity').expect(200)).body as Change[];
    expect(all.length).toBeLessThanOrEqual(20);
  });

  it('GET /activity/{id} is one change; workspace B sees none of A’s', async () => {
    const id = await created('Private lunch');
    const [change] = await changesOf(id);
    expect((await api('get', `activity/${change!.id}`).expect(200)).body).toMatchObject({ id: change!.id });
    const seenByB = (await api('get', `activity?record_id=${id}`, jwtB).expect(200)).body;
    expect(seenByB).toEqual([]);
    const listOfB = (await api('get', 'activity?limit=1000', jwtB).expect(200)).body as { workspace_id: string }[];
    expect(listOfB.every((c) => c.workspace_id === b.id)).toBe(true);
    await api('get', `activity/${change!.id}`, jwtB).expect(404);
  });
});

describe('POST /api/v1/activity/{id}/undo', () => {
  it('undoes a create: the record is deleted, and the undo is a change naming the one undone', async () => {
    const id = await created('Created by mistake');
    const [insert] = await changesOf(id);
    const res = await api('post', `activity/${insert!.id}/undo`).expect(200);
    expect(res.body).toMatchObject([{ action: 'delete', record_id: id, undo_of: insert!.id, surface: 'api' }]);
    expect(await stored(id)).toBeUndefined();
  });

  it('undoes an update: the fields it changed are put back', async () => {
    const id = await created('Changed by mistake', 20);
    await api('patch', `personal_transactions/${id}`).send({ amount: 99 }).expect(200);
    const [update] = await changesOf(id);
    expect(update!.action).toBe('update');
    await api('post', `activity/${update!.id}/undo`).expect(200);
    expect(await stored(id)).toEqual({ name: 'Changed by mistake', amount: '20' });
  });

  it('undoes a delete: the record comes back with the same id', async () => {
    const id = await created('Deleted by mistake', 33);
    await api('delete', `personal_transactions/${id}`).expect(200);
    const [del] = await changesOf(id);
    expect(del!.action).toBe('delete');
    await api('post', `activity/${del!.id}/undo`).expect(200);
    expect(await stored(id)).toEqual({ name: 'Deleted by mistake', amount: '33' });
    expect((await api('get', `personal_transactions/${id}`).expect(200)).body.id).toBe(id);
  });

  it('refuses, naming the later change, when the record changed since; nothing is written', async () => {
    const id = await created('Changed since', 5);
    const [insert] = await changesOf(id);
    await api('patch', `personal_transactions/${id}`).send({ amount: 6 }).expect(200);
    const [later] = await changesOf(id);
    const res = await api('post', `activity/${insert!.id}/undo`).expect(409);
    expect(res.body.code).toBe('PT409');
    expect(res.body.message).toContain(later!.id);
    expect(Object.keys(res.body).sort()).toEqual(['code', 'details', 'hint', 'message']);
    expect(await stored(id)).toEqual({ name: 'Changed since', amount: '6' });
    expect(await changesOf(id)).toHaveLength(2);
  });

  it('workspace B cannot undo a change of A: 404, and A’s record stays', async () => {
    const id = await created('Not yours to undo', 7);
    const [insert] = await changesOf(id);
    const res = await api('post', `activity/${insert!.id}/undo`, jwtB).expect(404);
    expect(res.body.code).toBe('PT404');
    expect(await stored(id)).toEqual({ name: 'Not yours to undo', amount: '7' });
    await api('post', 'activity/not-a-uuid/undo').expect(404);
  });

  it('is documented, with the list and one change, in the OpenAPI document', async () => {
    const doc = (await request(t.app).get('/api/v1/openapi.json').expect(200)).body as {
      paths: Record<string, Record<string, { parameters?: { name: string }[] }>>;
    };
    expect(Object.keys(doc.paths['/activity']!)).toEqual(['get']);
    expect(Object.keys(doc.paths['/activity/{id}']!).sort()).toEqual(['get', 'parameters']);
    expect(doc.paths['/activity/{id}/undo']!.post).toMatchObject({ operationId: 'undo_change' });
    const names = doc.paths['/activity']!.get!.parameters!.map((p) => p.name);
    expect(names).toEqual(expect.arrayContaining(['table', 'record_id', 'since', 'limit', 'offset']));
  });
});

describe('POST /api/v1/activity/undo: several changes at once, as rpc/undo_changes', () => {
  /** The expenses as the database holds them, by id (undefined: none). */
  const rows = (ids: string[]) => Promise.all(ids.map((id) => stored(id)));

  it('undoes a list of ids newest first, all or nothing, with a dry run that changes nothing', async () => {
    const one = await created('Batch one', 1);
    const two = await created('Batch two', 2);
    await api('patch', `personal_transactions/${two}`).send({ amount: 22 }).expect(200);
    const ids = [...(await changesOf(one)), ...(await changesOf(two))].map((c) => c.id);

    const preview = await api('post', 'activity/undo').send({ activity_ids: ids, dry_run: true }).expect(200);
    expect(preview.body).toEqual([
      { undone: ids[1], table_name: 'personal_transactions', record_id: two, action: 'update', activity_id: null },
      expect.objectContaining({ undone: ids[2], record_id: two, action: 'delete', activity_id: null }),
      expect.objectContaining({ undone: ids[0], record_id: one, action: 'delete', activity_id: null }),
    ]);
    expect(await rows([one, two])).toEqual([
      { name: 'Batch one', amount: '1' },
      { name: 'Batch two', amount: '22' },
    ]);

    const done = await api('post', 'activity/undo').send({ activity_ids: ids }).expect(200);
    expect(done.body.map((u: { undone: string; action: string }) => [u.undone, u.action])).toEqual([
      [ids[1], 'update'],
      [ids[2], 'delete'],
      [ids[0], 'delete'],
    ]);
    expect(done.body.every((u: { activity_id: string | null }) => typeof u.activity_id === 'string')).toBe(true);
    expect(done.headers['tally-changes']).toBe('3');
    expect(await rows([one, two])).toEqual([undefined, undefined]);
  });

  it('undoes one request by its Tally-Request-Id, and everything of the token since a moment', async () => {
    const res = await api('post', 'personal_transactions').send(expense('By request', 4)).expect(201);
    const byRequest = res.body.id as string;
    await api('post', 'activity/undo').send({ request_id: res.headers['tally-request-id'] }).expect(200);
    expect(await stored(byRequest)).toBeUndefined();

    const since = (await db.admin<{ t: string }[]>`SELECT clock_timestamp()::text AS t`)[0]!.t;
    const kept = await created('Kept since', 5);
    await api('patch', `personal_transactions/${kept}`).send({ amount: 6 }).expect(200);
    await api('delete', `personal_transactions/${kept}`).expect(200);
    const made = await created('Made since', 7);
    const undone = await api('post', 'activity/undo')
      .send({ since: new Date(since).toISOString() })
      .expect(200);
    expect(undone.body.map((u: { action: string }) => u.action)).toEqual(['delete', 'insert', 'update', 'delete']);
    // As before the moment: the one made since is gone, the one made and deleted since too.
    expect(await rows([kept, made])).toEqual([undefined, undefined]);
  });

  it('refuses all of it when one change is in the way (409), or unknown (404): nothing is undone', async () => {
    const first = await created('Blocked first', 1);
    const second = await created('Blocked second', 2);
    const [insert] = await changesOf(second);
    await api('patch', `personal_transactions/${second}`).send({ amount: 3 }).expect(200);
    const [update] = await changesOf(second);
    const [firstInsert] = await changesOf(first);
    const refused = await api('post', 'activity/undo')
      .send({ activity_ids: [firstInsert!.id, insert!.id] })
      .expect(409);
    expect(refused.body).toMatchObject({
      code: 'PT409',
      hint: `Undo change ${update!.id} first, or change the record by hand`,
    });
    expect(await rows([first, second])).toEqual([
      { name: 'Blocked first', amount: '1' },
      { name: 'Blocked second', amount: '3' },
    ]);
    const unknown = '00000000-0000-4000-8000-000000000000';
    const missing = await api('post', 'activity/undo')
      .send({ activity_ids: [firstInsert!.id, unknown] })
      .expect(404);
    expect(missing.body.code).toBe('PT404');
    expect(await stored(first)).toEqual({ name: 'Blocked first', amount: '1' });
    // Workspace B names A's change: it is not in B's activity.
    await api('post', 'activity/undo', jwtB)
      .send({ activity_ids: [firstInsert!.id] })
      .expect(404);
    expect(await stored(first)).toEqual({ name: 'Blocked first', amount: '1' });
  });

  it('checks the body before anything runs: exactly one way, ids that are UUIDs, no unknown field', async () => {
    const cases: [unknown, RegExp][] = [
      [{}, /exactly one of: activity_ids, request_id, since/],
      [{ activity_ids: [], since: '2026-01-01T00:00:00Z' }, /exactly one of|at least 1/],
      [{ activity_ids: ['nope'] }, /activity_ids\.0 must be a UUID/],
      [{ since: 'yesterday' }, /since must be an ISO 8601 date-time/],
      [{ request_id: '00000000-0000-4000-8000-000000000000', everything: true }, /everything is not a known field/],
      [{ activity_ids: Array.from({ length: 1001 }, () => '00000000-0000-4000-8000-000000000000') }, /activity_ids/],
    ];
    for (const [body, message] of cases) {
      const res = await api('post', 'activity/undo').send(body as object);
      expect([res.status, res.body.code, res.body.message]).toEqual([400, 'PGRST102', expect.stringMatching(message)]);
    }
    await api('post', 'activity/undo').set('Content-Type', 'application/json').send('').expect(400);
  });

  it('is documented in the OpenAPI document, with its request and answer schemas', async () => {
    const doc = (await request(t.app).get('/api/v1/openapi.json').expect(200)).body as {
      paths: Record<string, Record<string, Record<string, unknown>>>;
      components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
    };
    expect(doc.paths['/activity/undo']!.post).toMatchObject({
      operationId: 'undo_changes',
      requestBody: { content: { 'application/json': { schema: { $ref: '#/components/schemas/UndoRequest' } } } },
    });
    expect(Object.keys(doc.components.schemas.UndoRequest!.properties!).sort()).toEqual([
      'activity_ids',
      'dry_run',
      'request_id',
      'since',
      'token_id',
    ]);
    expect(Object.keys(doc.components.schemas.Undone!.properties!).sort()).toEqual([
      'action',
      'activity_id',
      'record_id',
      'table_name',
      'undone',
    ]);
  });
});
