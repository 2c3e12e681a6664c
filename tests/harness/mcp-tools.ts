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
