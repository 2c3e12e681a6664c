import { jest } from '@jest/globals';
import fc from 'fast-check';
import postgres, { type Sql, type TransactionSql } from 'postgres';
import { randomUUID } from 'node:crypto';
import { claimsStatement } from '../gateway/engine/execute.js';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import { tokenFor, type WorkspaceFixture } from './harness/fixtures.js';
import { restEnv } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';
import { toolCaller, type ToolResult } from './harness/mcp-tools.js';

// The undo stack as a property: two agents (two write tokens of one workspace) make random
// sequences of creates, updates (some changing nothing), deletes and undos, some of them at
// the same moment. Whatever they did, undoing everything they did, newest first, gives back
// exactly the rows of before; and no undo offered to an agent (the change a write of its own
// named, or the change a refusal told it to undo first) ever removes a record it did not create.
//
// Most sequences drive the SQL functions directly, as the gateway would (one transaction per
// request, the caller's role and claims, the report of the changes read from the request's own
// transaction); a few go through MCP. TALLY_UNDO_PROPERTY_RUNS and TALLY_UNDO_PROPERTY_MCP_RUNS
// set how many (the suite's defaults keep the file within about a minute on a loaded machine);
// TALLY_UNDO_PROPERTY_SEED repeats a run fast-check reported.

const RUNS = Number(process.env.TALLY_UNDO_PROPERTY_RUNS ?? 300);
const MCP_RUNS = Number(process.env.TALLY_UNDO_PROPERTY_MCP_RUNS ?? 6);
/** fast-check's seed of a run to repeat (it prints the seed of a failing one). */
const SEED = process.env.TALLY_UNDO_PROPERTY_SEED ? Number(process.env.TALLY_UNDO_PROPERTY_SEED) : undefined;
jest.setTimeout(Math.max(120_000, RUNS * 400 + MCP_RUNS * 10_000));

let db: TestDatabase, t: TestApp, a: WorkspaceFixture;
const agents: { id: string; token: string; sql: Sql }[] = [];

beforeAll(async () => {
  // A log as large as the runs make it: thousands of sequences of one workspace are not a budget's test.
  const env = restEnv({ TALLY_DB_POOL_ACQUISITION_TIMEOUT_MS: '60000', TALLY_ACTIVITY_BUDGET_BYTES: String(2 ** 40) });
  ({ db, t, a } = await setUpFinance(env, ['Prop A', 'Prop B']));
  for (let i = 0; i < 2; i++) {
    const token = await tokenFor(db.admin, a.id, 'write');
    agents.push({ ...token, sql: postgres(db.url, { max: 1, onnotice: () => {} }) });
  }
  for (const name of ['Seed one', 'Seed two', 'Seed three'])
    await db.admin`INSERT INTO public.personal_transactions (workspace_id, name, amount, category_id, method_id)
                   VALUES (${a.id}, ${name}, 5, 'other', 'cash')`;
});
afterAll(async () => {
  await Promise.all(agents.map((x) => x.sql.end()));
  await tearDown(db, t);
});

type Kind = 'create' | 'update' | 'noop' | 'delete' | 'undo';
interface Op {
  agent: 0 | 1;
  kind: Kind;
  /** Which record (or which offered change) it picks, modulo what there is. */
  pick: number;
  amount: number;
}
const op = (agent: 0 | 1) =>
  fc.record({
    agent: fc.constant(agent),
    kind: fc.constantFrom<Kind>('create', 'update', 'noop', 'delete', 'undo', 'undo'),
    pick: fc.nat(50),
    amount: fc.integer({ min: 1, max: 4 }),
  });
/** A step: one agent alone, or both at the same moment. */
const step = fc.oneof(
  fc.constantFrom<0 | 1>(0, 1).chain((agent) => op(agent).map((o) => [o])),
  fc.tuple(op(0), op(1)),
);
const sequence = fc.array(step, { minLength: 1, maxLength: 10 });

/** What one sequence knows: the records there are to pick from, who created which, what each agent was offered. */
interface Run {
  records: string[];
  createdBy: [Set<string>, Set<string>];
  offered: [string[], string[]];
  /** Every write's reported change, to check it is the write's own: [change, agent token, record, action]. */
  named: [string, string, string, string][];
}

/** An agent's side: writes and undos as the gateway would make them, and what they answer. */
interface Side {
  write(
    agent: 0 | 1,
    kind: 'create' | 'update' | 'noop' | 'delete',
    id: string | undefined,
    amount: number,
  ): Promise<{
    id?: string;
    change?: string;
  }>;
  /** The undo's removals (records it deleted), or the change a refusal says to undo first. */
  undo(agent: 0 | 1, change: string): Promise<{ removed: string[] } | { first: string | undefined }>;
}

