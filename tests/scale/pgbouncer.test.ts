import postgres from 'postgres';
import { accessToken } from '../harness/app.js';
import { apiSwitchAcross, rateLimitAcross, revocationAcross, surfaces } from '../harness/access-checks.js';
import { tokenFor, workspaceWithData, type WorkspaceFixture } from '../harness/fixtures.js';
import { sigtermUnderLoad, writtenUnderLoad } from '../harness/drain.js';
import { expectWithinBound, liveChangeTimes } from '../harness/live-changes.js';
import { TEST_API_KEY } from '../harness/rest.js';
import { startServers, type Servers } from '../harness/servers.js';
import { waitFor } from '../harness/wait.js';
import { startPgBouncer, type PgBouncerSetup } from './harness/pgbouncer.js';

// Three Tally processes behind Debian's PgBouncer in transaction mode (the set-up of docs/deployment.md): the
// access checks, live changes and SIGTERM under load as on one Postgres (tests/processes*.ts), and
// Tally in front of a hot standby. With prepared statements left on (the default), a pooler
// that hands each transaction another server connection answered a valid token 401, 500s and
// stalls: it is detected at start-up and they are switched off.

describe('three Tally processes behind PgBouncer in transaction mode', () => {
  let pg: PgBouncerSetup;
  let servers: Servers;
  let ws: WorkspaceFixture;

  beforeAll(async () => {
    pg = await startPgBouncer();
    ws = await workspaceWithData(pg.admin, 'bouncer');
    servers = await startServers(3, pg.ownerUrl, { TALLY_PUBLISHABLE_KEYS: TEST_API_KEY }, pg.bouncerUrl);
  });
  afterAll(async () => {
    await servers?.close();
    await pg?.stop();
  });

  it('say at start-up that the connection goes through a pooler, and switch prepared statements off', async () => {
    // The log is written in batches: the line may follow "Tally is up".
    for (let i = 0; i < servers.output.length; i++)
      await waitFor(
        async () => /goes through a pooler.*prepared statements are off/.test(servers.output[i]!),
        `process ${i} to say it goes through a pooler`,
      );
  });

  it('count one rate limit: of 90 requests of one token, exactly 60 succeed and 30 get 429 with Retry-After', async () => {
    expect(await rateLimitAcross(pg.admin, servers.bases, ws.id)).toEqual({
      ok: 60,
      limited: 30,
      retryAfter: 30,
      other: [],
    });
  });

  it('refuse a revoked token and a switched-off workspace on the very next request, everywhere', async () => {
    await revocationAcross(pg.admin, servers.bases, ws.id);
    await apiSwitchAcross(pg.admin, servers.bases, ws.id);
  });

  describe('with a limit their load stays under', () => {
    // Processes of their own: those above keep the default of 60 a minute, which the rate limit
    // check counts on; the probes below ask every 20 ms, and the load writes as fast as it can.
    let busy: Servers;
    const headersOf = async (scope: 'read' | 'write') => {
      const t = await tokenFor(pg.admin, ws.id, scope);
      const jwt = await accessToken({ role: `api_${scope}`, workspace_id: ws.id, scope, sub: t.id });
      return { apikey: TEST_API_KEY, authorization: `Bearer ${jwt}` };
    };

    beforeAll(async () => {
      busy = await startServers(
        3,
        pg.ownerUrl,
        { TALLY_PUBLISHABLE_KEYS: TEST_API_KEY, TALLY_RATE_LIMIT_PER_MINUTE: '1000000' },
        pg.bouncerUrl,
      );
    });
    afterAll(async () => {
      await busy?.close();
    });

    it('see a new category and payment method, a new column and a new table within the bound', async () => {
      expectWithinBound(await liveChangeTimes(pg.admin, busy.bases, await headersOf('read'), 'bouncer'));
    });

    it('lose no request when one of them gets SIGTERM under keep-alive load', async () => {
      const outcome = await sigtermUnderLoad(busy, {
        ...(await headersOf('write')),
        'content-type': 'application/json',
        prefer: 'return=minimal',
      });
      expect(outcome.lost).toEqual([]);
      expect(outcome.code).toBe(0);
      expect(outcome.refused).toBeGreaterThan(0); // the process did stop while the load ran
      expect(await writtenUnderLoad(pg.admin, ws.id)).toBe(outcome.acknowledged);
    });
  });
});

describe('Tally and a hot standby', () => {
  let pg: PgBouncerSetup;
  let standbyPort: number;
  let ws: WorkspaceFixture;
  const started: Servers[] = [];

  beforeAll(async () => {
    pg = await startPgBouncer();
    ws = await workspaceWithData(pg.admin, 'standby');
    standbyPort = await pg.startStandby();
  });
  afterAll(async () => {
    for (const s of started) await s.close();
    await pg?.stop();
  });

  const loginTo = (hosts: string, query = '') => pg.directUrl.replace(/@[^/]+\//, `@${hosts}/`) + query;

  it('on the standby alone: 503 TLY003 on every surface, and /readyz not ready', async () => {
    const servers = await startServers(
      1,
      pg.ownerUrl,
      { TALLY_PUBLISHABLE_KEYS: TEST_API_KEY },
      loginTo(`127.0.0.1:${standbyPort}`),
    );
    started.push(servers);
    const t = await tokenFor(pg.admin, ws.id, 'write');
    // Once the token reached the standby by replication.
    const standby = postgres(`postgres://postgres@127.0.0.1:${standbyPort}/tally`, { max: 1, onnotice: () => {} });
    try {
      await waitFor(
        async () => (await standby`SELECT 1 FROM public.api_tokens WHERE id = ${t.id}`).length === 1,
        'the token on the standby',
      );
    } finally {
      await standby.end();
    }
    const s = surfaces(servers.bases[0]!);
    const jwt = await accessToken({ role: 'api_write', workspace_id: ws.id, scope: 'write', sub: t.id });
    for (const res of [await s.rest(jwt), await s.wrapper(jwt), await s.mcp(t.token), await s.exchange(t.token)])
      expect(res).toEqual({ status: 503, body: expect.objectContaining({ code: 'TLY003' }) });
    const ready = await fetch(`${servers.bases[0]}/readyz`);
    expect([ready.status, ((await ready.json()) as { status: string }).status]).toEqual([503, 'read-only']);
  });

  it('with the standby first and target_session_attrs=read-write: served by the primary', async () => {
    const servers = await startServers(
      1,
      pg.ownerUrl,
      { TALLY_PUBLISHABLE_KEYS: TEST_API_KEY },
      loginTo(`127.0.0.1:${standbyPort},127.0.0.1:${pg.primaryPort}`, '?target_session_attrs=read-write'),
    );
    started.push(servers);
    const t = await tokenFor(pg.admin, ws.id, 'write');
    const s = surfaces(servers.bases[0]!);
    expect((await s.exchange(t.token)).status).toBe(200);
    const jwt = await accessToken({ role: 'api_write', workspace_id: ws.id, scope: 'write', sub: t.id });
    for (let i = 0; i < 5; i++) expect((await s.rest(jwt)).status).toBe(200);
    expect((await fetch(`${servers.bases[0]}/readyz`)).status).toBe(200);
  });
});
