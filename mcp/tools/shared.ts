import { DECIMALS, nullable, type JsonSchema } from '../../gateway/fields.js';
import { defined } from '../../gateway/engine/invariant.js';
import { ToolError, type Page } from '../gateway-client.js';
import { dateOrDateTime, limit, offset, rangeEnd, rangeStart } from '../schemas.js';

// What the handlers of several areas share: the arguments of lists, the pieces of a summary.

export type Paging = { limit?: number; offset?: number };
export type DateRange = { start_date?: string; end_date?: string };
export type ById = { id: string };
export type NoArgs = Record<never, never>;

// One formatter for every summary: toLocaleString with options builds a new one per call, which
// was a tenth of a list call's CPU.
const MONEY = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 4 });
export const money = (n: number): string => MONEY.format(n);
export const round = (n: number): number => Math.round(n * 10_000) / 10_000;

/** Only the fields the caller gave: update_* changes nothing else. */
export function given<A extends object>(args: A, fields: readonly (keyof A & string)[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of fields) if (args[f] !== undefined) out[f] = args[f];
  if (Object.keys(out).length === 0) throw new ToolError(`Give at least one field to change: ${fields.join(', ')}.`);
  return out;
}

/**
 * Fields without their descriptions: for a tool that takes the fields another tool describes
 * (update_* those of create_*), so tools/list says each once.
 */
export function terse<T extends Record<string, JsonSchema>>(fields: T): T {
  return Object.fromEntries(
    Object.entries(fields).map(([name, { description: _, ...rule }]) => [
      name,
      // The one bound no published keyword states (fields.ts DECIMALS) stays, in words.
      typeof rule[DECIMALS] === 'number' ? { ...rule, description: `at most ${rule[DECIMALS]} decimals` } : rule,
    ]),
  ) as T;
}

/** Each field nullable: null clears it. */
export function nullables<T extends Record<string, JsonSchema>>(fields: T): T {
  return Object.fromEntries(Object.entries(fields).map(([name, rule]) => [name, nullable(rule)])) as T;
}

/** Some of a table's fields. */
export function pick<T extends Record<string, JsonSchema>, K extends keyof T & string>(
  fields: T,
  names: K[],
): Pick<T, K> {
  return Object.fromEntries(names.map((n) => [n, defined(fields[n], `the field ${n}`)])) as Pick<T, K>;
}

/** Date range and enum filters shared by the list tools (paging is TableClient.page). */
export function listQuery(
  args: DateRange,
  columns: string,
  filters: Record<string, string | undefined>,
): URLSearchParams {
  const q = new URLSearchParams({ select: columns, order: 'occurred_at.desc,id.desc' });
  for (const [column, value] of Object.entries(filters)) if (value !== undefined) q.append(column, `eq.${value}`);
  if (args.start_date !== undefined) q.append('occurred_at', `gte.${rangeStart(args.start_date)}`);
  if (args.end_date !== undefined) {
    const [op, value] = rangeEnd(args.end_date);
    q.append('occurred_at', `${op}.${value}`);
  }
  return q;
}

export const paging = { limit, offset };
export const dateFilters = {
  start_date: dateOrDateTime('On or after (a date: from its start, UTC)'),
  end_date: dateOrDateTime('On or before (a date: its whole UTC day)'),
};

/** "Records 51-100 of 230" / "51-100, more follow (next_offset 100)". */
export function pageText(page: Page<unknown>, noun: string): string {
  if (page.rows.length === 0)
    return page.offset > 0 ? `No ${noun} at offset ${page.offset} (the last page was before it).` : `No ${noun} match.`;
  const range = `${noun} ${page.offset + 1}-${page.offset + page.rows.length}`;
  return page.has_more ? `${range}; more follow (next_offset ${page.next_offset}).` : `${range} of ${page.total}.`;
}

export const pageFields = (page: Page<unknown>) => ({
  limit: page.limit,
  offset: page.offset,
  has_more: page.has_more,
  next_offset: page.next_offset,
  total: page.total,
});

export const notFound = (noun: string, id: string, lister: string) =>
  new ToolError(`No ${noun} with id ${id} in this workspace (${lister} shows the ids).`);
