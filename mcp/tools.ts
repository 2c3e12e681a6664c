import { activityTools } from './tools/activity.js';
import { contactTools } from './tools/contacts.js';
import { expenseTools } from './tools/expenses.js';
import { fundTransactionTools } from './tools/fund-transactions.js';
import { fundTools } from './tools/funds.js';
import type { Tool } from './tools/tool.js';
import { workspaceTools } from './tools/workspace.js';

// Every MCP tool, by area: the one registry the server lists and calls, and the tests iterate.
// A new tool is one entry in its area's file (mcp/tools/); a new area is one line here.

const toolsets = {
  workspace: workspaceTools,
  expenses: expenseTools,
  funds: [...fundTools, ...fundTransactionTools],
  contacts: contactTools,
  activity: activityTools,
} satisfies Record<string, Tool[]>;

export const tools: Tool[] = Object.values(toolsets).flat();

export { isReadTool, type McpCaller, type Tool, type ToolContext, type ToolResult } from './tools/tool.js';
export { workspaceInfo } from './tools/workspace.js';
