import { tsImport } from 'tsx/esm/api';

// The scale suite needs Citus 13 in Debian's PostgreSQL 15: without it, one line saying what is
// missing, and the run stops before any file starts a server.
export default async function globalSetup() {
  const { citusMissing } = await tsImport('./citus.ts', import.meta.url);
  const missing = citusMissing();
  if (missing) {
    process.stderr.write(missing + '\n');
    process.exit(1);
  }
}
