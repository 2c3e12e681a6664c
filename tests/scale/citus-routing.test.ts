import postgres, { type Sql } from 'postgres';
import request from 'supertest';
import type { AppContext } from '../../gateway/context.js';
import { migrate } from '../../gateway/db/migrate.js';
import { createApp, type App } from '../../gateway/server.js';
import { TENANT_TABLES, tokenFor, workspaceWithData, type WorkspaceFixture } from '../harness/fixtures.js';
import { callEveryTool } from '../harness/mcp-tools.js';
import { tools } from '../../mcp/tools.js';
import { TEST_API_KEY } from '../harness/rest.js';
import { startCitusCluster, type CitusCluster } from './harness/citus.js';
import { coordinatorContext } from './harness/coordinator.js';

/** The tenant tables with the workspace policy; the activity log has policies of its own. */
const WORKSPACE_POLICY = TENANT_TABLES.filter((t) => t !== 'activity');

// One workspace, one shard: every statement Tally sends for one workspace's request runs on
// that workspace's shard alone, proven from Citus itself, three ways:
//
// - the plan: each statement a request sent (captured from the driver) is EXPLAINed on the
//   coordinator, as the role and with the claims it ran under; every Citus scan in it must have
//   Task Count 1;
// - what ran: the coordinator logs every command it sends to a worker
//   (citus.log_remote_commands); every shard of a distributed table named there must be the
//   workspace's own;
// - the guard: citus.multi_task_query_log_level = 'error' for the server's login and the API
//   roles (whose sessions on the workers run the shard queries) makes any statement that would
//   run on several shards fail, also the ones inside functions (the pre-request check, the token
//   exchange, the rate limit, fund_summary, the computed fields on the workers), so each request
//   below succeeding is itself the proof that none did.
//
// And the API roles, which Citus logs in to the workers as, can do there nothing more than
// through Tally.

const DB = 'tally_route';

let cluster: CitusCluster;
let ownerUrl: string;
let owner: Sql;
let app: App;
let ctx: AppContext;
let a: WorkspaceFixture;
let b: WorkspaceFixture;
let writeA: { id: string; token: string };
let jwtA: string;

/** A statement Tally sent, with the role and claims of its transaction (none outside one). */
interface Sent {
  text: string;
  params: unknown[];
  role: string;
  claims: string | undefined;
}
let sent: Sent[] = [];
let remote: string[] = [];
const transactions = new Map<unknown, { role: string; claims: string | undefined }>();

/** Every statement the pool sends, in the transaction it belongs to (see Sent). */
function record(connection: unknown, text: string, params: unknown[]): void {
  if (/^BEGIN\b/.test(text)) transactions.set(connection, { role: 'authenticator', claims: undefined });
  else if (/^(COMMIT|ROLLBACK)$/.test(text)) transactions.delete(connection);
  else if (text.startsWith(`SELECT FROM (SELECT pg_catalog.set_config('role'`)) {
    const t = transactions.get(connection);
    if (t) t.role = String(params[0]);
  } else if (text.startsWith('SET LOCAL request.jwt.claims')) {
    const t = transactions.get(connection);
    if (t) t.claims = text;
  } else {
    const t = transactions.get(connection) ?? { role: 'authenticator', claims: undefined };
    sent.push({ text, params, role: t.role, claims: t.claims });
  }
}

beforeAll(async () => {
  cluster = await startCitusCluster({ workers: 2 });
  ownerUrl = await cluster.createDatabase(DB);
  await migrate(ownerUrl);
  owner = postgres(ownerUrl, { max: 2, onnotice: () => {} });
  a = await workspaceWithData(owner, 'Route A');
  b = await workspaceWithData(owner, 'Route B');
  writeA = await tokenFor(owner, a.id, 'write');
  // The guard: a statement Citus would run as several tasks is an error, for the server's login
  // on the coordinator and the API roles' sessions on the workers (Citus copies role settings).
  for (const role of ['authenticator', 'anon', 'api_read', 'api_write'])
    await owner.unsafe(`ALTER ROLE ${role} SET citus.multi_task_query_log_level = 'error'`);
  ctx = coordinatorContext(ownerUrl, {
    acquireTimeoutMs: 10_000,
    onNotice: (message) => {
      if (message.startsWith('issuing ')) remote.push(message);
    },
    debug: (connection, text, params) => record(connection, text, params),
  });
  app = createApp(ctx);
  const exchanged = await request(app).post('/api/v1/token').set('Authorization', `Bearer ${writeA.token}`).expect(200);
  jwtA = exchanged.body.access_token as string;
}, 600_000);

