// What the code's own invariants guarantee: a statement's one row, a regex group that takes part
// in every match, a configuration checked at start. When such a value is missing anyway it is a
// bug, so the error is a plain Error: toApiError answers it as TLY000 and the server logs this
// message, which says what was missing.

/** The value, which an invariant says is there; throws an internal error naming it when not. */
export function defined<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`Internal invariant broken: ${what} is missing`);
  return value;
}

/** Group `i` of a successful match, for a group that is not optional in its pattern. */
export function group(match: RegExpExecArray | RegExpMatchArray, i: number): string {
  return defined(match[i], `group ${i} of a successful match`);
}

/** The row of a statement that always answers one: a function called without FROM, an aggregate. */
export function oneRow<T>(rows: readonly T[], what: string): T {
  return defined(rows[0], `the row of ${what}`);
}
