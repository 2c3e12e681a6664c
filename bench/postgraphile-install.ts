import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { packageRoot } from '../gateway/paths.js';

// PostGraphile 5, the benchmark's second reference, is no dependency of the project: it asks
// for Node 22, and as a dev dependency it made every `npm install` on Node 20 print some 75
// "Unsupported engine" warnings for a package only `npm run bench` uses. The benchmark
// installs it on first use into a folder of its own (under node_modules/.cache, so git and
// the project's lock file never see it) and runs bench/postgraphile.ts from there, where its
// imports resolve. It runs on Node 20 with one shim (bench/postgraphile.ts).

const VERSION = '5.1.5';
const DIR = join(packageRoot, 'node_modules', '.cache', 'tally-bench-postgraphile');

/** The path of the PostGraphile server script, installing PostGraphile first if needed. */
export async function postgraphileEntry(): Promise<string> {
  if (!existsSync(join(DIR, 'node_modules', 'postgraphile', 'package.json'))) {
    await mkdir(DIR, { recursive: true });
    const pgVersion = (JSON.parse(await readFile(join(packageRoot, 'package.json'), 'utf8')) as PackageJson)
      .dependencies.pg;
    await writeFile(
      join(DIR, 'package.json'),
      JSON.stringify(
        { private: true, type: 'module', dependencies: { postgraphile: VERSION, pg: pgVersion } },
        null,
        2,
      ),
    );
    process.stdout.write(`Installing PostGraphile ${VERSION} for case (g) into ${DIR} (first run only)…\n`);
    const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], {
      cwd: DIR,
      encoding: 'utf8',
    });
    if (r.status !== 0) throw new Error(`npm install postgraphile@${VERSION} failed: ${(r.stderr || r.stdout).trim()}`);
  }
  const entry = join(DIR, 'postgraphile.js');
  await copyFile(join(packageRoot, 'dist', 'bench', 'postgraphile.js'), entry);
  return entry;
}

interface PackageJson {
  dependencies: Record<string, string>;
}
