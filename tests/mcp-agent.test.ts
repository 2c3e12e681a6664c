import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createServer, type Server } from 'node:http';
import request from 'supertest';
import { CONSTRAINT_MESSAGES } from '../gateway/fields.js';
import { startTestApp } from './harness/app.js';
import { TENANT_TABLES, tokenFor, workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { callEveryTool, dataText, READ_TOOLS } from './harness/mcp-tools.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown, type FinanceSuite } from './harness/suite.js';
import { first } from './harness/present.js';

// The MCP server as an agent uses it, through the SDK's own Client over Streamable HTTP: records
// it can act on in the text content, errors that say what to change, paging, scope-aware tool
// lists, the workspace context and batch import, and the same field sentences as the wrapper.

let s: FinanceSuite;
let server: Server;
let base: string;
let writeA: string;
let readA: string;
const clients: Client[] = [];

async function connect(token: string, url = base): Promise<Client> {
  const client = new Client({ name: 'agent', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp?token=${token}`)));
  clients.push(client);
  return client;
}

async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

const text = (r: CallToolResult): string => (r.content[0] as { text: string }).text;

/** What a host that passes only `content` to the model gives it: the summary line, then the JSON. */
function fromText(r: CallToolResult): { summary: string; json: unknown } {
  const t = dataText(text(r));
  const i = t.indexOf('\n{');
  return { summary: t.slice(0, i), json: JSON.parse(t.slice(i + 1)) };
}

async function listening(app: ReturnType<typeof startTestApp>): Promise<{ srv: Server; url: string }> {
  const srv = createServer(app.app).listen(0, '127.0.0.1');
  await new Promise((r) => srv.once('listening', r));
  return { srv, url: `http://127.0.0.1:${(srv.address() as { port: number }).port}` };
}

beforeAll(async () => {
  s = await setUpFinance(restEnv({ TALLY_RATE_LIMIT_PER_MINUTE: '100000' }), ['Agent A', 'Agent B']);
  writeA = s.tokenA;
  readA = (await tokenFor(s.db.admin, s.a.id, 'read')).token;
  ({ srv: server, url: base } = await listening(s.t));
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await new Promise((r) => server.close(r));
  await tearDown(s.db, s.t);
});

describe('results carry their records in the text content', () => {
  it('every tool result has a summary line followed by the structured content as JSON', async () => {
    const client = await connect(writeA);
    const created = await call(client, 'create_contact', { name: 'Text Content' });
    expect(fromText(created).json).toEqual(created.structuredContent);
    const id = (created.structuredContent as { contact: { id: string } }).contact.id;
    expect(fromText(created).summary).toContain(id);

    await callEveryTool(s.a, async (name, args) => {
      const r = await call(client, name, args);
      expect({ name, isError: r.isError ?? false }).toEqual({ name, isError: false });
      expect(fromText(r).json).toEqual(r.structuredContent);
      return r.structuredContent as Record<string, unknown>;
    });
    const contacts = fromText(await call(client, 'list_contacts', { search: 'Text Content' })).json as {
      contacts: { id: string }[];
    };
    expect(contacts.contacts.map((c) => c.id)).toEqual([id]);
  });
});

describe('errors an agent can act on from the message alone', () => {
  const cases: [string, string, Record<string, unknown>, string][] = [
    [
      'an amount with 6 decimals',
      'create_expense',
      { name: 'x', amount: 1.123456, category_id: 'other', method_id: 'cash' },
      'Invalid arguments for create_expense: amount must have at most 4 decimal places.',
    ],
    [
      'a phone that is no phone',
      'create_contact',
      { name: 'x', phone: 'call me maybe' },
      'Invalid arguments for create_contact: phone has the wrong format: Phone number: 3 to 32 digits with optional +, spaces, dots, dashes, parentheses.',
    ],
    [
      'February 30',
      'create_expense',
      { name: 'x', amount: 1, category_id: 'other', method_id: 'cash', occurred_at: '2026-02-30T10:00:00Z' },
      'Invalid arguments for create_expense: occurred_at must be an ISO 8601 date-time with a time zone, such as 2026-03-14T18:30:00Z.',
    ],
    ['a missing id', 'delete_expense', {}, 'Invalid arguments for delete_expense: id is required.'],
    [
      'a misspelt argument',
      'list_contacts',
      { serach: 'x' },
      'Invalid arguments for list_contacts: serach is not a known argument (known arguments: search, limit, offset).',
    ],
    [
      'a date filter that is no date',
      'list_expenses',
      { start_date: 'last week' },
      'Invalid arguments for list_expenses: start_date must be an ISO 8601 date (2026-03-14) or date-time (2026-03-14T18:30:00Z).',
    ],
  ];
  it.each(cases)(
    '%s is one sentence naming the argument, and nothing is written',
    async (_what, tool, args, message) => {
      const before = first(
        await s.db
          .admin`SELECT (SELECT count(*) FROM personal_transactions)::int + (SELECT count(*) FROM contacts)::int AS n`,
      ).n;
      const r = await call(await connect(writeA), tool, args);
      expect(r.isError).toBe(true);
      expect(text(r)).toBe(message);
      expect(
        first(
          await s.db
            .admin`SELECT (SELECT count(*) FROM personal_transactions)::int + (SELECT count(*) FROM contacts)::int AS n`,
        ).n,
      ).toBe(before);
    },
  );

  it('a fund of another workspace (a foreign key refused by Postgres) reads the same on MCP and the wrapper', async () => {
    const sentence = CONSTRAINT_MESSAGES.fund_transactions_fund_id_fkey;
    const tx = { fund_id: s.b.fundId, name: 'Into B', amount: 5, category_id: 'fund-income', method_id: 'cash' };
    const r = await call(await connect(writeA), 'create_fund_transaction', tx);
    expect(r.isError).toBe(true);
    expect(text(r)).toBe(`${sentence}.`);
    const res = await request(s.t.app)
      .post('/api/v1/fund_transactions')
      .set('Authorization', `Bearer ${s.jwtA}`)
      .send(tx);
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({
      code: '23503',
      message: sentence,
      details: 'constraint: fund_transactions_fund_id_fkey',
    });
    expect(await s.db.admin`SELECT 1 FROM public.fund_transactions WHERE name = 'Into B'`).toHaveLength(0);
  });

  it('a check constraint refused by Postgres (no schema in front, /rest/v1) names the field', async () => {
    const post = (table: string, body: object) =>
      request(s.t.app)
        .post(`/rest/v1/${table}`)
        .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${s.jwtA}` })
        .send(body);
    const amount = await post('personal_transactions', {
      name: 'x',
      amount: 1.123456,
      category_id: 'other',
      method_id: 'cash',
    });
    expect([amount.status, amount.body.code, amount.body.message]).toEqual([
      400,
      '23514',
      CONSTRAINT_MESSAGES.personal_transactions_amount_bounds,
    ]);
    expect(amount.body.message).toMatch(/^amount .*4 decimal places$/);
    const phone = await post('contacts', { name: 'x', phone: 'call me maybe' });
    expect([phone.status, phone.body.message]).toEqual([400, CONSTRAINT_MESSAGES.contacts_phone_format]);
    const feb30 = await post('personal_transactions', {
      name: 'x',
      amount: 1,
      category_id: 'other',
      method_id: 'cash',
      occurred_at: '2026-02-30T10:00:00Z',
    });
    expect([feb30.status, feb30.body.code]).toEqual([400, '22008']);
    expect(feb30.body.message).toBe(
      '"2026-02-30T10:00:00Z" is not a real date and time: use an ISO 8601 date-time such as 2026-03-14T18:30:00Z',
    );
  });

  it('every constraint of the tenant tables a client writes has its sentence', async () => {
    const rows = await s.db.admin<{ conname: string }[]>`
      SELECT conname FROM pg_constraint
       WHERE conrelid = ANY (${TENANT_TABLES.map((t) => `public.${t}`)}::regclass[])
         AND has_table_privilege('api_write', conrelid, 'INSERT, UPDATE')
         AND contype IN ('c', 'f') AND conname NOT LIKE '%workspace_id_fkey'`;
    const missing = rows.map((r) => r.conname).filter((n) => !(n in CONSTRAINT_MESSAGES));
    expect(missing).toEqual([]);
  });
});

describe('paging', () => {
  it('lists answer has_more and next_offset, and an offset past the end is an empty page', async () => {
    const client = await connect(writeA);
    for (const name of ['Page Ann', 'Page Bob', 'Page Cyd']) await call(client, 'create_contact', { name });
    const first = (await call(client, 'list_contacts', { search: 'Page ', limit: 2 })).structuredContent as Record<
      string,
      unknown
    >;
    expect(first).toMatchObject({ has_more: true, next_offset: 2, total: null, limit: 2, offset: 0 });
    expect((first.contacts as { name: string }[]).map((c) => c.name)).toEqual(['Page Ann', 'Page Bob']);
    const second = (await call(client, 'list_contacts', { search: 'Page ', limit: 2, offset: 2 }))
      .structuredContent as Record<string, unknown>;
    expect(second).toMatchObject({ has_more: false, next_offset: null, total: 3, contacts: [{ name: 'Page Cyd' }] });
    const past = await call(client, 'list_expenses', { offset: 100000 });
    expect(past.isError).toBeFalsy();
    expect(past.structuredContent).toMatchObject({ expenses: [], has_more: false, next_offset: null });
  });

  it('get_fund pages its ledger', async () => {
    const client = await connect(writeA);
    const fund = (
      (await call(client, 'create_fund', { name: 'Paged ledger' })).structuredContent as { fund: { id: string } }
    ).fund.id;
    for (const day of [1, 2, 3]) {
      await call(client, 'create_fund_transaction', {
        fund_id: fund,
        name: `Day ${day}`,
        amount: day,
        category_id: 'fund-income',
        method_id: 'cash',
        occurred_at: `2026-05-0${day}T12:00:00Z`,
      });
    }
    const p1 = (await call(client, 'get_fund', { fund_id: fund, ledger_limit: 2 })).structuredContent as {
      ledger: { name: string }[];
      ledger_has_more: boolean;
      ledger_next_offset: number | null;
      fund: { totals: { balance: number } };
    };
    expect(p1.ledger.map((t) => t.name)).toEqual(['Day 3', 'Day 2']);
    expect([p1.ledger_has_more, p1.ledger_next_offset, p1.fund.totals.balance]).toEqual([true, 2, 6]);
    const p2 = (await call(client, 'get_fund', { fund_id: fund, ledger_limit: 2, ledger_offset: 2 }))
      .structuredContent as typeof p1;
    expect(p2.ledger.map((t) => t.name)).toEqual(['Day 1']);
    expect([p2.ledger_has_more, p2.ledger_next_offset]).toEqual([false, null]);
  });

  it('list_fund_transactions of an unknown (or foreign) fund says so instead of an empty page', async () => {
    const client = await connect(writeA);
    for (const id of ['00000000-0000-4000-8000-000000000000', s.b.fundId]) {
      const r = await call(client, 'list_fund_transactions', { fund_id: id });
      expect(r.isError).toBe(true);
      expect(text(r)).toBe(`No fund with id ${id} in this workspace (list_funds shows the ids).`);
    }
  });
});

describe('scope-aware tools', () => {
  it('a read token is offered the read tools only, and a write tool called anyway says the token is read-only', async () => {
    const client = await connect(readA);
    const names = (await client.listTools()).tools.map((t) => t.name).sort();
    expect(names).toEqual([...READ_TOOLS].sort());
    const r = await call(client, 'create_expenses', {
      expenses: [{ name: 'Nope', amount: 1, category_id: 'other', method_id: 'cash' }],
    });
    expect(r.isError).toBe(true);
    expect(text(r)).toBe(
      'This token is read-only: it cannot create, change or delete data. Writes need a workspace token with the write scope (tally token create --scope write).',
    );
    expect(await s.db.admin`SELECT 1 FROM public.personal_transactions WHERE name = 'Nope'`).toHaveLength(0);
  });

  it('does not advertise listChanged over stateless HTTP', async () => {
    const client = await connect(writeA);
    expect(client.getServerCapabilities()?.tools?.listChanged).toBeUndefined();
  });
});

describe('context and workflow', () => {
  it('get_workspace and the resource tally://workspace give name, currency, scope, rate limit left and the live lists', async () => {
    const client = await connect(readA);
    const r = await call(client, 'get_workspace');
    const info = r.structuredContent as Record<string, unknown>;
    expect(info).toMatchObject({
      name: 'Agent A',
      currency: 'EUR',
      scope: 'read',
      payment_methods: ['bank-transfer', 'cash', 'credit-card', 'installment', 'mobile-wallet'],
    });
    expect(info.expense_categories).toContain('food-drinks');
    expect(info.fund_categories).toContain('fund-income');
    const rate = info.rate_limit as { limit: number; remaining: number };
    expect(rate.limit).toBe(100000);
    expect(rate.remaining).toBeLessThan(100000);
    const { resources } = await client.listResources();
    expect(resources.map((x) => x.uri)).toEqual(['tally://workspace']);
    const read = await client.readResource({ uri: 'tally://workspace' });
    expect(JSON.parse((read.contents[0] as { text: string }).text)).toMatchObject({
      name: 'Agent A',
      currency: 'EUR',
      scope: 'read',
    });
  });

  it('create_expenses records a batch in one call, all or nothing', async () => {
    const client = await connect(writeA);
    const batch = Array.from({ length: 30 }, (_, i) => ({
      name: `Import ${i}`,
      amount: i + 1,
      category_id: 'other',
      method_id: 'cash',
      ...(i % 2 ? { note: 'odd' } : {}),
    }));
    const bad = [...batch.slice(0, 5), { ...batch[5], amount: -1 }, ...batch.slice(6)];
    const refused = await call(client, 'create_expenses', { expenses: bad });
    expect(refused.isError).toBe(true);
    expect(text(refused)).toBe('Invalid arguments for create_expenses: expenses.5.amount must be greater than 0.');
    expect(await s.db.admin`SELECT 1 FROM public.personal_transactions WHERE name LIKE 'Import %'`).toHaveLength(0);

    const ok = await call(client, 'create_expenses', { expenses: batch });
    expect(ok.isError ? text(ok) : 'ok').toBe('ok');
    expect((ok.structuredContent as { count: number }).count).toBe(30);
    const rows = await s.db
      .admin`SELECT workspace_id, note, occurred_at FROM public.personal_transactions WHERE name LIKE 'Import %'`;
    expect(rows).toHaveLength(30);
    expect(rows.every((r) => r.workspace_id === s.a.id && r.occurred_at !== null)).toBe(true);
    expect(rows.filter((r) => r.note === 'odd')).toHaveLength(15);
    expect(
      (await call(client, 'create_expenses', { expenses: Array.from({ length: 101 }, () => batch[0]) })).isError,
    ).toBe(true);
  });

  it('each expense of a batch counts against the rate limit, and a refused batch takes nothing', async () => {
    const limited = startTestApp(s.db.url, { TALLY_RATE_LIMIT_PER_MINUTE: '12' });
    const { srv, url } = await listening(limited);
    try {
      const { token } = await tokenFor(s.db.admin, s.a.id, 'write');
      const client = await connect(token, url); // initialize + initialized: 2 requests
      const batch = (n: number, tag: string) =>
        Array.from({ length: n }, (_, i) => ({
          name: `${tag} ${i}`,
          amount: 1,
          category_id: 'other',
          method_id: 'cash',
        }));
      expect((await call(client, 'create_expenses', { expenses: batch(8, 'Limited') })).isError).toBeFalsy(); // requests 3-10
      const over = await call(client, 'create_expenses', { expenses: batch(5, 'Over') }); // 11-15 > 12
      expect(over.isError).toBe(true);
      expect(text(over)).toMatch(/^Rate limit exceeded: at most 12 requests per minute\. Retry after \d+ seconds\.$/);
      expect(await s.db.admin`SELECT 1 FROM public.personal_transactions WHERE name LIKE 'Over %'`).toHaveLength(0);
      // The refused batch took only the call itself (11): request 12 still fits.
      const after = await call(client, 'create_expenses', { expenses: batch(1, 'After') });
      expect(after.isError ? text(after) : 'ok').toBe('ok');
      expect(await s.db.admin`SELECT 1 FROM public.personal_transactions WHERE name LIKE 'After %'`).toHaveLength(1);
      expect((await call(client, 'create_expenses', { expenses: batch(1, 'Past') })).isError).toBe(true); // 13
    } finally {
      await new Promise((r) => srv.close(r));
      await limited.close();
    }
  });

  it('spending_summary sums by category, method and month in SQL', async () => {
    const { id } = await workspaceWithData(s.db.admin, 'Agent Sums').then(async (w: WorkspaceFixture) => ({
      id: w.id,
    }));
    await s.db.admin`DELETE FROM public.personal_transactions WHERE workspace_id = ${id}`;
    await s.db
      .admin`INSERT INTO public.personal_transactions (workspace_id, name, amount, category_id, method_id, occurred_at) VALUES
      (${id}, 'Bread', 4.5, 'food-drinks', 'cash', '2026-03-01T00:00:00Z'),
      (${id}, 'Dinner', 40, 'food-drinks', 'credit-card', '2026-03-31T23:59:59Z'),
      (${id}, 'Bus', 2, 'local-transport', 'cash', '2026-03-15T10:00:00Z'),
      (${id}, 'April', 99, 'food-drinks', 'cash', '2026-04-01T00:00:00Z')`;
    const client = await connect((await tokenFor(s.db.admin, id, 'read')).token);
    const r = await call(client, 'spending_summary', { start_date: '2026-03-01', end_date: '2026-03-31' });
    expect(r.structuredContent).toEqual({
      from_date: '2026-03-01',
      to_date: '2026-03-31',
      total: 46.5,
      count: 3,
      by_category: [
        { category_id: 'food-drinks', total: 44.5, count: 2 },
        { category_id: 'local-transport', total: 2, count: 1 },
      ],
      by_method: [
        { method_id: 'credit-card', total: 40, count: 1 },
        { method_id: 'cash', total: 6.5, count: 2 },
      ],
      by_month: [{ month: '2026-03', total: 46.5, count: 3 }],
    });
    expect(fromText(r).summary).toBe(
      '3 expenses from 2026-03-01 to 2026-03-31 total 46.50 (largest: food-drinks 44.50, local-transport 2.00).',
    );
  });
});

describe('schema details', () => {
  it('output schemas name the members of a result and their types; upper-case uuids are accepted', async () => {
    const client = await connect(writeA);
    const { tools } = await client.listTools();
    expect(tools.find((t) => t.name === 'spending_summary')!.outputSchema).toEqual({
      type: 'object',
      properties: {
        from_date: { type: ['string', 'null'] },
        to_date: { type: ['string', 'null'] },
        total: { type: 'number' },
        count: { type: 'integer' },
        by_category: { type: 'array' },
        by_method: { type: 'array' },
        by_month: { type: 'array' },
      },
      required: ['from_date', 'to_date', 'total', 'count', 'by_category', 'by_method', 'by_month'],
    });
    // A list's members (its records and the page) are the instructions', said once for every list.
    expect(tools.find((t) => t.name === 'list_expenses')!.outputSchema).toBeUndefined();
    const input = tools.find((t) => t.name === 'delete_expense')!.inputSchema as unknown as {
      properties: { id: { format: string } };
    };
    expect(input.properties.id.format).toBe('uuid');

    const id = (
      (await call(client, 'create_expense', { name: 'Upper', amount: 1, category_id: 'other', method_id: 'cash' }))
        .structuredContent as { expense: { id: string } }
    ).expense.id;
    const del = await call(client, 'delete_expense', { id: id.toUpperCase() });
    expect(del.isError).toBeFalsy();
    expect(await s.db.admin`SELECT 1 FROM public.personal_transactions WHERE id = ${id}`).toHaveLength(0);
  });

  it('the 401 without a token hints at ?token=, the way MCP clients pass it', async () => {
    const res = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
    });
    expect(res.status).toBe(401);
    expect(((await res.json()) as { hint: string }).hint).toContain('/mcp?token=');
  });
});

describe('JSON-RPC batches', () => {
  it('are refused with a JSON-RPC error, so 100 tool calls cannot pass as one request', async () => {
    const batch = Array.from({ length: 100 }, (_, i) => ({
      jsonrpc: '2.0',
      id: i,
      method: 'tools/call',
      params: { name: 'create_contact', arguments: { name: `Batched ${i}` } },
    }));
    const res = await fetch(`${base}/mcp?token=${writeA}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(batch),
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { jsonrpc: string; id: null; error: { code: number; message: string } };
    expect(body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600 } });
    expect(body.error.message).toMatch(/batches are not supported.*create_expenses/);
    expect(await s.db.admin`SELECT 1 FROM public.contacts WHERE name LIKE 'Batched %'`).toHaveLength(0);
  });
});
