// Values a test expects to exist (the first row of a query, an element of a list, a header): read
// through these helpers, a missing one fails the test with a message instead of a TypeError.

/** A value the test expects to be there. */
export function present<T>(value: T | undefined, what = 'a value'): T {
  if (value === undefined) throw new Error(`expected ${what}, got undefined`);
  return value;
}

/** The first element of a list the test expects to be non-empty (the first row of a query). */
export function first<T>(items: readonly T[]): T {
  return present(items[0], 'a first element');
}

/** The CSRF token of a settings page's form, which every form post must send back. */
export const csrfOf = (html: string): string => present(/name="csrf" value="([^"]+)"/.exec(html)?.[1], 'a csrf field');
