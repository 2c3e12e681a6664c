// `npm run build` (and so `npm start`, `npm test`, the bench): compiles the TypeScript into
// dist/ only when a source changed since the last build. npm install builds dist/ already, and
// compiling it again at every start took most of the time to the banner. When something did
// change, tsc's incremental build (tsconfig.build.json) compiles what that change affects.
// Plain JavaScript: it runs before there is a dist/ to run.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, utimesSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** What dist/ is built from: tsc's inputs and settings. A folder counts too (a file removed). */
const SOURCES = [
  'gateway',
  'mcp',
  'bench',
  'tsconfig.json',
  'tsconfig.build.json',
  'package.json',
  'package-lock.json',
];

/** tsc's record of the last build (tsconfig.build.json); its time is when that build began. */
export const BUILD_INFO = 'dist/.tsbuildinfo';

/**
 * The sources under `root` changed since dist/ was last built (all of them when it never was),
 * by modification time: a checkout, an edit or a removal makes a build, nothing else does.
 */
export function changedSince(root) {
  const info = join(root, BUILD_INFO);
  const built = existsSync(info) ? statSync(info).mtimeMs : -Infinity;
  const changed = [];
  const visit = (path) => {
    if (!existsSync(join(root, path))) return;
    const stat = statSync(join(root, path));
    if (stat.mtimeMs > built) changed.push(path);
    if (stat.isDirectory()) for (const name of readdirSync(join(root, path))) visit(join(path, name));
  };
  for (const source of SOURCES) visit(source);
  return changed;
}

/**
 * Builds dist/ under `root` if a source changed: returns what changed (nothing: no build) and
 * tsc's exit status. tsc writes its errors to `stdio`.
 */
export function buildIfChanged(root, log = console.log, stdio = 'inherit') {
  const changed = changedSince(root);
  if (changed.length === 0) return { changed, status: 0 };
  const began = new Date();
  const info = join(root, BUILD_INFO);
  const files = changed.filter((path) => !statSync(join(root, path)).isDirectory());
  const named = files.slice(0, 3).join(', ') + (files.length > 3 ? ` and ${files.length - 3} more` : '');
  log(
    existsSync(info)
      ? `Compiling into dist/ what changed since the last build${named ? ` (${named})` : ''} …`
      : 'Compiling the TypeScript into dist/ …',
  );
  const tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc');
  const { status } = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: root, stdio });
  // The record's time says when the sources were last built: a source saved while tsc ran is
  // newer, and makes the next build; after an error, the next run compiles again (and says it).
  if (existsSync(info)) utimesSync(info, status === 0 ? began : 0, status === 0 ? began : 0);
  return { changed, status: status ?? 1 };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.exitCode = buildIfChanged(process.cwd()).status;
