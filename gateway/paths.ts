import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// The package root holds sql/ and policies/. Code runs both from source (tests) and from
// dist/ (the bin), at different depths, so the root is found rather than assumed.
function findPackageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json')) || !existsSync(join(dir, 'sql'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('cannot find the Tally package root (package.json beside sql/)');
    dir = parent;
  }
  return dir;
}

export const packageRoot = findPackageRoot();
/** The SQL of the database: sql/gateway/, sql/app/ and sql/extensions/ (gateway/db/sql-sets.ts). */
export const sqlDir = join(packageRoot, 'sql');
export const policiesDir = join(packageRoot, 'policies');
