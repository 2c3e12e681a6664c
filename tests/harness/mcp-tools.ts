import request from 'supertest';

// The MCP tools a read token is offered, kept by hand rather than read from mcp/tools.ts: a write
// tool marked read-only by mistake makes tests/mcp.test.ts fail. One list for every suite that
// lists them (over HTTP and over stdio).

export const READ_TOOLS = [
  'get_fund',
  'get_workspace',
  'list_activity',
  'list_contacts',
  'list_expenses',
  'list_fund_transactions',
  'list_funds',
  'spending_summary',
];

/** What an MCP tools/call answers. */
export interface ToolResult {
  isError?: boolean;
  structuredContent: Record<string, unknown>;
  content: { text: string }[];
}

/** A caller of MCP tools/call on `app` with a workspace token (read lazily: set in beforeAll). */
export const toolCaller =
  (app: () => Parameters<typeof request>[0], token: () => string) =>
  async (name: string, args: Record<string, unknown>): Promise<ToolResult> => {
    const res = await request(app())
      .post(`/mcp?token=${token()}`)
      .set({ Accept: 'application/json, text/event-stream', 'Content-Type': 'application/json' })
      .send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } })
      .expect(200);
    return res.body.result as ToolResult;
  };