afterAll(async () => {
  await ctx?.db.end({ timeout: 5 });
  await owner?.end();
  await cluster?.stop();
});

/** The shards of workspace `ws`: one per distributed table. */
async function shardsOf(ws: string): Promise<Set<string>> {
  const rows = await owner<{ shard: string }[]>`
    SELECT get_shard_id_for_distribution_column(logicalrelid, ${ws}::uuid)::text AS shard
      FROM pg_dist_partition WHERE partmethod = 'h'`;
  return new Set(rows.map((r) => r.shard));
}

/** Every shard id of a distributed table named in the commands sent to the workers. */
async function distributedShardsNamed(commands: string[]): Promise<string[]> {
  const ids = [...new Set(commands.flatMap((c) => [...c.matchAll(/\b[a-z_]+_(\d{6,})\b/g)].map((m) => m[1]!)))];
  if (ids.length === 0) return [];
  const rows = await owner<{ shard: string }[]>`
    SELECT s.shardid::text AS shard FROM pg_dist_shard s JOIN pg_dist_partition p USING (logicalrelid)
     WHERE p.partmethod = 'h' AND s.shardid = ANY(${ids}::bigint[])`;
  return rows.map((r) => r.shard);
}

/** The Task Count of every Citus scan in the plan of a statement, as it ran (role, claims, values). */
async function taskCounts(s: Sent): Promise<number[]> {
  const plan = await owner
    .begin(async (tx) => {
      await tx.unsafe(`SET LOCAL ROLE ${s.role}`);
      if (s.claims) await tx.unsafe(s.claims);
      const [row] = await tx.unsafe(`EXPLAIN (FORMAT JSON) ${s.text}`, s.params as never[]);
      throw Object.assign(new Error('rollback'), { plan: row?.['QUERY PLAN'] });
    })
    .catch((err: { plan?: unknown }) => {
      if (err.plan === undefined) throw err;
      return err.plan;
    });
  const counts: number[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if (k === 'Task Count' && typeof x === 'number') counts.push(x);
        walk(x);
      }
    }
  };
  walk(typeof plan === 'string' ? JSON.parse(plan) : plan);
  return counts;
}

