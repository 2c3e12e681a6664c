// The 42703 of a column a relation does not have, as Postgres words it when PostgREST's query
// names the column: "column <name>.<column> does not exist", where <name> is what that query
// calls the relation (the table; an embedded one `table_depth`, except the far side of a
// many-to-many), and the hint Postgres makes from the relation's columns close to the one asked
// for (parse_relation.c, errorMissingColumn). Only columns the caller may read are offered.

import { catalogue, type ApiError } from '../errors/catalogue.js';
import { readableColumns, type Relation } from '../schema-cache/types.js';

/** Postgres's bound on a suggestion's distance (MAX_FUZZY_DISTANCE). */
const MAX_DISTANCE = 3;

/** Edits (insert, delete, substitute) between two names, counted in characters as Postgres does. */
export function levenshtein(a: string, b: string): number {
  const x = [...a];
  const y = [...b];
  let row = Array.from({ length: y.length + 1 }, (_, j) => j);
  for (let i = 1; i <= x.length; i++) {
    const next = [i];
    for (let j = 1; j <= y.length; j++) {
      next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (x[i - 1] === y[j - 1] ? 0 : 1));
    }
    row = next;
  }
  return row[y.length]!;
}

/**
 * The columns Postgres suggests for `name`: the one closest, or two equally close; none when
 * three or more tie or every column differs in more than half of `name` (its length in bytes).
 */
function suggestions(columns: string[], name: string): string[] {
  const half = Math.floor(Buffer.byteLength(name) / 2);
  const length = [...name].length;
  let best = MAX_DISTANCE + 1;
  let found: string[] = [];
  for (const column of columns) {
    // Two names are at least their difference in length apart: a column that cannot be close
    // enough to count is not compared, so a name of thousands of characters (a URL holds one)
    // costs no more than a short one, where comparing it would cost its length for each column.
    if (Math.abs([...column].length - length) > Math.min(half, best)) continue;
    const d = levenshtein(column, name);
    if (d > half) continue;
    if (d < best) {
      best = d;
      found = [column];
    } else if (d === best) {
      // A third at the same distance drops them all, and that distance stays the bar to beat.
      found = found.length === 2 ? [] : found.length === 1 ? [...found, column] : found;
    }
  }
  return found;
}

export function missingColumn(rel: Relation, queryName: string, name: string, viewer: string | undefined): ApiError {
  const close = suggestions(readableColumns(rel, viewer), name).map((c) => `the column "${queryName}.${c}"`);
  return catalogue.undefinedColumn(
    queryName,
    name,
    close.length > 0 ? `Perhaps you meant to reference ${close.join(' or ')}.` : null,
  );
}
