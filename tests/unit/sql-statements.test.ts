import { splitStatements } from '../../gateway/db/sql-statements.js';

describe('splitStatements', () => {
  it('splits a file at the semicolons between statements, leaving out empty ones and trailing comments', () => {
    expect(splitStatements('SELECT 1;\n\nSELECT 2 ;;\n-- the end\n')).toEqual(['SELECT 1', 'SELECT 2']);
  });

  it('keeps semicolons inside comments, quoted text, identifiers and dollar-quoted bodies', () => {
    const body = `CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
  PERFORM 1; -- a; b
  RAISE NOTICE 'x;y';
END
$fn$`;
    const text = [
      `-- Up Migration\n-- a comment; with a semicolon\n${body}`,
      `/* a /* nested; */ comment */ SELECT 'it''s; here', "odd;name" FROM t`,
      `SELECT E'back\\\\'';' AS s, $$;$$ AS d, $1 AS p`,
    ].join(';\n');
    expect(splitStatements(text)).toEqual([
      `-- Up Migration\n-- a comment; with a semicolon\n${body}`,
      `/* a /* nested; */ comment */ SELECT 'it''s; here', "odd;name" FROM t`,
      `SELECT E'back\\\\'';' AS s, $$;$$ AS d, $1 AS p`,
    ]);
  });

  it('reads every SQL file of sql/ and policies/ into statements that end where the file says', async () => {
    const { readdir, readFile } = await import('node:fs/promises');
    let count = 0;
    for (const dir of ['sql', 'policies']) {
      const files = (await readdir(dir, { recursive: true })).filter((f) => f.endsWith('.sql'));
      for (const file of files.map((f) => `${dir}/${f}`)) {
        const statements = splitStatements(await readFile(file, 'utf8'));
        count += statements.length;
        // A statement that swallowed its neighbour would hold two CREATE/ALTER/… at line starts.
        for (const s of statements) {
          const starts = s
            .split('\n')
            .filter((l) => /^(CREATE|ALTER|DROP|GRANT|REVOKE|INSERT|SELECT|DO|COMMENT) /.test(l));
          expect({ file, starts: starts.length <= 1 }).toEqual({ file, starts: true });
        }
      }
    }
    expect(count).toBeGreaterThan(100);
  });
});
