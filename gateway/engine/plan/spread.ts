// The columns a spread embed lifts into its parent: the planner orders by them, the query
// builder reads (and the parent aggregates) them. A module of its own that imports only types, so
// that both stages use it without the query builder importing the planner (an import cycle).

import type { CatalogText } from '../sql.js';
import type { Aggregate, ReadNode } from './types.js';

/** A column a spread embed lifts into its parent, with the aggregate the parent applies. */
export interface SpreadColumn {
  key: string;
  aggregate?: Aggregate;
  count?: { cast?: CatalogText };
  /** An embedded resource's value: json, which has no equality operator to group by. */
  json?: true;
}

/** The columns a spread embed's node lifts into its parent, nested spreads' included. */
export function spreadColumns(node: ReadNode): SpreadColumn[] {
  return node.select.flatMap((item): SpreadColumn[] => {
    if (item.kind === 'star') return node.relation.columnList.map((c) => ({ key: c.name }));
    if (item.kind === 'field') return [{ key: item.key, aggregate: item.aggregate }];
    if (item.kind === 'count') return [{ key: item.key, count: { cast: item.cast } }];
    return item.embed.spread ? spreadColumns(item.embed.node) : [{ key: item.embed.key, json: true }];
  });
}
