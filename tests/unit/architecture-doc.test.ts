import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { packageRoot } from '../../gateway/paths.js';
import { OPERATOR_NAMES } from '../../gateway/engine/operators.js';
import { section } from '../harness/docs.js';

// docs/architecture.md is the map a contributor follows: these hold the claims of it that a test
// can check to the code, so a file moved or a recipe grown leaves the document failing, not wrong.

const DOC = 'docs/architecture.md';
const root = packageRoot;
const text = readFileSync(join(root, DOC), 'utf8');

/** Every file of the repository's sources, tests and docs, by path from the root. */
function files(dir = '', found: string[] = []): string[] {
  for (const d of readdirSync(join(root, dir), { withFileTypes: true })) {
    const path = dir ? `${dir}/${d.name}` : d.name;
    if (['node_modules', 'dist', '.git', '.tally'].includes(d.name)) continue;
    if (d.isDirectory()) files(path, found);
    else found.push(path);
  }
  return found;
}
const ALL = files();
const NAMES = new Set(ALL.map((p) => basename(p)));

/** The places a path of the document is written from: the root, or the folder of its section. */
const BASES = [
  '',
  'gateway/',
  'gateway/engine/',
  'sql/',
  'sql/app/',
  'sql/extensions/citus/',
  'tests/unit/',
  'mcp/',
  'mcp/tools/',
];

/** The code spans of a text that name a file or folder of the repository (not a URL path, not a pattern). */
const pathsIn = (t: string): string[] =>
  [...t.matchAll(/`([^`\s]+)`/g)]
    .map((m) => m[1]!)
    .filter((p) => /^[\w.-]+(\/[\w.-]*)*$/.test(p) && (p.includes('/') || /\.(ts|sql|md|cjs|json)$/.test(p)))
    .filter((p) => !p.startsWith('/') && !/^NNN|^\d{3}_|the_table/.test(basename(p)));

const exists = (p: string): boolean =>
  p.includes('/') ? BASES.some((b) => existsSync(join(root, b + p))) : NAMES.has(p);

/** The number a word of the document says. */
const NUMBERS = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten'].concat([
  'eleven',
  'twelve',
  'thirteen',
  'fourteen',
  'fifteen',
  'sixteen',
  'seventeen',
  'eighteen',
  'nineteen',
  'twenty',
]);

describe('docs/architecture.md', () => {
  it('names only files and folders that exist', () => {
    expect(ALL.length).toBeGreaterThan(100);
    expect(pathsIn(text).filter((p) => !exists(p))).toEqual([]);
  });

  it('counts the files a new table touches from its own table of them', () => {
    const recipe = section(DOC, '### add a resource to /api/v1');
    const said = /touches (\w+) files/.exec(recipe);
    expect(said).not.toBeNull();
    const rows = recipe.split('\n').filter((l) => l.startsWith('| `'));
    const listed = rows.flatMap((row) => [...row.split('|')[1]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!));
    expect(new Set(listed).size).toBe(listed.length);
    expect(NUMBERS.indexOf(said![1]!)).toBe(listed.length);
  });

  it('is right that the grammar reads the operator table: it names no operator but in and is', () => {
    expect(section(DOC, '### add a filter operator')).toMatch(/the grammar, .* all read the table/s);
    // Without the kinds of value it reads (`kind: 'fts'`), which are not operators.
    const grammar = readFileSync(join(root, 'gateway/engine/request/grammar.ts'), 'utf8').replace(/kind: '\w+'/g, '');
    const named = OPERATOR_NAMES.filter((op) => op !== 'in' && op !== 'is' && grammar.includes(`'${op}'`));
    expect(named).toEqual([]);
  });
});
