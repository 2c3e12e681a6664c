import postgres from 'postgres';
import { tsImport } from 'tsx/esm/api';
import stopWithoutCitus from './global-setup.mjs';

// The `on-citus` project: the main suite's files against Tally on a Citus coordinator. One
// cluster (a coordinator and two workers) for the run; each file gets a database of its own on
// it (tests/scale/harness/on-citus.ts), made and migrated as a deployment is. A first
// database made here creates the cluster-wide roles and sets the server login's password.
export default async function globalSetup() {
  await stopWithoutCitus();
  const { startCitusCluster } = await tsImport('./citus.ts', import.meta.url);
  const { migrate } = await tsImport('../../../gateway/db/migrate.ts', import.meta.url);
  const cluster = await startCitusCluster({ workers: 2 });
  globalThis.__TALLY_CITUS__ = cluster;
  const url = await cluster.createDatabase('tally_test_roles');
  await migrate(url);
  const authenticatorPassword = 'test-authenticator-' + Math.random().toString(36).slice(2);
  const owner = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await owner`SELECT tally.set_login_password('authenticator', ${authenticatorPassword})`;
  } finally {
    await owner.end();
  }
  process.env.TALLY_TEST_AUTHENTICATOR_PASSWORD = authenticatorPassword;
  process.env.TALLY_TEST_CLUSTER_URL = cluster.coordinator.url('postgres');
  process.env.TALLY_TEST_CITUS_WORKERS = cluster.workers.map((w) => w.port).join(',');
}
