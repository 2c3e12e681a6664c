import { randomBytes } from 'node:crypto';
import postgres, { type Sql } from 'postgres';
import { migrate } from '../../gateway/db/migrate.js';
import { accessToken } from '../harness/app.js';
import { apiSwitchAcross, rateLimitAcross, revocationAcross } from '../harness/access-checks.js';
import { tokenFor, workspaceWithData, type WorkspaceFixture } from '../harness/fixtures.js';
import { expectWithinBound, liveChangeTimes } from '../harness/live-changes.js';
import { TEST_API_KEY } from '../harness/rest.js';
import { startServers, type Servers } from '../harness/servers.js';
import { startCitusCluster, type CitusCluster } from './harness/citus.js';

// Three `tally serve` processes on a Citus coordinator with two workers, as a deployment behind a
// load balancer runs them: the same checks as on one Postgres (tests/processes*.test.ts) and
// behind PgBouncer (pgbouncer.test.ts). The rate-limit counters, tokens and workspaces are read
// and written through the coordinator by every process, and the change version is polled there.

const DB = 'tally_processes';

let cluster: CitusCluster;
let url: string;
let admin: Sql;
let ws: WorkspaceFixture;

beforeAll(async () => {
  cluster = await startCitusCluster({ workers: 2 });
  url = await cluster.createDatabase(DB);
  await migrate(url);
  admin = postgres(url, { max: 2, onnotice: () => {} });
  // The processes log in as authenticator, as `tally serve` does (startServers: serverUrl).
  process.env.TALLY_TEST_AUTHENTICATOR_PASSWORD = randomBytes(18).toString('base64url');
  await admin`SELECT tally.set_login_password('authenticator', ${process.env.TALLY_TEST_AUTHENTICATOR_PASSWORD})`;
  ws = await workspaceWithData(admin, 'citus-processes');
});
afterAll(async () => {
  await admin?.end({ timeout: 5 });
  await cluster?.stop();
});

describe('three Tally processes on a Citus coordinator', () => {
  let servers: Servers;

  beforeAll(async () => {
    // The server's default limit (60 a minute), which the rate limit check counts on.
    servers = await startServers(3, url, { TALLY_PUBLISHABLE_KEYS: TEST_API_KEY });
  });
  afterAll(async () => {
    await servers?.close();
  });

  it('count one rate limit: of 90 requests of one token, exactly 60 succeed and 30 get 429 with Retry-After', async () => {
    expect(await rateLimitAcross(admin, servers.bases, ws.id)).toEqual({
      ok: 60,
      limited: 30,
      retryAfter: 30,
      other: [],
    });
  });

  it('refuse a revoked token and a switched-off workspace on the very next request, everywhere', async () => {
    await revocationAcross(admin, servers.bases, ws.id);
    await apiSwitchAcross(admin, servers.bases, ws.id);
  });
});

describe('three Tally processes on a Citus coordinator, probed for changes', () => {
  let servers: Servers;

  beforeAll(async () => {
    // A limit the probes (every 20 ms, one token, one address) stay under.
    servers = await startServers(3, url, {
      TALLY_PUBLISHABLE_KEYS: TEST_API_KEY,
      TALLY_RATE_LIMIT_PER_MINUTE: '100000',
    });
  });
  afterAll(async () => {
    await servers?.close();
  });

  it('see a new category and payment method, a new column and a new table within the bound', async () => {
    const t = await tokenFor(admin, ws.id, 'read');
    const jwt = await accessToken({ role: 'api_read', workspace_id: ws.id, scope: 'read', sub: t.id });
    const times = await liveChangeTimes(
      admin,
      servers.bases,
      { apikey: TEST_API_KEY, authorization: `Bearer ${jwt}` },
      'citus',
    );
    expectWithinBound(times);
  });
});
