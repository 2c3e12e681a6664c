import { jest } from '@jest/globals';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ToolListChangedNotificationSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { packageRoot } from '../gateway/paths.js';
import { createTestDatabase, serverUrl, type TestDatabase } from './harness/db.js';
import { tally } from './harness/cli.js';
import { tokenFor, workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { first, present } from './harness/present.js';
import { dataText, READ_TOOLS } from './harness/mcp-tools.js';
import { tools } from '../mcp/tools.js';
import { waitFor } from './harness/wait.js';

// Each test or hook here starts the CLI through tsx (five in a row took 30 s of jest's default
// 60 s on a loaded 2-core machine): the timeout is a safety net, as in cli.test.ts.
jest.setTimeout(180_000);

// `tally mcp`: the same tools over stdio for desktop clients, token from TALLY_TOKEN.

describe('tally mcp (stdio)', () => {
  let db: TestDatabase;
  let ws: WorkspaceFixture;
  beforeAll(async () => {
    db = await createTestDatabase();
    ws = await workspaceWithData(db.admin, 'Stdio');
  });
  afterAll(() => db.drop());

  function transport(token: string, options: string[] = []): StdioClientTransport {
    return new StdioClientTransport({
      command: process.execPath,
      args: ['--import', 'tsx', 'gateway/cli/main.ts', 'mcp', ...options],
      cwd: packageRoot,
      env: {
        PATH: process.env.PATH ?? '',
        DATABASE_URL: db.url,
        TALLY_DB_URI: serverUrl(db.url),
        TALLY_JWT_SECRET: 'x'.repeat(32),
        TALLY_TOKEN: token,
        LOG_LEVEL: 'info',
      },
      stderr: 'pipe',
    });
  }

  it('serves the tools to a desktop client, and stops at the next call once the token is revoked', async () => {
    const { id, token } = await tokenFor(db.admin, ws.id, 'write');
    const client = new Client({ name: 'desktop', version: '1' });
    await client.connect(transport(token));
    try {
      expect((await client.listTools()).tools).toHaveLength(tools.length);
      const created = (await client.callTool({
        name: 'create_contact',
        arguments: { name: 'Via stdio' },
      })) as CallToolResult;
      expect(created.isError).toBeFalsy();
      const row = first(await db.admin`SELECT workspace_id FROM public.contacts WHERE name = 'Via stdio'`);
      expect(row.workspace_id).toBe(ws.id);

      await db.admin`SELECT tally.revoke_token(${id}, NULL, 'test')`;
      const refused = (await client.callTool({ name: 'list_contacts', arguments: {} })) as CallToolResult;
      expect(refused.isError).toBe(true);
      expect((refused.content[0] as { text: string }).text).toMatch(/revoked/);
    } finally {
      await client.close();
    }
  });

  it('tells a long-lived client when the category list changes, with the new enum', async () => {
    const { token } = await tokenFor(db.admin, ws.id, 'read');
    const client = new Client({ name: 'desktop', version: '1' });
    let changed = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      changed++;
    });
    await client.connect(transport(token));
    try {
      // The server read the database's change version before it loaded the lists it answered
      // with (gateway/lookups.ts), so the insert below is a change it sees, by LISTEN or poll.
      await client.listTools();
      expect(changed).toBe(0);
      await db.admin`INSERT INTO public.categories (id, name, for_expenses) VALUES ('pets', 'Pets', true)`;
      const enumOf = async () => {
        const { tools } = await client.listTools();
        return present(
          (tools.find((t) => t.name === 'list_expenses')!.inputSchema.properties as Record<string, { enum: string[] }>)
            .category_id,
        ).enum;
      };
      await waitFor(() => changed > 0, 'the notification that the tool list changed');
      expect(await enumOf()).toContain('pets');
    } finally {
      await client.close();
    }
  });

  it('--toolsets and --read-only load only those tools: another one is an unknown tool, and nothing is written', async () => {
    const { token } = await tokenFor(db.admin, ws.id, 'write');
    const client = new Client({ name: 'desktop', version: '1' });
    await client.connect(transport(token, ['--toolsets', 'funds,contacts', '--read-only']));
    try {
      const names = (await client.listTools()).tools.map((t) => t.name).sort();
      expect(names).toEqual(['get_fund', 'list_contacts', 'list_fund_transactions', 'list_funds']);
      const listed = (await client.callTool({ name: 'list_contacts', arguments: {} })) as CallToolResult;
      expect(listed.isError).toBeFalsy();
      // A write tool of a loaded toolset, and a read tool of another: neither is loaded.
      for (const [name, args] of [
        ['create_contact', { name: 'Not loaded' }],
        ['list_expenses', {}],
      ] as const)
        await expect(client.callTool({ name, arguments: args })).rejects.toMatchObject({
          code: -32602,
          message: expect.stringContaining(`Unknown tool "${name}"`),
        });
      expect(await db.admin`SELECT 1 FROM public.contacts WHERE name = 'Not loaded'`).toHaveLength(0);
    } finally {
      await client.close();
    }
  });

  it('refuses an unknown toolset, in one line', async () => {
    const r = await tally(['mcp', '--toolsets', 'expenses,nope'], {
      DATABASE_URL: db.url,
      TALLY_DB_URI: serverUrl(db.url),
      TALLY_JWT_SECRET: 'x'.repeat(32),
      TALLY_TOKEN: (await tokenFor(db.admin, ws.id, 'write')).token,
    });
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe(
      'tally: Unknown toolset nope: the toolsets are workspace, expenses, funds, contacts, activity',
    );
    expect(r.stdout).toBe('');
  });

  it('refuses to start with an unknown token, in one line', async () => {
    const r = await tally(['mcp'], {
      DATABASE_URL: db.url,
      TALLY_DB_URI: serverUrl(db.url),
      TALLY_JWT_SECRET: 'x'.repeat(32),
      TALLY_TOKEN: 'tally_ws_' + 'y'.repeat(40),
    });
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe(
      'tally: Invalid workspace token. Check the token (tally token list shows the tokens of a workspace)',
    );
    expect(r.stdout).toBe('');
  });

  it('without TALLY_TOKEN says to set it', async () => {
    const r = await tally(['mcp'], { DATABASE_URL: db.url, TALLY_JWT_SECRET: 'x'.repeat(32) });
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toMatch(
      /^tally: No workspace token: set TALLY_TOKEN\. Start it as TALLY_TOKEN=tally_ws_… tally mcp/,
    );
    expect(r.stdout).toBe('');
  });

  it('offers a read token the read tools, answers records in the text, errors by argument, and imports a batch', async () => {
    const text = (r: CallToolResult): string => (r.content[0] as { text: string }).text;
    const read = new Client({ name: 'desktop', version: '1' });
    await read.connect(transport((await tokenFor(db.admin, ws.id, 'read')).token));
    try {
      const names = (await read.listTools()).tools.map((t) => t.name).sort();
      expect(names).toEqual(READ_TOOLS);
      const info = (await read.callTool({ name: 'get_workspace', arguments: {} })) as CallToolResult;
      expect(info.structuredContent).toMatchObject({ name: 'Stdio', currency: 'EUR', scope: 'read', rate_limit: null });
      const refused = (await read.callTool({
        name: 'delete_expense',
        arguments: { id: ws.expenseId },
      })) as CallToolResult;
      expect(text(refused)).toMatch(/^This token is read-only/);
    } finally {
      await read.close();
    }

    const write = new Client({ name: 'desktop', version: '1' });
    await write.connect(transport((await tokenFor(db.admin, ws.id, 'write')).token));
    try {
      const expenses = [
        {
          name: 'Desk import 1',
          amount: 1.25,
          category_id: 'other',
          method_id: 'cash',
          occurred_at: '2026-06-01T10:00:00Z',
        },
        {
          name: 'Desk import 2',
          amount: 1.123456,
          category_id: 'other',
          method_id: 'cash',
          occurred_at: '2026-06-02T10:00:00Z',
        },
      ];
      const bad = (await write.callTool({ name: 'create_expenses', arguments: { expenses } })) as CallToolResult;
      expect(text(bad)).toBe(
        'Invalid arguments for create_expenses: expenses.1.amount must have at most 4 decimal places.',
      );
      present(expenses[1]).amount = 2;
      const ok = (await write.callTool({ name: 'create_expenses', arguments: { expenses } })) as CallToolResult;
      expect(ok.isError).toBeFalsy();
      const listed = (await write.callTool({
        name: 'list_expenses',
        arguments: { search: 'Desk import', limit: 1 },
      })) as CallToolResult;
      const [summary, json] = dataText(text(listed)).split('\n');
      expect(summary).toBe('expenses 1-1; more follow (next_offset 1). This page sums to 2.00.');
      expect(JSON.parse(present(json))).toEqual(listed.structuredContent);
      expect(
        await db.admin`SELECT 1 FROM public.personal_transactions WHERE workspace_id = ${ws.id} AND name LIKE 'Desk import %'`,
      ).toHaveLength(2);
    } finally {
      await write.close();
    }
  });
});
