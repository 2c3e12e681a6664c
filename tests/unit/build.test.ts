import { mkdir, mkdtemp, readFile, rm, stat, symlink, unlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packageRoot } from '../../gateway/paths.js';
import { BUILD_INFO, buildIfChanged as build, changedSince as changed } from '../../gateway/cli/build.mjs';

// `npm run build` (and so `npm start`) compiles only when a source changed since the last build:
// npm install builds dist/, and a start right after it compiled everything again.

let root: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'tally-build-'));
  // A project shaped as Tally is, three sources (b imports a), with the compiler of the repository.
  await mkdir(join(root, 'gateway'));
  await mkdir(join(root, 'mcp'));
  await writeFile(join(root, 'gateway/a.ts'), 'export const a: number = 1;\n');
  await writeFile(join(root, 'mcp/b.ts'), "import { a } from '../gateway/a.js';\nexport const b = a + 1;\n");
  await writeFile(join(root, 'mcp/c.ts'), 'export const c = 3;\n');
  await writeFile(join(root, 'package.json'), '{ "type": "module" }\n');
  const options = { module: 'NodeNext', target: 'ES2022', types: [], rootDir: '.', outDir: 'dist', strict: true };
  await writeFile(join(root, 'tsconfig.json'), JSON.stringify({ compilerOptions: options }));
  await writeFile(
    join(root, 'tsconfig.build.json'),
    JSON.stringify({
      extends: './tsconfig.json',
      compilerOptions: { incremental: true, tsBuildInfoFile: BUILD_INFO },
      include: ['gateway', 'mcp'],
    }),
  );
  await symlink(join(packageRoot, 'node_modules'), join(root, 'node_modules'));
});

afterEach(() => rm(root, { recursive: true, force: true }));

/** Each file's identity and time under dist/: a file tsc wrote again differs. */
async function written(...paths: string[]): Promise<string[]> {
  return Promise.all(
    paths.map(async (p) => {
      const s = await stat(join(root, 'dist', p));
      return `${p} ${s.mtimeMs}`;
    }),
  );
}

test('the repository builds incrementally, with its record where the build looks for it', async () => {
  const config = JSON.parse(await readFile(join(packageRoot, 'tsconfig.build.json'), 'utf8'));
  expect(config.compilerOptions).toMatchObject({ incremental: true, tsBuildInfoFile: BUILD_INFO });
  const pkg = JSON.parse(await readFile(join(packageRoot, 'package.json'), 'utf8'));
  expect(pkg.scripts).toMatchObject({ build: 'node gateway/cli/build.mjs' });
  expect(pkg.scripts.start).toMatch(/^npm run build --silent && node dist\/gateway\/cli\/main\.js up$/);
});

test('a fresh clone compiles; a second build compiles nothing; an edit compiles what it affects', async () => {
  const lines: string[] = [];
  const first = build(root, (line) => lines.push(line));
  expect([first.status, lines]).toEqual([0, ['Compiling the TypeScript into dist/ …']]);
  const before = await written('gateway/a.js', 'mcp/b.js', 'mcp/c.js');

  // What npm start runs right after npm install: no tsc at all.
  expect(build(root, (line) => lines.push(line))).toEqual({ changed: [], status: 0 });
  expect(lines).toHaveLength(1);
  expect(await written('gateway/a.js', 'mcp/b.js', 'mcp/c.js')).toEqual(before);

  // An edited source: it and the file importing it are compiled; the third is not written again.
  await writeFile(join(root, 'gateway/a.ts'), 'export const a: number = 2;\n');
  expect(build(root, (line) => lines.push(line))).toEqual({ changed: ['gateway/a.ts'], status: 0 });
  expect(lines[1]).toBe('Compiling into dist/ what changed since the last build (gateway/a.ts) …');
  const after = await written('gateway/a.js', 'mcp/b.js', 'mcp/c.js');
  expect(after.map((file, i) => file === before[i])).toEqual([false, false, true]);
  expect(await readFile(join(root, 'dist/gateway/a.js'), 'utf8')).toContain('export const a = 2;');
  expect(changed(root)).toEqual([]);

  // A type error fails the build, and the next build compiles again (and fails again).
  await writeFile(join(root, 'gateway/a.ts'), 'export const a: number = "two";\n');
  expect(build(root, () => {}, 'ignore').status).not.toBe(0);
  expect(changed(root)).toContain('gateway/a.ts');
});

test('what counts as a change: a newer source or setting, a removed file; not an older time', async () => {
  expect(changed(root)).toEqual([
    'gateway',
    'gateway/a.ts',
    'mcp',
    'mcp/b.ts',
    'mcp/c.ts',
    'tsconfig.json',
    'tsconfig.build.json',
    'package.json',
  ]);
  const at = (seconds: number) => new Date(Date.UTC(2020, 0, 1, 0, 0, seconds));
  await mkdir(join(root, 'dist'));
  await writeFile(join(root, BUILD_INFO), '{}');
  for (const path of [
    'gateway',
    'gateway/a.ts',
    'mcp',
    'mcp/b.ts',
    'mcp/c.ts',
    'tsconfig.json',
    'tsconfig.build.json',
    'package.json',
  ])
    await utimes(join(root, path), at(0), at(0));
  await utimes(join(root, BUILD_INFO), at(10), at(10));
  expect(changed(root)).toEqual([]);

  await utimes(join(root, 'mcp/b.ts'), at(20), at(20));
  await utimes(join(root, 'tsconfig.json'), at(20), at(20));
  expect(changed(root)).toEqual(['mcp/b.ts', 'tsconfig.json']);

  await utimes(join(root, 'mcp/b.ts'), at(5), at(5));
  await utimes(join(root, 'tsconfig.json'), at(5), at(5));
  await unlink(join(root, 'gateway/a.ts'));
  expect(changed(root)).toEqual(['gateway']);
});
