import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createServer, type Server } from 'node:http';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { startTestApp, type TestApp } from './harness/app.js';
import { tokenFor, workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { first, present } from './harness/present.js';
import { waitFor } from './harness/wait.js';
import { callEveryTool, READ_TOOLS } from './harness/mcp-tools.js';
import { tools as defined, toolsets } from '../mcp/tools.js';

// The MCP server through the SDK's own Client over Streamable HTTP, against the real server.

const CORE_TOOLS = [
  'create_contact',
  'create_expense',
  'create_fund',
  'create_fund_transaction',
  'delete_expense',
  'delete_fund_transaction',
  'get_fund',
  'list_contacts',
  'list_expenses',
  'list_fund_transactions',
  'list_funds',
  'update_contact',
  'update_expense',
  'update_fund',
];
// Every tool of the registry (mcp/tools.ts) is listed: the core ones above, and those it adds beyond them.
const TOOLS = defined.map((t) => t.name).sort();

let db: TestDatabase;
let app: TestApp;
let server: Server;
let base: string;
let a: WorkspaceFixture;
let b: WorkspaceFixture;
let writeA: string;
let readA: string;
let writeB: string;
const clients: Client[] = [];

async function connect(token: string | undefined, path = '/mcp'): Promise<Client> {
  const url = new URL(base + path);
  if (token) url.searchParams.set('token', token);
  const client = new Client({ name: 'tally-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(url));
  clients.push(client);
  return client;
}

async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

const text = (r: CallToolResult): string => (r.content[0] as { text: string }).text;

beforeAll(async () => {
  db = await createTestDatabase();
  a = await workspaceWithData(db.admin, 'Mcp A');
  b = await workspaceWithData(db.admin, 'Mcp B');
  writeA = (await tokenFor(db.admin, a.id, 'write')).token;
  readA = (await tokenFor(db.admin, a.id, 'read')).token;
  writeB = (await tokenFor(db.admin, b.id, 'write')).token;
  app = startTestApp(db.url, {
    TALLY_RATE_LIMIT_PER_MINUTE: '100000', // this suite sends more than 60 a minute per token
    // Thirty concurrent calls of one agent queue behind its workspace's share of the pool; on a
    // loaded machine (or Citus) the last could wait past the default 3 s deadline and be a 429.
    TALLY_DB_POOL_ACQUISITION_TIMEOUT_MS: '60000',
  });
  server = createServer(app.app).listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await new Promise((r) => server.close(r));
  await app.close();
  await db.drop();
});

/** The tools whose result is neither a write's nor a list's. */
const OWN_SHAPE = ['get_fund', 'get_workspace', 'list_funds', 'spending_summary', 'undo_change', 'undo_changes'];

describe('tools/list', () => {
  it('lists the 14 core tools and those beyond them, with schemas an agent can act on', async () => {
    const client = await connect(writeA);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(TOOLS);
    expect(TOOLS).toEqual(expect.arrayContaining(CORE_TOOLS));
    for (const tool of tools) {
      expect(tool.description).toBeTruthy();
      // A write's result and a list's are said once by the instructions; a result of its own shape has an output schema.
      expect([tool.name, tool.outputSchema !== undefined]).toEqual([tool.name, OWN_SHAPE.includes(tool.name)]);
      expect(tool.inputSchema.type).toBe('object');
      // MCP's defaults (readOnlyHint false, destructiveHint true) are left out.
      expect(tool.annotations?.readOnlyHint === true).toBe(READ_TOOLS.includes(tool.name));
      if (tool.name.startsWith('delete_')) expect(tool.annotations?.destructiveHint ?? true).toBe(true);
    }
    for (const member of ['activity_id', 'changed', 'replayed', 'has_more', 'next_offset', 'total'])
      expect(client.getInstructions()).toContain(member);
  });

  it('publishes the live category and method enums of the right domain', async () => {
    const client = await connect(writeA);
    const { tools } = await client.listTools();
    const props = (name: string) =>
      tools.find((t) => t.name === name)!.inputSchema.properties as Record<
        string,
        { enum?: string[]; maximum?: number; minimum?: number }
      >;
    const expenseCats = (await db.admin`SELECT id FROM public.categories WHERE for_expenses ORDER BY id`).map(
      (r) => r.id,
    );
    const fundCats = (await db.admin`SELECT id FROM public.categories WHERE for_funds ORDER BY id`).map((r) => r.id);
    expect(present(props('create_expense').category_id).enum).toEqual(expenseCats);
    expect(present(props('create_fund_transaction').category_id).enum).toEqual(fundCats);
    expect(present(props('list_expenses').method_id).enum).toEqual([
      'bank-transfer',
      'cash',
      'credit-card',
      'installment',
      'mobile-wallet',
    ]);
    expect(props('list_expenses').limit).toMatchObject({ minimum: 1, maximum: 1000 });

    // A new row reaches the catalog once the server has seen the change (polled: a few seconds).
    await db.admin`INSERT INTO public.categories (id, name, for_expenses) VALUES ('garden', 'Garden', true)`;
    const agent = await connect(writeA);
    const categories = async () => {
      const again = await agent.listTools();
      return present(
        (
          again.tools.find((t) => t.name === 'create_expense')!.inputSchema.properties as Record<
            string,
            { enum: string[] }
          >
        ).category_id,
      ).enum;
    };
    await waitFor(async () => (await categories()).includes('garden'), 'the new category in tools/list');
  });
});

describe('expenses', () => {
  it('create_expense records an expense in the token’s workspace', async () => {
    const client = await connect(writeA);
    const r = await call(client, 'create_expense', {
      name: 'Museum tickets',
      amount: 31.5,
      category_id: 'entertainment',
      method_id: 'credit-card',
      occurred_at: '2026-03-14T10:00:00Z',
      note: 'Two adults',
    });
    expect(r.isError).toBeFalsy();
    const created = (r.structuredContent as { expense: { id: string } }).expense;
    expect(created).toMatchObject({
      name: 'Museum tickets',
      amount: 31.5,
      category_id: 'entertainment',
      note: 'Two adults',
    });
    const [row] =
      await db.admin`SELECT workspace_id, amount::float AS amount FROM public.personal_transactions WHERE id = ${created.id}`;
    expect(row).toEqual({ workspace_id: a.id, amount: 31.5 });
  });

  it('list_expenses filters by category, whole-day date range and search, newest first, with a total', async () => {
    const client = await connect(writeA);
    for (const [name, day, note] of [
      ['Bakery', '2026-04-01T08:00:00Z', 'croissants'],
      ['Bakery again', '2026-04-02T23:59:00Z', null],
      ['Groceries', '2026-04-03T00:00:00Z', 'bread, 50% off'],
    ] as const) {
      await call(client, 'create_expense', {
        name,
        amount: 4,
        category_id: 'food-drinks',
        method_id: 'cash',
        occurred_at: day,
        ...(note ? { note } : {}),
      });
    }
    const r = await call(client, 'list_expenses', {
      category_id: 'food-drinks',
      start_date: '2026-04-01',
      end_date: '2026-04-02',
    });
    const s = r.structuredContent as { expenses: { name: string }[]; total: number; limit: number; offset: number };
    expect(s.expenses.map((e) => e.name)).toEqual(['Bakery again', 'Bakery']);
    expect(s).toMatchObject({ total: 2, limit: 50, offset: 0 });

    const bySearch = await call(client, 'list_expenses', { search: 'CROISS' });
    expect((bySearch.structuredContent as { expenses: { name: string }[] }).expenses.map((e) => e.name)).toEqual([
      'Bakery',
    ]);
    const literal = await call(client, 'list_expenses', { search: '50%' });
    expect((literal.structuredContent as { expenses: { name: string }[] }).expenses.map((e) => e.name)).toEqual([
      'Groceries',
    ]);
    const comma = await call(client, 'list_expenses', { search: 'bread, 5' });
    expect((comma.structuredContent as { total: number }).total).toBe(1);

    const page = await call(client, 'list_expenses', { limit: 1, offset: 1 });
    const p = page.structuredContent as {
      expenses: unknown[];
      total: number | null;
      has_more: boolean;
      next_offset: number | null;
    };
    expect(p.expenses).toHaveLength(1);
    const { count } = first(
      await db.admin`SELECT count(*)::int AS count FROM public.personal_transactions WHERE workspace_id = ${a.id}`,
    );
    expect(count).toBeGreaterThan(2);
    expect(p).toMatchObject({ has_more: true, next_offset: 2, total: null }); // no count over the workspace while pages follow
    const last = await call(client, 'list_expenses', { limit: 50, offset: 1 });
    expect(last.structuredContent).toMatchObject({ has_more: false, next_offset: null, total: count });
  });

  it('answers the edges of paging and dates with pages, not errors: an offset past any table, the last day', async () => {
    const client = await connect(readA);
    const far = await call(client, 'list_expenses', { offset: 1e15 });
    expect([far.isError, far.structuredContent]).toEqual([
      undefined,
      expect.objectContaining({ expenses: [], has_more: false, next_offset: null, offset: 1e15 }),
    ]);
    const { count } = first(
      await db.admin`SELECT count(*)::int AS count FROM public.personal_transactions WHERE workspace_id = ${a.id}`,
    );
    const all = await call(client, 'list_expenses', { start_date: '0001-01-01', end_date: '9999-12-31' });
    expect([all.isError, (all.structuredContent as { total: number }).total]).toEqual([undefined, count]);
  });

  it('update_expense changes only the given fields; delete_expense returns what it deleted', async () => {
    const client = await connect(writeA);
    const r = await call(client, 'update_expense', { id: a.expenseId, amount: 13.75 });
    expect((r.structuredContent as { expense: unknown }).expense).toMatchObject({
      id: a.expenseId,
      amount: 13.75,
      name: 'Mcp A lunch',
      category_id: 'food-drinks',
    });
    const [row] =
      await db.admin`SELECT amount::float AS amount, name FROM public.personal_transactions WHERE id = ${a.expenseId}`;
    expect(row).toEqual({ amount: 13.75, name: 'Mcp A lunch' });

    const del = await call(client, 'delete_expense', { id: a.expenseId });
    expect((del.structuredContent as { deleted: { id: string } }).deleted.id).toBe(a.expenseId);
    expect(await db.admin`SELECT 1 FROM public.personal_transactions WHERE id = ${a.expenseId}`).toHaveLength(0);

    const again = await call(client, 'delete_expense', { id: a.expenseId });
    expect(again.isError).toBe(true);
    expect(text(again)).toBe(`No expense with id ${a.expenseId} in this workspace (list_expenses shows the ids).`);
  });
});

describe('funds and their transactions', () => {
  it('list_funds and get_fund report balance, income, expenses and progress from the ledger', async () => {
    const client = await connect(writeA);
    const tx = await call(client, 'create_fund_transaction', {
      fund_id: a.fundId,
      name: 'Hotel deposit',
      amount: -30,
      category_id: 'hotel',
      method_id: 'credit-card',
    });
    expect(tx.isError).toBeFalsy();
    const list = await call(client, 'list_funds');
    const f = (list.structuredContent as { funds: { id: string; totals: unknown }[] }).funds.find(
      (x) => x.id === a.fundId,
    )!;
    expect(f.totals).toEqual({ balance: 70, income: 100, expenses: 30, progress: 0.07 });

    const got = await call(client, 'get_fund', { fund_id: a.fundId });
    const s = got.structuredContent as {
      fund: { totals: unknown };
      participants: { id: string }[];
      ledger: { name: string }[];
    };
    expect(s.fund.totals).toEqual({ balance: 70, income: 100, expenses: 30, progress: 0.07 });
    expect(s.participants.map((p) => p.id)).toEqual([a.contactId]);
    expect(s.ledger.map((t) => t.name)).toEqual(['Hotel deposit', 'Contribution']);
  });

  it('create_fund, update_fund (any status), list and delete fund transactions', async () => {
    const client = await connect(writeA);
    const created = await call(client, 'create_fund', { name: 'Ski week', kind: 'Travel', target_amount: 1200 });
    const fund = (created.structuredContent as { fund: { id: string; status: string; currency: string } }).fund;
    expect(fund).toMatchObject({ status: 'Upcoming', currency: 'EUR' });
    const done = await call(client, 'update_fund', { fund_id: fund.id, status: 'Completed' });
    expect((done.structuredContent as { fund: { status: string } }).fund.status).toBe('Completed');
    const back = await call(client, 'update_fund', { fund_id: fund.id, status: 'Upcoming' });
    expect((back.structuredContent as { fund: { status: string } }).fund.status).toBe('Upcoming');

    const t = await call(client, 'create_fund_transaction', {
      fund_id: fund.id,
      name: 'Lift passes',
      amount: -400,
      category_id: 'other',
      method_id: 'cash',
    });
    const tid = (t.structuredContent as { transaction: { id: string } }).transaction.id;
    const listed = await call(client, 'list_fund_transactions', { fund_id: fund.id });
    expect(listed.structuredContent).toMatchObject({ total: 1, transactions: [{ id: tid, amount: -400 }] });
    const del = await call(client, 'delete_fund_transaction', { id: tid });
    expect((del.structuredContent as { deleted: { id: string } }).deleted.id).toBe(tid);
    expect(await db.admin`SELECT 1 FROM public.fund_transactions WHERE id = ${tid}`).toHaveLength(0);
  });

  it('get_fund of an unknown id is a clear not-found error', async () => {
    const r = await call(await connect(writeA), 'get_fund', { fund_id: '00000000-0000-4000-8000-000000000000' });
    expect(r.isError).toBe(true);
    expect(text(r)).toContain('No fund with id 00000000-0000-4000-8000-000000000000');
  });
});

describe('fund dates and schedules, removing participants, deleting funds and contacts', () => {
  const count = async (table: string, column: string, value: string) =>
    (await db.admin.unsafe(`SELECT count(*)::int AS n FROM public.${table} WHERE ${column} = $1`, [value]))[0]!
      .n as number;

  it('create_fund and update_fund set the dates and contribution schedule get_fund returns', async () => {
    const client = await connect(writeA);
    const schedule = { contribution_amount: 25, contribution_frequency: 'monthly', contribution_due_day: 5 };
    const created = await call(client, 'create_fund', {
      name: 'Scheduled',
      start_date: '2026-01-01',
      end_date: '2026-06-30',
      ...schedule,
    });
    const id = (created.structuredContent as { fund: { id: string } }).fund.id;
    const read = async () =>
      ((await call(client, 'get_fund', { fund_id: id })).structuredContent as { fund: object }).fund;
    expect(await read()).toMatchObject({ start_date: '2026-01-01', end_date: '2026-06-30', ...schedule });
    // A schedule is given whole: one of its three alone is the constraint's sentence.
    const partial = await call(client, 'update_fund', { fund_id: id, contribution_amount: null });
    expect(partial.isError).toBe(true);
    expect(text(partial)).toContain('must be given together');
    const cleared = await call(client, 'update_fund', {
      fund_id: id,
      end_date: '2026-12-31',
      contribution_amount: null,
      contribution_frequency: null,
      contribution_due_day: null,
    });
    expect(cleared.isError).toBeFalsy();
    expect(await read()).toMatchObject({
      end_date: '2026-12-31',
      contribution_amount: null,
      contribution_frequency: null,
      contribution_due_day: null,
    });
  });

  it('remove_fund_participant, delete_contact and delete_fund delete what they say, in the workspace only', async () => {
    const client = await connect(writeA);
    const fund = (
      (await call(client, 'create_fund', { name: 'To delete' })).structuredContent as { fund: { id: string } }
    ).fund.id;
    const contact = (
      (await call(client, 'create_contact', { name: 'Leaving' })).structuredContent as { contact: { id: string } }
    ).contact.id;
    await call(client, 'add_fund_participant', { fund_id: fund, contact_id: contact });
    await call(client, 'create_fund_transaction', {
      fund_id: fund,
      name: 'Gone with it',
      amount: 5,
      category_id: 'fund-income',
      method_id: 'cash',
    });

    const removed = await call(client, 'remove_fund_participant', { fund_id: fund, contact_id: contact });
    expect(removed.structuredContent).toMatchObject({ removed: { fund_id: fund, contact_id: contact } });
    expect(await count('fund_participants', 'contact_id', contact)).toBe(0);
    const again = await call(client, 'remove_fund_participant', { fund_id: fund, contact_id: contact });
    expect(again.isError).toBe(true);
    expect(text(again)).toContain('takes no part');

    await call(client, 'add_fund_participant', { fund_id: fund, contact_id: contact });
    const gone = await call(client, 'delete_contact', { id: contact });
    expect(gone.structuredContent).toMatchObject({ deleted: { id: contact, name: 'Leaving' } });
    expect(await count('contacts', 'id', contact)).toBe(0);
    expect(await count('fund_participants', 'contact_id', contact)).toBe(0);

    const deleted = await call(client, 'delete_fund', { fund_id: fund });
    expect(deleted.structuredContent).toMatchObject({ deleted: { id: fund, name: 'To delete' } });
    expect(await count('funds', 'id', fund)).toBe(0);
    expect(await count('fund_transactions', 'fund_id', fund)).toBe(0);
    expect(text(await call(client, 'delete_fund', { fund_id: fund }))).toBe(
      `No fund with id ${fund} in this workspace (list_funds shows the ids).`,
    );
  });

  it("a token of A cannot remove, delete or change B's funds, participants or contacts", async () => {
    const client = await connect(writeA);
    const attempts: [string, Record<string, unknown>][] = [
      ['remove_fund_participant', { fund_id: b.fundId, contact_id: b.contactId }],
      ['delete_contact', { id: b.contactId }],
      ['delete_fund', { fund_id: b.fundId }],
      ['update_fund', { fund_id: b.fundId, start_date: '2026-01-01' }],
    ];
    for (const [name, args] of attempts) {
      const r = await call(client, name, args);
      expect([name, r.isError]).toEqual([name, true]);
    }
    expect(await count('funds', 'id', b.fundId)).toBe(1);
    expect(await count('contacts', 'id', b.contactId)).toBe(1);
    expect(await count('fund_participants', 'contact_id', b.contactId)).toBe(1);
    expect((await db.admin`SELECT start_date FROM public.funds WHERE id = ${b.fundId}`)[0]!.start_date).toBeNull();
  });
});

describe('contacts', () => {
  it('create_contact, list_contacts search on name, nickname or phone, update_contact', async () => {
    const client = await connect(writeA);
    const c = await call(client, 'create_contact', {
      name: 'Zoë Quinn',
      nickname: 'Zed',
      phone: '+44 20 7946 0958',
      email: 'zoe@example.com',
      gender: 'female',
      nationality: 'British',
    });
    const id = (c.structuredContent as { contact: { id: string } }).contact.id;
    for (const search of ['zoë', 'zed', '7946']) {
      const r = await call(client, 'list_contacts', { search });
      expect((r.structuredContent as { contacts: { id: string }[] }).contacts.map((x) => x.id)).toEqual([id]);
    }
    const u = await call(client, 'update_contact', { id, nickname: null, email: 'zq@example.com' });
    expect((u.structuredContent as { contact: unknown }).contact).toMatchObject({
      name: 'Zoë Quinn',
      nickname: null,
      email: 'zq@example.com',
      phone: '+44 20 7946 0958',
    });
  });
});

describe('errors an agent can act on', () => {
  it('an invalid enum lists the allowed values, and nothing is written', async () => {
    const client = await connect(writeA);
    const r = await call(client, 'create_expense', {
      name: 'Boat',
      amount: 10,
      category_id: 'yachts',
      method_id: 'cash',
    });
    expect(r.isError).toBe(true);
    expect(text(r)).toContain('category_id must be one of: beauty-care, clothing,');
    expect(await db.admin`SELECT 1 FROM public.personal_transactions WHERE name = 'Boat'`).toHaveLength(0);
  });

  it('an unknown parameter and an out-of-bounds limit are refused', async () => {
    const client = await connect(writeA);
    expect((await call(client, 'list_expenses', { limit: 1001 })).isError).toBe(true);
    const unknown = await call(client, 'list_contacts', { serach: 'x' });
    expect(unknown.isError).toBe(true);
    expect(text(unknown)).toContain('serach');
  });

  it('a read token may read, and its writes say the token is read-only', async () => {
    const client = await connect(readA);
    // Every tool annotated read-only runs under a read token and changes nothing: a write tool
    // annotated read-only by mistake would be offered to read tokens and fail here.
    const changes = async () => (await db.admin`SELECT count(*)::int AS n FROM public.activity`)[0]!.n as number;
    const before = await changes();
    const ran = await callEveryTool(
      a,
      async (name, args) => {
        const r = await call(client, name, args);
        expect({ name, isError: r.isError ?? false }).toEqual({ name, isError: false });
        return r.structuredContent as Record<string, unknown>;
      },
      (name) => READ_TOOLS.includes(name),
    );
    expect(ran.sort()).toEqual(READ_TOOLS);
    expect(await changes()).toBe(before);
    const r = await call(client, 'create_contact', { name: 'Nope' });
    expect(r.isError).toBe(true);
    expect(text(r)).toMatch(/read-only/);
    expect(await db.admin`SELECT 1 FROM public.contacts WHERE name = 'Nope'`).toHaveLength(0);
  });

  it('no error text carries SQL or a stack trace', async () => {
    const client = await connect(writeA);
    const r = await call(client, 'create_fund_transaction', {
      fund_id: '00000000-0000-4000-8000-000000000000',
      name: 'Ghost',
      amount: 5,
      category_id: 'fund-income',
      method_id: 'cash',
    });
    expect(r.isError).toBe(true);
    expect(text(r)).not.toMatch(/SELECT|INSERT|\n\s+at /);
  });
});

describe('authentication', () => {
  it('refuses a missing or unknown token before any tool runs', async () => {
    await expect(connect(undefined)).rejects.toThrow(/401|No workspace token/);
    await expect(connect('tally_ws_' + 'x'.repeat(40))).rejects.toThrow(/401|Invalid workspace token/);
    const res = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
    });
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ code: 'PGRST302' });
  });

  it('accepts the token as a Bearer header too', async () => {
    const client = new Client({ name: 'bearer', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${writeA}` } },
      }),
    );
    clients.push(client);
    expect((await client.listTools()).tools).toHaveLength(TOOLS.length);
  });

  it('revocation and the API switch act on the very next call', async () => {
    const { id, token } = await tokenFor(db.admin, a.id, 'write');
    const client = await connect(token);
    expect((await call(client, 'list_contacts')).isError).toBeFalsy();
    await db.admin`UPDATE public.workspaces SET api_enabled = false WHERE id = ${a.id}`;
    await expect(call(client, 'list_contacts')).rejects.toThrow(/403|switched off/);
    await db.admin`UPDATE public.workspaces SET api_enabled = true WHERE id = ${a.id}`;
    expect((await call(client, 'list_contacts')).isError).toBeFalsy();
    await db.admin`SELECT tally.revoke_token(${id}, NULL, 'test')`;
    await expect(call(client, 'list_contacts')).rejects.toThrow(/401|revoked/);
  });

  it('serves many concurrent tool calls of one agent (none is taken for a failed authentication)', async () => {
    const body = (id: number) =>
      JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'list_contacts', arguments: {} } });
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        fetch(`${base}/mcp?token=${readA}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
          body: body(i),
        }).then(async (res) => ({
          status: res.status,
          result: ((await res.json()) as { result: CallToolResult }).result,
        })),
      ),
    );
    expect(results.filter((r) => r.status !== 200 || r.result.isError).map((r) => r.status)).toEqual([]);
  });

  it('a rate-limited tool call is a tool error that says when to retry', async () => {
    const limited = startTestApp(db.url, { TALLY_RATE_LIMIT_PER_MINUTE: '4' });
    const srv = createServer(limited.app).listen(0, '127.0.0.1');
    await new Promise((r) => srv.once('listening', r));
    try {
      const { token } = await tokenFor(db.admin, a.id, 'read');
      const url = new URL(`http://127.0.0.1:${(srv.address() as { port: number }).port}/mcp?token=${token}`);
      const client = new Client({ name: 'limited', version: '1' });
      await client.connect(new StreamableHTTPClientTransport(url)); // initialize + initialized: 2 requests
      clients.push(client);
      await call(client, 'list_contacts');
      await call(client, 'list_contacts'); // the 4th request
      const r = await call(client, 'list_contacts');
      expect(r.isError).toBe(true);
      expect(text(r)).toMatch(/^Rate limit exceeded: at most 4 requests per minute\. Retry after \d+ seconds\.$/);
    } finally {
      await new Promise((r) => srv.close(r));
      await limited.close();
    }
  });
});

