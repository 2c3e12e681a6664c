import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { splitStatements } from '../gateway/db/sql-statements.js';
import { createTestDatabase, onCitus, type TestDatabase } from './harness/db.js';

// Every function of the schemas Tally owns has its current definition in exactly one file of
// sql/ or policies/, as the database runs it: a DBA reads a function where it is defined, and
// changes it there. No function is written by another (a CREATE FUNCTION inside a body, built
// with format()): each CREATE FUNCTION of the tree starts a statement of its own.

const root = fileURLToPath(new URL('..', import.meta.url));

interface Definition {
  file: string;
  name: string;
  body: string;
}

function definitionsInTree(): { definitions: Definition[]; generated: string[] } {
  const definitions: Definition[] = [];
  const generated: string[] = [];
  for (const dir of ['sql', 'policies']) {
    const files = readdirSync(join(root, dir), { recursive: true }) as string[];
    for (const file of files.filter((f) => f.endsWith('.sql')).map((f) => `${dir}/${f}`)) {
      for (const statement of splitStatements(readFileSync(join(root, file), 'utf8'))) {
        const code = statement.replace(/^(\s*--[^\n]*\n)*\s*/, '');
        const head = /^CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+([\w.]+)\s*\(/i.exec(code);
        const creates = (statement.match(/CREATE\s+(OR\s+REPLACE\s+)?FUNCTION/gi) ?? []).length;
        if (creates > (head ? 1 : 0)) generated.push(file);
        if (!head) continue;
        const body = /\bAS\s+(\$\w*\$)([\s\S]*?)\1/i.exec(code);
        definitions.push({ file, name: head[1]!, body: body?.[2] ?? '' });
      }
    }
  }
  return { definitions, generated };
}

describe('the SQL definitions', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db.drop());

  it('define every function of the migrated database once, as it runs, and none by another', async () => {
    const { definitions, generated } = definitionsInTree();
    expect(generated).toEqual([]);
    const functions = await db.admin<{ name: string; src: string }[]>`
      SELECT n.nspname || '.' || p.proname AS name, p.prosrc AS src
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
       WHERE n.nspname IN ('public', 'tally')
         AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
       ORDER BY 1`;
    const found = functions.map(({ name, src }) => {
      const mine = definitions.filter((d) => d.name === name);
      return { name, files: mine.map((d) => d.file), asRun: mine.length === 1 && mine[0]!.body === src };
    });
    expect(found).toEqual(found.map((f) => ({ ...f, files: [f.files[0]], asRun: true })));
    expect(found.every((f) => f.files.length === 1)).toBe(true);
    // And the tree defines nothing the database lacks (the Citus folder's only where Citus is).
    const names = new Set(functions.map((f) => f.name));
    const missing = definitions.filter(
      (d) => !names.has(d.name) && (onCitus || !d.file.startsWith('sql/extensions/citus/')),
    );
    expect(missing).toEqual([]);
    expect(functions.length).toBe(new Set(definitions.filter((d) => names.has(d.name)).map((d) => d.name)).size);
  });
});