const rest = (method: 'get' | 'post' | 'patch' | 'delete', path: string) => {
  const agent = request(app);
  return agent[method](`/rest/v1/${path}`).set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwtA}` });
};

const mcp = (name: string, args: Record<string, unknown> = {}) =>
  request(app)
    .post(`/mcp?token=${writeA.token}`)
    .set({ Accept: 'application/json, text/event-stream', 'Content-Type': 'application/json' })
    .send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }));

/**
 * Runs one request of workspace A and proves it single-shard: it succeeds (so the guard let
 * every statement through), each statement's plan has only Task Count 1, and the commands sent
 * to the workers name A's shards alone. Answers what the proof saw, for the test to check more.
 */
async function singleShard(
  what: string,
  send: () => Promise<request.Response>,
): Promise<{ res: request.Response; statements: Sent[]; routed: number }> {
  sent = [];
  remote = [];
  const res = await send();
  expect({ what, status: res.status < 400 ? 'ok' : res.status, body: res.status < 400 ? '' : res.text }).toEqual({
    what,
    status: 'ok',
    body: '',
  });
  if (typeof res.body === 'object' && res.body?.result?.isError)
    throw new Error(`${what}: ${JSON.stringify(res.body)}`);
  const statements = sent;
  const own = await shardsOf(a.id);
  const named = await distributedShardsNamed(remote);
  expect({ what, foreign: named.filter((s) => !own.has(s)) }).toEqual({ what, foreign: [] });
  let routed = 0;
  for (const s of statements.filter((x) => /^(SELECT|WITH|INSERT|UPDATE|DELETE)\b/i.test(x.text))) {
    const counts = await taskCounts(s);
    expect({ what, statement: s.text.slice(0, 120), counts: counts.filter((n) => n !== 1) }).toEqual({
      what,
      statement: s.text.slice(0, 120),
      counts: [],
    });
    if (counts.length > 0) routed++;
  }
  return { res, statements, routed };
}

describe('every statement of one workspace’s request runs on that workspace’s shard', () => {
  test('the token exchange, the rate limit and the pre-request check', async () => {
    const { statements } = await singleShard('token exchange', () =>
      request(app).post('/api/v1/token').set('Authorization', `Bearer ${writeA.token}`),
    );
    expect(statements.length).toBeGreaterThan(0);
    // The pre-request check runs in every request's transaction (each request below runs it too).
    const { statements: read } = await singleShard('list read', () => rest('get', 'contacts?select=name'));
    expect(read.some((s) => s.text.includes('check_request'))).toBe(true);
  });

  test('reads: a list, a record by id, a fund with its transactions and figures embedded', async () => {
    const list = await singleShard('list read', () =>
      rest('get', 'personal_transactions?select=name,amount&order=occurred_at.desc&limit=5'),
    );
    expect(list.routed).toBeGreaterThan(0);
    expect(list.res.body).toEqual([{ name: 'Route A lunch', amount: 12.5 }]);
    const byId = await singleShard('record by id', () => rest('get', `funds?id=eq.${a.fundId}&select=id,name`));
    expect(byId.res.body).toEqual([{ id: a.fundId, name: 'Route A fund' }]);
    const embedded = await singleShard('fund with transactions', () =>
      rest(
        'get',
        `funds?id=eq.${a.fundId}&select=name,balance,summary,fund_transactions(name,amount),fund_participants(contacts(name))`,
      ),
    );
    expect(embedded.res.body).toEqual([
      {
        name: 'Route A fund',
        balance: 100,
        summary: expect.objectContaining({ balance: 100, income: 100, participant_count: 1 }),
        fund_transactions: [{ name: 'Contribution', amount: 100 }],
        fund_participants: [{ contacts: { name: 'Route A contact' } }],
      },
    ]);
  });

  test('writes: insert, bulk insert, upsert, PATCH (max-affected held) and DELETE', async () => {
    const expense = { amount: 4, category_id: 'food-drinks', method_id: 'cash' };
    const one = await singleShard('insert', () =>
      rest('post', 'personal_transactions?select=id,name')
        .set('Prefer', 'return=representation')
        .send({ ...expense, name: 'Tea' }),
    );
    const id = one.res.body[0].id as string;
    await singleShard('bulk insert', () =>
      rest('post', 'personal_transactions').send([
        { ...expense, name: 'Bulk 1' },
        { ...expense, name: 'Bulk 2' },
      ]),
    );
    const up = await singleShard('upsert', () =>
      rest('post', 'personal_transactions?on_conflict=workspace_id,id&select=name')
        .set('Prefer', 'return=representation,resolution=merge-duplicates')
        .send([{ ...expense, id, name: 'Tea, upserted' }]),
    );
    expect(up.res.body).toEqual([{ name: 'Tea, upserted' }]);
    await singleShard('PATCH', () => rest('patch', `personal_transactions?id=eq.${id}`).send({ note: 'patched' }));
    const refused = await rest('patch', 'personal_transactions?name=like.Bulk*')
      .set('Prefer', 'handling=strict, max-affected=1')
      .send({ note: 'too many' });
    expect(refused.status).toBe(400);
    const bulk = await owner`SELECT count(*)::int AS n FROM personal_transactions WHERE note = 'too many'`;
    expect(bulk[0]!.n).toBe(0);
    await singleShard('DELETE', () => rest('delete', `personal_transactions?id=eq.${id}`));
    const rows = await owner`SELECT count(*)::int AS n FROM personal_transactions WHERE id = ${id}`;
    expect(rows[0]!.n).toBe(0);
  });

  test('rpc: fund_summary, fund_summaries and spending_summary', async () => {
    const one = await singleShard('rpc/fund_summary', () =>
      rest('post', 'rpc/fund_summary').send({ fund_id: a.fundId }),
    );
    expect(one.res.body).toMatchObject({ fund_id: a.fundId, balance: 100 });
    await singleShard('rpc/fund_summaries', () => rest('get', 'rpc/fund_summaries?order=balance.desc'));
    await singleShard('rpc/spending_summary', () => rest('post', 'rpc/spending_summary').send({}));
  });

  test('each MCP tool', async () => {
    const called = await callEveryTool(a, async (name, args) => {
      const { res } = await singleShard(`MCP ${name}`, () => mcp(name, args));
      return res.body.result.structuredContent as Record<string, unknown>;
    });
    expect(called).toHaveLength(tools.length);
  });

  test("another workspace's rows stay out of reach on the coordinator", async () => {
    const res = await rest('get', `funds?id=eq.${b.fundId}&select=id`).expect(200);
    expect(res.body).toEqual([]);
  });
});

describe('the API roles on the workers', () => {
  test('log in only with the secret the deployment made, which no API role can read', async () => {
    const worker = cluster.workers[0]!;
    const [info] = await owner<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_dist_authinfo WHERE nodeid = 0`;
    expect(info!.n).toBeGreaterThanOrEqual(3);
    for (const role of ['api_read', 'api_write', 'authenticator']) {
      await expect(
        owner.begin(async (tx) => {
          await tx.unsafe(`SET LOCAL ROLE ${role}`);
          return tx`SELECT authinfo FROM pg_dist_authinfo`;
        }),
      ).rejects.toMatchObject({ code: '42501' });
    }
    // The workers' servers require a password of these roles (the harness trusts every login:
    // the line is made here, as a deployment's pg_hba.conf has it).
    const hba = postgres(worker.url(DB), { max: 1, onnotice: () => {} });
    await hba.unsafe(
      `COPY (SELECT 'host all anon,api_read,api_write 127.0.0.1/32 scram-sha-256' UNION ALL SELECT 'host all all 127.0.0.1/32 trust') TO '${worker.dataDir}/pg_hba.conf'`,
    );
    await hba`SELECT pg_reload_conf()`;
    await hba.end();
    const guess = postgres(`postgres://api_write:api_write@127.0.0.1:${worker.port}/${DB}`, {
      max: 1,
      onnotice: () => {},
      connect_timeout: 5,
    });
    await expect(guess`SELECT 1`).rejects.toMatchObject({ code: '28P01' });
    await guess.end();
    // Tally still runs: the coordinator takes the secret from pg_dist_authinfo.
    await singleShard('list read with passwords required', () => rest('get', 'funds?select=name'));
  });

  test('logged in on a worker, an API role meets forced RLS on every shard and no extra grant', async () => {
    const worker = cluster.workers[0]!;
    const [row] = await owner<
      { authinfo: string }[]
    >`SELECT authinfo FROM pg_dist_authinfo WHERE rolename = 'api_write' AND nodeid = 0`;
    const password = /password=(\S+)/.exec(row!.authinfo)![1]!;
    // Citus hides shards from a client's catalog queries; shown here to check each of them.
    const sql = postgres(`postgres://api_write:${password}@127.0.0.1:${worker.port}/${DB}`, {
      max: 1,
      onnotice: () => {},
      connection: { 'citus.override_table_visibility': 'off' },
    });
    try {
      const shards = await sql<{ name: string; rls: boolean; forced: boolean }[]>`
        SELECT c.relname AS name, c.relrowsecurity AS rls, c.relforcerowsecurity AS forced
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname ~ ${'^(' + WORKSPACE_POLICY.join('|') + ')_[0-9]+$'}`;
      expect(shards.length).toBeGreaterThan(0);
      expect(shards.filter((s) => !s.rls || !s.forced)).toEqual([]);
      // Without claims no row of any shard; the internal tables' shards are not readable at all.
      for (const s of shards) expect(await sql.unsafe(`SELECT * FROM public.${s.name}`)).toHaveLength(0);
      const internal = await sql<{ name: string }[]>`
        SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname ~ '^(workspaces|api_tokens|user_credentials|workspace_members|billing_accounts)(_[0-9]+)?$'
           AND has_table_privilege(c.oid, 'SELECT')`;
      expect(internal).toEqual([]);
    } finally {
      await sql.end();
    }
  });
});
