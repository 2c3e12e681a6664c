import request from 'supertest';
import { asRole, sqlState, type TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import type { WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';
import { waitFor } from './harness/wait.js';
import { dataText, toolCaller } from './harness/mcp-tools.js';
import { keepActivity } from '../gateway/activity.js';
import { loadConfig } from '../gateway/config.js';

// The activity log: every change of a workspace's records, by any surface or by SQL in the
// database, recorded in the change's transaction with who made it; readable by the workspace
// only, writable by no API role; and undo, which puts a record back as it was.

let db: TestDatabase, t: TestApp, a: WorkspaceFixture, b: WorkspaceFixture, jwtA: string, jwtB: string, readA: string;
let tokenA: string;
let tokenIdA: string;

beforeAll(async () => {
  ({ db, t, a, b, jwtA, jwtB, readA, tokenA } = await setUpFinance(restEnv(), ['Activity A', 'Activity B']));
  tokenIdA = JSON.parse(Buffer.from(jwtA.split('.')[1]!, 'base64url').toString()).sub;
});
afterAll(() => tearDown(db, t));

const rest = (method: 'get' | 'post' | 'patch' | 'delete', path: string, jwt = jwtA) => {
  const agent = request(t.app);
  return agent[method](`/rest/v1/${path}`).set({
    apikey: TEST_API_KEY,
    Authorization: `Bearer ${jwt}`,
    Prefer: 'return=representation',
  });
};

interface Activity {
  id: string;
  workspace_id: string;
  table_name: string;
  record_id: string;
  action: string;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
  actor: string;
  token_id: string | null;
  scope: string | null;
  surface: string;
  undo_of: string | null;
}

/** What the database holds of one record's activity, oldest first. */
const activityOf = (table: string, recordId: string) =>
  db.admin<Activity[]>`
    SELECT * FROM public.activity WHERE table_name = ${table} AND record_id = ${recordId} ORDER BY at`;

/** One MCP tools/call with workspace A's write token; its result. */
const callTool = toolCaller(
  () => t.app,
  () => tokenA,
);

const expense = (name: string, amount = 10) => ({ name, amount, category_id: 'other', method_id: 'cash' });

describe('every change is recorded, with who made it', () => {
  it('a create, an update and a delete through /rest/v1: the token, its scope, before and after', async () => {
    const created = await rest('post', 'personal_transactions').send(expense('Logged lunch', 12.5)).expect(201);
    const id = created.body[0].id as string;
    await rest('patch', `personal_transactions?id=eq.${id}`).send({ amount: 14 }).expect(200);
    await rest('patch', `personal_transactions?id=eq.${id}`).send({ amount: 14 }).expect(200); // no change
    await rest('delete', `personal_transactions?id=eq.${id}`).expect(200);

    const log = await activityOf('personal_transactions', id);
    expect(log.map((r) => r.action)).toEqual(['insert', 'update', 'delete']);
    for (const r of log)
      expect(r).toMatchObject({
        workspace_id: a.id,
        actor: 'token',
        token_id: tokenIdA,
        scope: 'write',
        surface: 'rest',
      });
    expect([log[0]!.before, log[0]!.after?.amount]).toEqual([null, 12.5]);
    expect([log[1]!.before?.amount, log[1]!.after?.amount]).toEqual([12.5, 14]);
    expect([log[2]!.before?.name, log[2]!.after]).toEqual(['Logged lunch', null]);
  });

  it('a create through /api/v1 and through MCP names its surface', async () => {
    const api = await request(t.app)
      .post('/api/v1/personal_transactions')
      .set({ Authorization: `Bearer ${jwtA}` })
      .send(expense('Through the wrapper'))
      .expect(201);
    const mcp = await callTool('create_expense', expense('Through MCP'));
    expect(mcp.isError).toBeUndefined();
    const [viaMcp] = await db.admin<{ id: string }[]>`
      SELECT id FROM public.personal_transactions WHERE name = 'Through MCP'`;
    for (const [id, surface] of [
      [api.body.id as string, 'api'],
      [viaMcp!.id, 'mcp'],
    ] as const) {
      const log = await activityOf('personal_transactions', id);
      expect(log.map((r) => [r.action, r.actor, r.token_id, r.surface])).toEqual([
        ['insert', 'token', tokenIdA, surface],
      ]);
    }
  });

  it('SQL run in the database is recorded as the database', async () => {
    const [row] = await db.admin<{ id: string }[]>`
      INSERT INTO public.contacts (workspace_id, name) VALUES (${a.id}, 'Direct SQL') RETURNING id`;
    const log = await activityOf('contacts', row!.id);
    expect(log).toHaveLength(1);
    expect(log[0]).toMatchObject({ action: 'insert', actor: 'database', surface: 'database', token_id: null });
  });

  it('a record with a key of two columns is named by both', async () => {
    const [c] = await db.admin<{ id: string }[]>`
      INSERT INTO public.contacts (workspace_id, name) VALUES (${a.id}, 'Participant') RETURNING id`;
    await rest('post', 'fund_participants').send({ fund_id: a.fundId, contact_id: c!.id }).expect(201);
    const log = await activityOf('fund_participants', `${a.fundId}/${c!.id}`);
    expect(log.map((r) => [r.action, r.surface])).toEqual([['insert', 'rest']]);
  });
});

describe('who may read and write the log', () => {
  it('a workspace reads its own activity only', async () => {
    await rest('post', 'contacts', jwtB).send({ name: 'B only' }).expect(201);
    const mine = await rest('get', 'activity?select=workspace_id,table_name,action&order=at.desc').expect(200);
    expect(mine.body.length).toBeGreaterThan(0);
    expect(mine.body.every((r: Activity) => r.workspace_id === a.id)).toBe(true);
    const theirs = await rest('get', 'activity?select=workspace_id&limit=100', jwtB).expect(200);
    expect(theirs.body.every((r: Activity) => r.workspace_id === b.id)).toBe(true);
    const probe = await rest('get', `activity?workspace_id=eq.${b.id}`).expect(200);
    expect(probe.body).toEqual([]);
  });

  it('no API role can write, change or delete activity, through the API or in SQL', async () => {
    const [some] = await db.admin<
      { id: string }[]
    >`SELECT id FROM public.activity WHERE workspace_id = ${a.id} LIMIT 1`;
    const before = await db.admin`SELECT count(*)::int AS n FROM public.activity`;
    expect(
      (await rest('post', 'activity').send({ table_name: 'funds', record_id: 'x', action: 'insert' })).status,
    ).toBe(403);
    expect((await rest('patch', `activity?id=eq.${some!.id}`).send({ action: 'delete' })).status).toBe(403);
    expect((await rest('delete', `activity?id=eq.${some!.id}`)).status).toBe(403);
    for (const statement of [
      `INSERT INTO public.activity (workspace_id, table_name, record_id, action, actor, surface) VALUES ('${a.id}', 'funds', 'x', 'insert', 'token', 'rest')`,
      `UPDATE public.activity SET action = 'delete'`,
      `DELETE FROM public.activity`,
      `TRUNCATE public.activity`,
    ])
      expect(await sqlState(asRole(db.admin, 'api_write', { workspace_id: a.id }, (tx) => tx.unsafe(statement)))).toBe(
        '42501',
      );
    expect(await db.admin`SELECT count(*)::int AS n FROM public.activity`).toEqual(before);
  });
});

describe('undo', () => {
  const undo = (activityId: string, jwt = jwtA) =>
    rest('post', 'rpc/undo_change', jwt).send({ activity_id: activityId });
  const lastChange = async (table: string, recordId: string) => (await activityOf(table, recordId)).at(-1)!;

  it('reverts an update, and the undo is itself a change in the log', async () => {
    const { body } = await rest('post', 'personal_transactions').send(expense('Typo', 100)).expect(201);
    const id = body[0].id as string;
    await rest('patch', `personal_transactions?id=eq.${id}`).send({ amount: 1000, note: 'oops' }).expect(200);
    const mistake = await lastChange('personal_transactions', id);
    const res = await undo(mistake.id).expect(200);
    expect(res.body).toEqual([
      expect.objectContaining({ action: 'update', undo_of: mistake.id, record_id: id, actor: 'token' }),
    ]);
    const [row] =
      await db.admin`SELECT amount::float AS amount, note FROM public.personal_transactions WHERE id = ${id}`;
    expect(row).toEqual({ amount: 100, note: null });
  });

  it('brings a deleted record back with the same id, and what its delete cascaded to', async () => {
    const { body } = await rest('post', 'funds')
      .send({ name: 'Doomed', kind: 'Travel', target_amount: 500 })
      .expect(201);
    const fundId = body[0].id as string;
    await rest('post', 'fund_transactions')
      .send({ fund_id: fundId, name: 'Deposit', amount: 50, category_id: 'fund-income', method_id: 'cash' })
      .expect(201);
    await rest('post', 'fund_participants').send({ fund_id: fundId, contact_id: a.contactId }).expect(201);
    await rest('delete', `funds?id=eq.${fundId}`).expect(200);
    const counts = () =>
      db.admin`SELECT (SELECT count(*) FROM public.funds WHERE id = ${fundId})::int AS funds,
                      (SELECT count(*) FROM public.fund_transactions WHERE fund_id = ${fundId})::int AS transactions,
                      (SELECT count(*) FROM public.fund_participants WHERE fund_id = ${fundId})::int AS participants`;
    expect(await counts()).toEqual([{ funds: 0, transactions: 0, participants: 0 }]);

    const deleted = await lastChange('funds', fundId);
    expect(deleted.action).toBe('delete');
    const res = await undo(deleted.id);
    if (res.status !== 200) console.log('UNDO', res.body);
    const made = res.body.map((r: Activity) => `${r.table_name} ${r.action}`);
    expect(made[0]).toBe('funds insert');
    expect([...made].sort()).toEqual(['fund_participants insert', 'fund_transactions insert', 'funds insert']);
    expect(await counts()).toEqual([{ funds: 1, transactions: 1, participants: 1 }]);
    const [fund] = await db.admin`SELECT name, target_amount::float AS target FROM public.funds WHERE id = ${fundId}`;
    expect(fund).toEqual({ name: 'Doomed', target: 500 });
  });

  it('removes a created record', async () => {
    const { body } = await rest('post', 'contacts').send({ name: 'Made by mistake' }).expect(201);
    const id = body[0].id as string;
    await undo((await lastChange('contacts', id)).id).expect(200);
    expect(await db.admin`SELECT 1 FROM public.contacts WHERE id = ${id}`).toHaveLength(0);
  });

  it('refuses when the record changed again since, naming that change, and changes nothing', async () => {
    const { body } = await rest('post', 'contacts').send({ name: 'First' }).expect(201);
    const id = body[0].id as string;
    await rest('patch', `contacts?id=eq.${id}`).send({ name: 'Second' }).expect(200);
    const first = await lastChange('contacts', id);
    await rest('patch', `contacts?id=eq.${id}`).send({ name: 'Third' }).expect(200);
    const second = await lastChange('contacts', id);
    const res = await undo(first.id).expect(409);
    expect(res.body.code).toBe('PT409');
    expect(res.body.message).toContain(`changed again since (change ${second.id}, update`);
    expect(res.body.hint).toBe(`Undo change ${second.id} first, or change the record by hand`);
    const [row] = await db.admin`SELECT name FROM public.contacts WHERE id = ${id}`;
    expect(row).toEqual({ name: 'Third' });

    // Undone twice: the second time says it was undone, and by which change (whose undo makes it again).
    const undone = await undo(second.id).expect(200);
    const again = await undo(second.id).expect(409);
    expect(again.body.message).toContain(`Change ${second.id} was undone already, by change ${undone.body[0].id}`);
    expect(again.body.hint).toBe('Nothing is left to undo of it: its record is as it was before it');
  });

  it("cannot undo another workspace's change, nor undo with a read token", async () => {
    const { body } = await rest('post', 'contacts', jwtB).send({ name: 'B contact' }).expect(201);
    const change = await lastChange('contacts', body[0].id);
    const res = await undo(change.id).expect(404);
    expect(res.body.code).toBe('PT404');
    expect(await db.admin`SELECT 1 FROM public.contacts WHERE id = ${body[0].id}`).toHaveLength(1);
    const own = await rest('post', 'contacts').send({ name: 'A contact' }).expect(201);
    const read = await undo((await lastChange('contacts', own.body[0].id)).id, readA);
    expect([read.status, read.body.code]).toEqual([403, '42501']);
    expect(await db.admin`SELECT 1 FROM public.contacts WHERE id = ${own.body[0].id}`).toHaveLength(1);
  });
});

describe('retention', () => {
  it('keeps TALLY_ACTIVITY_RETENTION_DAYS of activity (365 by default) and prunes what is older', async () => {
    expect(loadConfig({}).activityRetentionDays).toBe(365);
    expect(() => loadConfig({ TALLY_ACTIVITY_RETENTION_DAYS: '0' })).toThrow(
      'TALLY_ACTIVITY_RETENTION_DAYS must be from 1 to 36500, got "0"',
    );
    const aged = async (days: number) =>
      (
        await db.admin<{ id: string }[]>`
        INSERT INTO public.activity (workspace_id, at, table_name, record_id, action, actor, surface)
        VALUES (${a.id}, now() - make_interval(days => ${days}), 'contacts', ${'aged-' + days}, 'insert', 'database', 'database')
        RETURNING id`
      )[0]!.id;
    const old = await aged(40);
    const recent = await aged(10);
    const stop = keepActivity(t.ctx.db, { ...t.ctx.config, activityRetentionDays: 30 });
    try {
      await waitFor(
        async () => (await db.admin`SELECT 1 FROM public.activity WHERE id = ${old}`).length === 0,
        'the activity older than 30 days to be pruned',
      );
      expect(await db.admin`SELECT 1 FROM public.activity WHERE id = ${recent}`).toHaveLength(1);
    } finally {
      stop();
    }
  });
});

describe('through MCP: list_activity, undo_change, and the activity id of an update or delete', () => {
  it('an agent deletes the wrong expense, finds the change and puts it back with one call', async () => {
    const created = await callTool('create_expense', expense('Agent mistake', 42));
    const id = (created.structuredContent.expense as { id: string }).id;
    const deleted = await callTool('delete_expense', { id });
    expect(deleted.isError).toBeUndefined();
    const activityId = deleted.structuredContent.activity_id as string;
    expect(deleted.content[0]!.text).toContain(`To undo it: undo_change with activity_id ${activityId}.`);
    expect(await db.admin`SELECT 1 FROM public.personal_transactions WHERE id = ${id}`).toHaveLength(0);

    const listed = await callTool('list_activity', { table: 'personal_transactions', record_id: id });
    const changes = listed.structuredContent.changes as Activity[];
    expect(changes.map((c) => [c.id === activityId, c.action, c.surface])).toEqual([
      [true, 'delete', 'mcp'],
      [false, 'insert', 'mcp'],
    ]);

    const undone = await callTool('undo_change', { activity_id: activityId });
    expect(undone.isError).toBeUndefined();
    expect(undone.structuredContent).toMatchObject({
      undone: activityId,
      changes: [expect.objectContaining({ action: 'insert', undo_of: activityId, surface: 'mcp' })],
    });
    // The agent reads what the undo did, not an "insert" it might take for the change undone.
    expect(dataText(undone.content[0]!.text)).toMatch(
      new RegExp(`^Undid change ${activityId}\\. The undo made: insert of personal_transactions ${id}\\.`),
    );
    expect(await db.admin`SELECT amount::float AS amount FROM public.personal_transactions WHERE id = ${id}`).toEqual([
      { amount: 42 },
    ]);

    const again = await callTool('undo_change', { activity_id: activityId });
    expect(again.isError).toBe(true);
    expect(again.content[0]!.text).toContain(`Change ${activityId} was undone already`);
  });

  it('an update names its change, and undo_change reverts it', async () => {
    const updated = await callTool('update_contact', { id: a.contactId, nickname: 'Oops' });
    const activityId = updated.structuredContent.activity_id as string;
    expect(activityId).toMatch(/^[0-9a-f-]{36}$/);
    await callTool('undo_change', { activity_id: activityId });
    expect(await db.admin`SELECT nickname FROM public.contacts WHERE id = ${a.contactId}`).toEqual([
      { nickname: null },
    ]);
  });
});
