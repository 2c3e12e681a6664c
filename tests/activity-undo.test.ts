import request from 'supertest';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import { tokenFor, type WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';
import { toolCaller, type ToolResult } from './harness/mcp-tools.js';

// Undo an agent can trust: every write names the change it made from its own transaction (or
// says it changed nothing), undo works as a stack whose refusals converge, several changes undo
// at once (all or nothing, with a preview), and the log keeps what changed without a counter
// of the whole database.

let db: TestDatabase, t: TestApp, a: WorkspaceFixture, jwtA: string, tokenA: string, tokenA2: string;

beforeAll(async () => {
  ({ db, t, a, jwtA, tokenA } = await setUpFinance(restEnv(), ['Undo A', 'Undo B']));
  tokenA2 = (await tokenFor(db.admin, a.id, 'write')).token;
});
afterAll(() => tearDown(db, t));

const agent1 = toolCaller(
  () => t.app,
  () => tokenA,
);
const agent2 = toolCaller(
  () => t.app,
  () => tokenA2,
);

/** The structured result of a call that must succeed. */
async function ok(call: Promise<ToolResult>): Promise<Record<string, unknown>> {
  const r = await call;
  if (r.isError) throw new Error(r.content[0]!.text);
  return r.structuredContent;
}

const rest = (method: 'get' | 'post' | 'patch' | 'delete', path: string) => {
  const agent = request(t.app);
  return agent[method](`/rest/v1/${path}`).set({
    apikey: TEST_API_KEY,
    Authorization: `Bearer ${jwtA}`,
    Prefer: 'return=representation',
  });
};

const expense = (name: string, amount = 10) => ({ name, amount, category_id: 'other', method_id: 'cash' });

const exists = async (table: string, id: string) =>
  (await db.admin.unsafe(`SELECT 1 FROM public.${table} WHERE id = $1`, [id])).length === 1;

describe('a write names the change it made, from its own transaction', () => {
  it('an update that changes nothing says so and offers nothing to undo (it named the creation, whose undo deleted the fund and its ledger)', async () => {
    const { fund } = (await ok(agent1('create_fund', { name: 'Noop', kind: 'Travel', target_amount: 500 }))) as {
      fund: { id: string };
    };
    await ok(
      agent1('create_fund_transaction', {
        fund_id: fund.id,
        name: 'Deposit',
        amount: 50,
        category_id: 'fund-income',
        method_id: 'cash',
      }),
    );
    const noop = await agent1('update_fund', { fund_id: fund.id, status: 'Upcoming' });
    expect(noop.isError).toBeUndefined();
    expect(noop.structuredContent.changed).toBe(false);
    expect(noop.structuredContent.activity_id).toBeUndefined();
    expect(noop.content[0]!.text).toContain('Nothing changed');
    expect(noop.content[0]!.text).not.toContain('undo_change with');
    expect(await exists('funds', fund.id)).toBe(true);
  });

  it('creates carry the activity_id of their own change; undoing it removes exactly that record', async () => {
    const made = await ok(agent1('create_expense', expense('Named create')));
    const id = (made.expense as { id: string }).id;
    const [row] =
      await db.admin`SELECT record_id, action FROM public.activity WHERE id = ${made.activity_id as string}`;
    expect(row).toEqual({ record_id: id, action: 'insert' });
    const many = await ok(agent1('create_expenses', { expenses: [expense('One'), expense('Two')] }));
    expect(many.activity_ids).toHaveLength(2);
  });

  it('two agents racing to update one record each get their own change, never the other one', async () => {
    const { expense: e } = (await ok(agent1('create_expense', expense('Raced', 1)))) as { expense: { id: string } };
    for (let round = 0; round < 10; round++) {
      const [x, y] = await Promise.all([
        ok(agent1('update_expense', { id: e.id, amount: 100 + round })),
        ok(agent2('update_expense', { id: e.id, amount: 200 + round })),
      ]);
      for (const [result, amount] of [
        [x, 100 + round],
        [y, 200 + round],
      ] as const) {
        // A write that found the record already at its value changed nothing; any other names the change setting its amount.
        if (result.changed === false) continue;
        const [change] = await db.admin<{ after: { amount: number } }[]>`
          SELECT after FROM public.activity WHERE id = ${result.activity_id as string}`;
        expect(change!.after.amount).toBe(amount);
      }
    }
  });

  it('/rest/v1 and /api/v1 name the change in headers: Tally-Changes, Tally-Activity-Id, Tally-Request-Id', async () => {
    const created = await rest('post', 'personal_transactions').send(expense('Header create')).expect(201);
    expect(created.headers['tally-changes']).toBe('1');
    const id = created.body[0].id as string;
    const [log] = await db.admin<{ id: string; request_id: string }[]>`
      SELECT id, request_id FROM public.activity WHERE record_id = ${id}`;
    expect(created.headers['tally-activity-id']).toBe(log!.id);
    expect(created.headers['tally-request-id']).toBe(log!.request_id);

    const noop = await rest('patch', `personal_transactions?id=eq.${id}`).send({ amount: 10 }).expect(200);
    expect([noop.headers['tally-changes'], noop.headers['tally-activity-id']]).toEqual(['0', undefined]);

    const wrapped = await request(t.app)
      .patch(`/api/v1/personal_transactions/${id}`)
      .set({ Authorization: `Bearer ${jwtA}` })
      .send({ amount: 11 })
      .expect(200);
    expect(wrapped.headers['tally-changes']).toBe('1');
    const [update] = await db.admin<{ id: string }[]>`
      SELECT id FROM public.activity WHERE record_id = ${id} AND action = 'update'`;
    expect(wrapped.headers['tally-activity-id']).toBe(update!.id);
  });
});

describe('the log keeps what changed, and no counter of the whole database', () => {
  it('an update holds the fields it changed, before and after; a delete the whole row', async () => {
    const created = await rest('post', 'personal_transactions').send(expense('Compact', 5)).expect(201);
    const id = created.body[0].id as string;
    await rest('patch', `personal_transactions?id=eq.${id}`).send({ amount: 6, name: 'Compact' }).expect(200);
    await rest('delete', `personal_transactions?id=eq.${id}`).expect(200);
    const log = await db.admin<{ action: string; before: object | null; after: object | null }[]>`
      SELECT action, before, after FROM public.activity WHERE record_id = ${id} ORDER BY at`;
    expect(log[1]).toEqual({ action: 'update', before: { amount: 5 }, after: { amount: 6 } });
    expect(log[2]!.before).toMatchObject({ id, name: 'Compact', amount: 6, workspace_id: a.id });
  });

  it('activity has no transaction_id: the changes of a request share a random request_id instead', async () => {
    const columns = await db.admin<{ column_name: string }[]>`
      SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'activity'`;
    expect(columns.map((c) => c.column_name)).not.toContain('transaction_id');
    const fund = await rest('post', 'funds').send({ name: 'Cascade', kind: 'Travel' }).expect(201);
    const fundId = fund.body[0].id as string;
    await rest('post', 'fund_transactions')
      .send({ fund_id: fundId, name: 'In', amount: 5, category_id: 'fund-income', method_id: 'cash' })
      .expect(201);
    const deleted = await rest('delete', `funds?id=eq.${fundId}`).expect(200);
    expect(deleted.headers['tally-changes']).toBe('1'); // the fund; its transaction rode along
    const rows = await db.admin<{ table_name: string; request_id: string; cascaded: boolean }[]>`
      SELECT table_name, request_id, cascaded FROM public.activity
       WHERE request_id = ${deleted.headers['tally-request-id'] as string} ORDER BY table_name`;
    expect(rows.map((r) => [r.table_name, r.cascaded])).toEqual([
      ['fund_transactions', true],
      ['funds', false],
    ]);
  });
});

describe('undo works as a stack', () => {
  it('create, update, undo the update, then undo the create: it works (it was refused, "Undo change U first")', async () => {
    const made = await ok(agent1('create_expense', expense('Stack')));
    const id = (made.expense as { id: string }).id;
    const update = await ok(agent1('update_expense', { id, amount: 99 }));
    const undo = await ok(agent1('undo_change', { activity_id: update.activity_id }));
    // Undoing the update again says it was undone already, and by which change.
    const again = await agent1('undo_change', { activity_id: update.activity_id });
    expect(again.isError).toBe(true);
    expect(again.content[0]!.text).toContain(
      `was undone already, by change ${(undo.changes as { id: string }[])[0]!.id}`,
    );
    await ok(agent1('undo_change', { activity_id: made.activity_id }));
    expect(await exists('personal_transactions', id)).toBe(false);
  });

  it('a refusal names the newest change in the way; following it converges', async () => {
    const made = await ok(agent1('create_expense', expense('Converge')));
    const id = (made.expense as { id: string }).id;
    await ok(agent1('update_expense', { id, amount: 1 }));
    await ok(agent2('update_expense', { id, amount: 2 }));
    const target = made.activity_id as string;
    const followed: string[] = [];
    for (let i = 0; i < 10; i++) {
      const r = await agent1('undo_change', { activity_id: target });
      if (!r.isError) break;
      const next = /Undo change ([0-9a-f-]{36}) first/.exec(r.content[0]!.text)?.[1];
      expect(next).toBeDefined();
      followed.push(next!);
      const undone = await agent1('undo_change', { activity_id: next! });
      expect(undone.isError).toBeUndefined();
    }
    expect(followed).toHaveLength(2); // the newest update first, then the other
    expect(await exists('personal_transactions', id)).toBe(false);
  });

  it("undoing a fund's creation does not take the transactions recorded since: it names the newest of them", async () => {
    const made = await ok(agent1('create_fund', { name: 'Parent', kind: 'Travel' }));
    const fundId = (made.fund as { id: string }).id;
    const tx = await ok(
      agent2('create_fund_transaction', {
        fund_id: fundId,
        name: 'Child',
        amount: 5,
        category_id: 'fund-income',
        method_id: 'cash',
      }),
    );
    const refused = await agent1('undo_change', { activity_id: made.activity_id });
    expect(refused.isError).toBe(true);
    expect(refused.content[0]!.text).toContain(`Undo change ${tx.activity_id as string} first`);
    expect(await exists('funds', fundId)).toBe(true);
    await ok(agent2('undo_change', { activity_id: tx.activity_id }));
    await ok(agent1('undo_change', { activity_id: made.activity_id }));
    expect(await exists('funds', fundId)).toBe(false);
  });
});

describe('undo_changes: several at once, all or nothing, with a preview', () => {
  it('"undo all of that" after a create and two updates (one a no-op): a dry run changes nothing, then the undo does it all', async () => {
    const since = (await db.admin<{ since: string }[]>`SELECT clock_timestamp()::text AS since`)[0]!.since;
    const made = await ok(agent2('create_expense', expense('All of that', 10)));
    const id = (made.expense as { id: string }).id;
    await ok(agent2('update_expense', { id, amount: 12 }));
    const noop = await ok(agent2('update_expense', { id, amount: 12 }));
    expect(noop.changed).toBe(false);

    const preview = await ok(agent2('undo_changes', { since, dry_run: true }));
    expect(preview.count).toBe(2);
    expect((preview.undone as { action: string; activity_id: null }[]).map((u) => [u.action, u.activity_id])).toEqual([
      ['update', null],
      ['delete', null],
    ]);
    expect(await exists('personal_transactions', id)).toBe(true);

    const done = await ok(agent2('undo_changes', { since }));
    expect(done.count).toBe(2);
    expect(await exists('personal_transactions', id)).toBe(false);
    // Nothing of this token stands since then: a second time there is nothing to undo.
    expect((await ok(agent2('undo_changes', { since }))).count).toBe(0);
  });

  it('all or nothing: when one change is in the way of another token, nothing is undone', async () => {
    const mine = await ok(agent1('create_expense', expense('Mine')));
    const other = await ok(agent1('create_expense', expense('Other')));
    const otherId = (other.expense as { id: string }).id;
    await ok(agent2('update_expense', { id: otherId, amount: 77 }));
    const refused = await agent1('undo_changes', { activity_ids: [mine.activity_id, other.activity_id] });
    expect(refused.isError).toBe(true);
    expect(refused.content[0]!.text).toContain('changed again since');
    expect(await exists('personal_transactions', (mine.expense as { id: string }).id)).toBe(true);
    expect(await exists('personal_transactions', otherId)).toBe(true);
  });

  it('/rest/v1: rpc/undo_changes by request_id puts back everything one request changed', async () => {
    const created = await rest('post', 'personal_transactions')
      .send([expense('Bulk 1'), expense('Bulk 2'), expense('Bulk 3')])
      .expect(201);
    expect(created.headers['tally-changes']).toBe('3');
    expect(created.headers['tally-activity-id']!.split(', ')).toHaveLength(3);
    const undone = await rest('post', 'rpc/undo_changes')
      .send({ request_id: created.headers['tally-request-id'] })
      .expect(200);
    expect(undone.body).toHaveLength(3);
    for (const row of created.body as { id: string }[])
      expect(await exists('personal_transactions', row.id)).toBe(false);
  });
});
