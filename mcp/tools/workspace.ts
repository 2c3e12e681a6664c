import type { JsonSchema } from '../../gateway/fields.js';
import { array } from '../schemas.js';
import { READ, tool, type RateLimitLeft, type Tool, type ToolContext } from './tool.js';
import type { NoArgs } from './shared.js';

// The workspace itself: its name and currency, the token's scope and rate limit, the live lists.

export const workspaceTools: Tool[] = [
  tool<NoArgs>()({
    name: 'get_workspace',
    title: 'About this workspace',
    description:
      "This workspace's name and currency, the token's scope and rate limit left, and the live category, payment method and " +
      'fund kind lists (also the resource tally://workspace).',
    annotations: READ,
    required: [],
    input: () => ({}),
    output: workspaceOutput(),
    async run(_args, ctx) {
      const structured = await workspaceInfo(ctx);
      const rate = structured.rate_limit as RateLimitLeft | null;
      return {
        structured,
        summary:
          `Workspace "${structured.name as string}" (${structured.currency as string}), ${ctx.caller.scope} token` +
          (rate ? `, ${rate.remaining} of ${rate.limit} requests left this minute.` : ', no rate limit (stdio).'),
      };
    },
  }),
];

function workspaceOutput(): Record<string, JsonSchema> {
  const list = (description: string): JsonSchema => array({ type: 'string' }, description);
  return {
    name: { type: 'string' },
    currency: { type: 'string', description: "ISO 4217 code of the workspace's amounts" },
    scope: { type: 'string', enum: ['read', 'write'], description: 'read: only the read tools are offered' },
    rate_limit: {
      type: ['object', 'null'],
      description: 'Requests left in the current minute; null over stdio, which is not limited',
      properties: {
        limit: { type: 'integer' },
        remaining: { type: 'integer' },
        reset_at: { type: 'string', format: 'date-time' },
      },
    },
    expense_categories: list('category_id values of expenses'),
    fund_categories: list('category_id values of fund transactions'),
    payment_methods: list('method_id values'),
    fund_kinds: list('kind values of funds'),
  };
}

/** get_workspace and the resource tally://workspace. */
export async function workspaceInfo({ db, caller, lookups }: ToolContext): Promise<Record<string, unknown>> {
  const [[profile], rate] = await Promise.all([
    db.rpc<{ name: string; currency: string }[]>('workspace_profile', {}),
    caller.rateLimit ? caller.rateLimit() : Promise.resolve(null),
  ]);
  return {
    name: profile?.name ?? null,
    currency: profile?.currency ?? null,
    scope: caller.scope,
    rate_limit: rate,
    expense_categories: lookups.expenseCategories,
    fund_categories: lookups.fundCategories,
    payment_methods: lookups.paymentMethods,
    fund_kinds: lookups.fundKinds,
  };
}
