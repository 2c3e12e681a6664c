// A SQL file (a migration, a policy file) as its statements, to be run one by one. Postgres
// itself runs a file of several statements sent as one simple query, but a Citus coordinator
// passes the text of such a query on to its workers when a statement changes a distributed
// table, and a worker refuses several commands in one prepared statement. One statement per
// query is the same transaction on plain Postgres and works on both.
//
// Only what separates statements is read: comments (-- and nested /* */), quoted identifiers,
// string constants (standard, E'' with backslash escapes) and dollar-quoted bodies.

const DOLLAR_TAG = /^\$([A-Za-z_\u0080-\uffff][A-Za-z_0-9\u0080-\uffff]*)?\$/;

/** The statements of `text`, each without its terminating semicolon; empty ones are left out. */
export function splitStatements(text: string): string[] {
  const statements: string[] = [];
  let start = 0;
  let code = false; // the current statement has something besides comments and blanks
  let i = 0;
  const push = (end: number) => {
    if (code) statements.push(text.slice(start, end).trim());
    start = end + 1;
    code = false;
  };
  while (i < text.length) {
    const c = text[i]!;
    const next = text[i + 1];
    if (c === '-' && next === '-') {
      const eol = text.indexOf('\n', i);
      i = eol < 0 ? text.length : eol + 1;
    } else if (c === '/' && next === '*') {
      let depth = 1;
      i += 2;
      while (i < text.length && depth > 0) {
        const pair = text.slice(i, i + 2);
        depth += pair === '/*' ? 1 : pair === '*/' ? -1 : 0;
        i += pair === '/*' || pair === '*/' ? 2 : 1;
      }
    } else if (c === "'" || c === '"') {
      const escapes = c === "'" && /[eE]/.test(text[i - 1] ?? '') && !/[A-Za-z0-9_]/.test(text[i - 2] ?? '');
      code = true;
      i++;
      while (i < text.length) {
        if (escapes && text[i] === '\\') i += 2;
        else if (text[i] === c && text[i + 1] === c) i += 2;
        else if (text[i] === c) break;
        else i++;
      }
      i++;
    } else if (c === '$' && !/[A-Za-z0-9_$]/.test(text[i - 1] ?? '')) {
      const tag = DOLLAR_TAG.exec(text.slice(i))?.[0];
      code = true;
      if (tag) {
        const end = text.indexOf(tag, i + tag.length);
        i = end < 0 ? text.length : end + tag.length;
      } else i++;
    } else if (c === ';') {
      push(i);
      i++;
    } else {
      if (!/\s/.test(c)) code = true;
      i++;
    }
  }
  push(text.length);
  return statements;
}