describe('workspace isolation', () => {
  it('one Server answers every request: concurrent calls of A and B, all with JSON-RPC id 1, each get their own answer', async () => {
    type Answer = { result?: CallToolResult & { tools?: { name: string }[] }; error?: unknown };
    const post = async (token: string, message: object, query = ''): Promise<Answer | number> => {
      const res = await fetch(`${base}/mcp?token=${token}${query}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', ...message }),
      });
      return res.status === 200 ? ((await res.json()) as Answer) : res.status;
    };
    const tool = (name: string, args: Record<string, unknown> = {}) => ({
      id: 1,
      method: 'tools/call',
      params: { name, arguments: args },
    });
    const callers = [
      { who: 'A', token: writeA, workspace: a.id, name: 'Mcp A', tools: TOOLS.length },
      { who: 'B', token: writeB, workspace: b.id, name: 'Mcp B', tools: TOOLS.length },
      { who: 'A read', token: readA, workspace: a.id, name: 'Mcp A', tools: READ_TOOLS.length },
    ];
    const rounds = Array.from({ length: 12 }, (_, i) => i);
    // Each caller's requests at once, every one with id 1, among cancellations that name the ids
    // a shared Server could know a request by: none of them may reach another request.
    const answers = await Promise.all(
      rounds.flatMap((i) =>
        callers.map(async (c) => {
          const [workspace, expense, list, listed] = await Promise.all([
            post(c.token, tool('get_workspace')),
            post(
              c.token,
              tool('create_expense', {
                name: `Shared ${c.who} ${i}`,
                amount: 1,
                category_id: 'other',
                method_id: 'cash',
              }),
            ),
            post(c.token, tool('list_expenses', { limit: 1000 })),
            post(c.token, { id: 1, method: 'tools/list' }, i % 2 ? '&toolsets=contacts' : ''),
            ...Array.from({ length: 5 }, (_, k) =>
              post(c.token, { method: 'notifications/cancelled', params: { requestId: i * 15 + k, reason: 'x' } }),
            ),
          ]);
          return { c, i, workspace, expense, list, listed };
        }),
      ),
    );
    const expensesOf = async (ws: string) =>
      (await db.admin`SELECT id, name FROM public.personal_transactions WHERE workspace_id = ${ws}`).map(
        (r) => r.id as string,
      );
    const own = { [a.id]: await expensesOf(a.id), [b.id]: await expensesOf(b.id) };
    for (const { c, i, workspace, expense, list, listed } of answers) {
      const result = (answer: Answer | number) => {
        expect(answer).toMatchObject({ result: expect.anything() });
        return (answer as Answer).result!;
      };
      expect(result(workspace).structuredContent).toMatchObject({
        name: c.name,
        scope: c.token === readA ? 'read' : 'write',
      });
      if (c.token === readA) expect(result(expense).isError).toBe(true);
      else {
        const made = result(expense).structuredContent as { expense: { id: string; name: string } };
        expect(made.expense.name).toBe(`Shared ${c.who} ${i}`);
        expect(own[c.workspace]).toContain(made.expense.id);
      }
      const seen = (result(list).structuredContent as { expenses: { id: string }[] }).expenses.map((e) => e.id);
      expect(seen.filter((id) => !own[c.workspace]!.includes(id))).toEqual([]);
      const names = result(listed).tools!.map((t) => t.name);
      expect(names).toHaveLength(i % 2 ? (c.token === readA ? 1 : toolsets.contacts.length) : c.tools);
    }
    // Every create landed in its caller's workspace, once.
    const shared =
      await db.admin`SELECT workspace_id, name FROM public.personal_transactions WHERE name LIKE 'Shared %'`;
    expect(shared).toHaveLength(rounds.length * 2);
    for (const row of shared) expect(row.workspace_id).toBe(row.name.startsWith('Shared A') ? a.id : b.id);
  });

  it('a token of B never sees or changes data of A', async () => {
    // A's expenses as they are now (the fixture's own expense was deleted by an earlier test).
    const { id: aExpense } = first(
      await db.admin`INSERT INTO public.personal_transactions (workspace_id, name, amount, category_id, method_id)
      VALUES (${a.id}, 'Mcp A secret', 1, 'other', 'cash') RETURNING id`,
    );
    const ofA = (await db.admin`SELECT id FROM public.personal_transactions WHERE workspace_id = ${a.id}`).map(
      (r) => r.id as string,
    );
    expect(ofA).toContain(aExpense);
    const client = await connect(writeB);
    const list = await call(client, 'list_expenses', { limit: 1000 });
    const seen = (list.structuredContent as { expenses: { id: string }[] }).expenses.map((e) => e.id);
    expect(seen.length).toBeGreaterThan(0); // B's own expense: the list works, it only hides A's
    expect(seen.filter((id) => ofA.includes(id))).toEqual([]);
    expect((await call(client, 'update_expense', { id: aExpense, name: 'Hijacked' })).isError).toBe(true);
    expect(
      await db.admin`SELECT 1 FROM public.personal_transactions WHERE id = ${aExpense} AND name = 'Mcp A secret'`,
    ).toHaveLength(1);
    const funds = await call(client, 'list_funds');
    expect((funds.structuredContent as { funds: { id: string }[] }).funds.map((f) => f.id)).toEqual([b.fundId]);
    expect((await call(client, 'get_fund', { fund_id: a.fundId })).isError).toBe(true);
    expect((await call(client, 'update_contact', { id: a.contactId, name: 'Hijacked' })).isError).toBe(true);
    expect((await call(client, 'delete_fund_transaction', { id: a.fundTransactionId })).isError).toBe(true);
    const ledger = await call(client, 'create_fund_transaction', {
      fund_id: a.fundId,
      name: 'Into A',
      amount: 5,
      category_id: 'fund-income',
      method_id: 'cash',
    });
    expect(ledger.isError).toBe(true);
    expect(await db.admin`SELECT 1 FROM public.contacts WHERE name = 'Hijacked'`).toHaveLength(0);
    expect(await db.admin`SELECT 1 FROM public.fund_transactions WHERE id = ${a.fundTransactionId}`).toHaveLength(1);
    expect(await db.admin`SELECT 1 FROM public.fund_transactions WHERE name = 'Into A'`).toHaveLength(0);
    const contacts = await call(client, 'list_contacts');
    expect((contacts.structuredContent as { contacts: { id: string }[] }).contacts.map((c) => c.id)).toEqual([
      b.contactId,
    ]);
  });
});