/**
 * One request of an agent through SQL: the role and claims the gateway sets, a fresh request id,
 * the report at the end. As the gateway sends them, in one round trip: the setup, the request's
 * statement and the report are queued at once (each then() called in that order), so the
 * connection runs them one after the other without waiting for each answer; a refusal of the
 * statement fails the report after it, and the transaction rolls back.
 */
async function request<T>(
  agent: 0 | 1,
  fn: (tx: TransactionSql) => Promise<T>,
): Promise<{ result: T; changes: string[] }> {
  const { id, sql } = agents[agent]!;
  const claims = { role: 'api_write', workspace_id: a.id, scope: 'write', sub: id, request_id: randomUUID() };
  const setup = `${claimsStatement(JSON.stringify(claims)).text};
    SELECT set_config('role', 'api_write', true), set_config('response.headers', '', true)`;
  return sql.begin(async (tx) => {
    const ready = tx
      .unsafe(setup)
      .simple()
      .then(() => undefined);
    const result = fn(tx);
    const report = tx<{ headers: string }[]>`
      SELECT current_setting('response.headers', true) AS headers FROM tally.report_changes()`.then((rows) => rows);
    const [, made, [row]] = await Promise.all([ready, result, report]);
    const headers = Object.assign({}, ...(JSON.parse(row!.headers) as Record<string, string>[]));
    const ids = headers['Tally-Activity-Id'] as string | undefined;
    return { result: made, changes: ids ? ids.split(', ') : [] };
  }) as Promise<{ result: T; changes: string[] }>;
}

const FIRST = /Undo change ([0-9a-f-]{36}) first/;

const sqlSide: Side = {
  async write(agent, kind, id, amount) {
    const { result, changes } = await request(agent, async (tx) => {
      if (kind === 'create')
        return (
          await tx<{ id: string }[]>`
            INSERT INTO public.personal_transactions (name, amount, category_id, method_id)
            VALUES ('Prop', ${amount}, 'other', 'cash') RETURNING id`
        )[0]!.id;
      if (kind === 'update') await tx`UPDATE public.personal_transactions SET amount = ${amount} WHERE id = ${id!}`;
      if (kind === 'noop') await tx`UPDATE public.personal_transactions SET amount = amount WHERE id = ${id!}`;
      if (kind === 'delete') await tx`DELETE FROM public.personal_transactions WHERE id = ${id!}`;
      return id;
    });
    return { id: result, change: changes[0] };
  },
  async undo(agent, change) {
    try {
      const { result } = await request(
        agent,
        (tx) =>
          tx<{ action: string; record_id: string }[]>`SELECT action, record_id FROM public.undo_change(${change})`,
      );
      return { removed: result.filter((r) => r.action === 'delete').map((r) => r.record_id) };
    } catch (err) {
      const e = err as { code?: string; hint?: string };
      if (e.code !== 'PT409' && e.code !== '40P01') throw err;
      return { first: FIRST.exec(e.hint ?? '')?.[1] };
    }
  },
};

function mcpSide(): Side {
  const callers = agents.map((x) =>
    toolCaller(
      () => t.app,
      () => x.token,
    ),
  );
  const call = async (agent: 0 | 1, name: string, args: Record<string, unknown>): Promise<ToolResult> =>
    callers[agent]!(name, args);
  return {
    async write(agent, kind, id, amount) {
      const args =
        kind === 'create'
          ? { name: 'Prop', amount, category_id: 'other', method_id: 'cash' }
          : kind === 'delete'
            ? { id }
            : { id, amount: kind === 'noop' ? undefined : amount, name: kind === 'noop' ? 'Prop' : undefined };
      const tool = {
        create: 'create_expense',
        update: 'update_expense',
        noop: 'update_expense',
        delete: 'delete_expense',
      };
      const r = await call(agent, tool[kind], args);
      if (r.isError) return { id }; // an unknown id: a record deleted meanwhile
      const record = (r.structuredContent.expense ?? r.structuredContent.deleted) as { id: string };
      return { id: record.id, change: r.structuredContent.activity_id as string | undefined };
    },
    async undo(agent, change) {
      const r = await call(agent, 'undo_change', { activity_id: change });
      if (r.isError) return { first: FIRST.exec(r.content[0]!.text)?.[1] };
      const made = r.structuredContent.changes as { action: string; record_id: string }[];
      return { removed: made.filter((c) => c.action === 'delete').map((c) => c.record_id) };
    },
  };
}

