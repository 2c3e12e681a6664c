import { activityTools } from './tools/activity.js';
import { contactTools } from './tools/contacts.js';
import { expenseTools } from './tools/expenses.js';
import { fundTransactionTools } from './tools/fund-transactions.js';
import { fundTools } from './tools/funds.js';
import { isReadTool, type Tool } from './tools/tool.js';
import { workspaceTools } from './tools/workspace.js';

// Every MCP tool, by area: the one registry the server lists and calls, and the tests iterate.
// A new tool is one entry in its area's file (mcp/tools/); a new area is one line here.

export const toolsets = {
  workspace: workspaceTools,
  expenses: expenseTools,
  funds: [...fundTools, ...fundTransactionTools],
  contacts: contactTools,
  activity: activityTools,
} satisfies Record<string, Tool[]>;

export const tools: Tool[] = Object.values(toolsets).flat();

/** Which tools a client loads: some areas (all when none is named), or the read tools only. */
export interface ToolSelection {
  toolsets?: string[];
  readOnly?: boolean;
}

const TOOLSET_NAMES = Object.keys(toolsets);

/** The names of the tools a selection loads; a toolset name that is not one is an error naming them. */
export function selectedTools({ toolsets: names, readOnly }: ToolSelection): Set<string> {
  const unknown = (names ?? []).filter((n) => !TOOLSET_NAMES.includes(n));
  if (unknown.length)
    throw new Error(`Unknown toolset ${unknown.join(', ')}: the toolsets are ${TOOLSET_NAMES.join(', ')}`);
  const areas = names?.length ? names : TOOLSET_NAMES;
  const chosen = areas.flatMap((n) => toolsets[n as keyof typeof toolsets]);
  return new Set(chosen.filter((t) => !readOnly || isReadTool(t)).map((t) => t.name));
}

export { isReadTool, type McpCaller, type Tool, type ToolContext, type ToolResult } from './tools/tool.js';
export { workspaceInfo } from './tools/workspace.js';
