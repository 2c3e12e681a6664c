// The cost of one request: how many items a select names in all, bounded before anything else
// runs, and how deep its embeds nest, bounded once its names are resolved (a lookup in the
// schema cache for each of those items, so a missing relationship is PostgREST's PGRST200 at
// any depth). A request over a limit is a 400 in PostgREST's shape; the statement timeout and
// work_mem (execute.ts) bound what a request within them may take.

import { catalogue } from '../errors/catalogue.js';
import type { SelectItem } from './types.js';

export interface SelectLimits {
  /** Levels of embedding below the top relation (TALLY_DB_MAX_EMBED_DEPTH). */
  maxEmbedDepth: number;
  /** Items of a select, every level counted (TALLY_DB_MAX_SELECT_WIDTH). */
  maxSelectWidth: number;
}

export function checkSelectWidth(select: SelectItem[], limits: SelectLimits): void {
  let width = 0;
  const walk = (items: SelectItem[]): void => {
    for (const item of items) {
      width++;
      if (item.kind === 'embed') walk(item.select);
    }
  };
  walk(select);
  if (width > limits.maxSelectWidth) {
    throw catalogue.selectTooWide(width, limits.maxSelectWidth);
  }
}

export function checkEmbedDepth(select: SelectItem[], limits: SelectLimits): void {
  const walk = (items: SelectItem[], depth: number): void => {
    if (depth > limits.maxEmbedDepth) throw catalogue.selectTooDeep(limits.maxEmbedDepth);
    for (const item of items) if (item.kind === 'embed') walk(item.select, depth + 1);
  };
  walk(select, 0);
}