/** One operation; checks that an undo offered to the agent removes only records it created. */
async function perform(side: Side, run: Run, o: Op): Promise<void> {
  const agent = o.agent;
  if (o.kind === 'undo') {
    const offered = run.offered[agent];
    if (offered.length === 0) return;
    let change = offered[o.pick % offered.length]!;
    // An offered change, then the one its refusal names, and so on: each is offered.
    for (let i = 0; i < 3; i++) {
      const undone = await side.undo(agent, change);
      if ('removed' in undone) {
        for (const id of undone.removed)
          expect({ removed: id, by: agent, created: run.createdBy[agent].has(id) }).toEqual({
            removed: id,
            by: agent,
            created: true,
          });
        run.records = run.records.filter((id) => !undone.removed.includes(id));
        return;
      }
      if (undone.first === undefined) return;
      change = undone.first;
    }
    return;
  }
  const target = o.kind === 'create' ? undefined : run.records[o.pick % Math.max(run.records.length, 1)];
  if (o.kind !== 'create' && target === undefined) return;
  const { id, change } = await side.write(agent, o.kind, target, o.amount);
  if (o.kind === 'create' && id) {
    run.records.push(id);
    run.createdBy[agent].add(id);
  }
  if (change && id) {
    run.offered[agent].push(change);
    run.named.push([change, agents[agent]!.id, id, o.kind === 'create' ? 'insert' : o.kind]);
  }
}

/** Where a sequence starts, in one statement: the workspace's expenses (whole, and their ids) and the moment. */
async function start(): Promise<{ before: string[]; since: string; records: string[] }> {
  const [row] = await db.admin<{ since: string; rows: string[]; ids: string[] }[]>`
    SELECT clock_timestamp()::text AS since,
           coalesce(array_agg(to_jsonb(p)::text ORDER BY p.id), '{}') AS rows,
           coalesce(array_agg(p.id::text ORDER BY p.id), '{}') AS ids
      FROM public.personal_transactions p WHERE p.workspace_id = ${a.id}`;
  return { before: row!.rows, since: row!.since, records: row!.ids };
}

/** The workspace's expenses, whole. */
const snapshot = async () =>
  (
    await db.admin<{ row: string }[]>`
      SELECT to_jsonb(p)::text AS row FROM public.personal_transactions p WHERE workspace_id = ${a.id} ORDER BY id`
  ).map((r) => r.row);

/**
 * Undoes every change made since `since`, newest first: the changes that stand (one undone, and
 * its undo, cancel out), all at once or one at a time.
 */
async function undoEverything(since: string, oneByOne: boolean): Promise<void> {
  const log = await db.admin<{ id: string; undo_of: string | null }[]>`
    SELECT id, undo_of FROM public.activity WHERE workspace_id = ${a.id} AND at >= ${since}::timestamptz AND NOT cascaded
     ORDER BY at DESC, id DESC`;
  const gone = new Set<string>();
  const standing: string[] = [];
  for (const c of log) {
    if (gone.has(c.id)) continue;
    if (c.undo_of) gone.add(c.undo_of);
    else standing.push(c.id);
  }
  if (standing.length === 0) return;
  if (oneByOne) {
    for (const id of standing) await request(0, (tx) => tx`SELECT * FROM public.undo_change(${id})`);
  } else {
    await request(0, (tx) => tx`SELECT * FROM public.undo_changes(activity_ids => ${standing}::uuid[])`);
  }
}

async function check(side: Side, steps: Op[][], oneByOne: boolean): Promise<void> {
  const { before, since, records } = await start();
  const run: Run = { records, createdBy: [new Set(), new Set()], offered: [[], []], named: [] };
  for (const s of steps) await Promise.all(s.map((o) => perform(side, run, o)));

  // Each write named its own change: by its token, of its record, of its kind.
  if (run.named.length) {
    const rows = await db.admin<{ id: string; token_id: string; record_id: string; action: string }[]>`
      SELECT id, token_id, record_id, action FROM public.activity WHERE id = ANY (${run.named.map((n) => n[0])}::uuid[])`;
    const byId = new Map(rows.map((r) => [r.id, [r.id, r.token_id, r.record_id, r.action]]));
    for (const n of run.named)
      expect(byId.get(n[0])).toEqual(n.map((v, i) => (i === 3 && v === 'noop' ? 'update' : v)));
  }

  await undoEverything(since, oneByOne);
  expect(await snapshot()).toEqual(before);
}

describe('undo as a stack, as a property of random sequences of two agents', () => {
  it(`undoing everything newest-first gives back the rows of before; no offered undo removes another's record (${RUNS} sequences, SQL)`, async () => {
    await fc.assert(
      fc.asyncProperty(sequence, fc.boolean(), (steps, oneByOne) => check(sqlSide, steps, oneByOne)),
      { numRuns: RUNS, seed: SEED },
    );
  });

  it(`the same through MCP (${MCP_RUNS} sequences)`, async () => {
    const side = mcpSide();
    await fc.assert(
      fc.asyncProperty(sequence, fc.boolean(), (steps, oneByOne) => check(side, steps, oneByOne)),
      { numRuns: MCP_RUNS },
    );
  });
});
