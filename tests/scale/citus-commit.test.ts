import postgres, { type Sql, type TransactionSql } from 'postgres';
import request from 'supertest';
import type { AppContext } from '../../gateway/context.js';
import { migrate } from '../../gateway/db/migrate.js';
import { createApp, type App } from '../../gateway/server.js';
import { sqlState } from '../harness/db.js';
import { tokenFor, workspaceWithData, type WorkspaceFixture } from '../harness/fixtures.js';
import { TEST_API_KEY } from '../harness/rest.js';
import { startCitusCluster, type CitusCluster } from './harness/citus.js';
import { coordinatorContext } from './harness/coordinator.js';

// One workspace's write commits on its shard in one phase. Citus commits a transaction that
// wrote through more than one connection, or through its coordinator's COPY of intermediate
// results (the plan of an INSERT … SELECT whose source is not a table), in two phases: PREPARE
// TRANSACTION on each worker, a row in the coordinator's pg_dist_transaction, COMMIT PREPARED;
// several round trips more per request. Proven here from Citus itself, two ways: the commands
// the coordinator sent to the workers (citus.log_remote_commands) hold no PREPARE TRANSACTION,
// and pg_dist_transaction gains no row (its clean-up, which deletes rows, is switched off for
// the run). An array of rows, which still commits in two phases, shows that both would see one.
//
// And a one-row insert is one statement to Citus: planned as a whole and sent to the shard, not
// split into an INSERT whose rows the coordinator keeps as an intermediate result and a query
// over them it runs itself (what Citus does with any INSERT inside a WITH). Citus says which
// it did: with citus.log_intermediate_results it reports each subplan's result as it plans it.
//
// And no statement of a request runs through Citus's local execution, where a statement naming
// a Citus table inside a function goes and is deparsed and planned anew on every call, several
// times the cost of the statement. Citus says when it runs one so: with
// citus.log_local_commands on every node, each is a notice, which the coordinator passes on.
// An insert's activity trigger writes the local shard of activity by EXECUTE; the pre-request
// check on the coordinator and the category trigger on the worker read the one shard of each
// table they read (api_tokens, workspaces; categories, payment_methods) through the view of it
// that tally.bind_shards() (sql/extensions/citus/) puts first in their search path, without a
// look-up of it: the worker calls
// tally.local_shard once per insert, for activity (Postgres counts a transaction's function
// calls with track_functions on).

const DB = 'tally_commit';

let cluster: CitusCluster;
let owner: Sql;
let app: App;
let ctx: AppContext;
let a: WorkspaceFixture;
let writeA: { id: string; token: string };
let jwtA: string;
let remote: string[] = [];
let subplans: string[] = [];
let local: string[] = [];

beforeAll(async () => {
  cluster = await startCitusCluster({ workers: 2 });
  const ownerUrl = await cluster.createDatabase(DB);
  await migrate(ownerUrl);
  owner = postgres(ownerUrl, { max: 2, onnotice: () => {} });
  // For the sessions that open after this one, on every node: Citus passes it on to the
  // workers' copies of the database.
  await owner.unsafe(`ALTER DATABASE ${DB} SET citus.log_local_commands = on`);
  // Function calls counted (pg_stat_get_xact_function_calls), on every node.
  await owner.unsafe(`ALTER DATABASE ${DB} SET track_functions = 'all'`);
  // The maintenance daemon's recovery of prepared transactions deletes pg_dist_transaction's
  // rows; off, so that a two-phase commit during the test stays counted.
  await owner`ALTER SYSTEM SET citus.recover_2pc_interval = -1`;
  await owner`SELECT pg_reload_conf()`;
  a = await workspaceWithData(owner, 'Commit A');
  writeA = await tokenFor(owner, a.id, 'write');
  ctx = coordinatorContext(ownerUrl, {
    acquireTimeoutMs: 10_000,
    connection: { 'citus.log_intermediate_results': 'on', client_min_messages: 'debug1' },
    onNotice: (message) => {
      if (message.startsWith('issuing ')) remote.push(message);
      if (/^Subplan \S+ will be (written to local file|sent to)/.test(message)) subplans.push(message);
      // Not a request's: the server's poll of the watched lookup lists (tally.change_version(),
      // on a timer of its own) reads them with Citus's local execution too.
      const poll = /^executing the command locally: SELECT md5\(COALESCE\(string_agg\(\(t\.\*\)::text/.test(message);
      if (message.startsWith('executing the command locally: ') && !poll) local.push(message);
    },
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

const rest = (method: 'get' | 'post' | 'patch' | 'delete', path: string) => {
  const agent = request(app);
  return agent[method](`/rest/v1/${path}`).set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwtA}` });
};

const mcp = (name: string, args: Record<string, unknown>) =>
  request(app)
    .post(`/mcp?token=${writeA.token}`)
    .set({ Accept: 'application/json, text/event-stream', 'Content-Type': 'application/json' })
    .send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }));

const preparedCount = async () =>
  (await owner<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_dist_transaction`)[0]!.n;

/** How one request committed on the workers: what it sent them, and pg_dist_transaction's growth. */
async function commitOf(what: string, send: () => Promise<request.Response>) {
  // The token's last use is written at most once a minute: written by this request too.
  await owner`UPDATE api_tokens SET last_used_at = NULL WHERE id = ${writeA.id}`;
  remote = [];
  subplans = [];
  const before = await preparedCount();
  const res = await send();
  expect({ what, status: res.status < 400 && !res.body?.result?.isError ? 'ok' : res.text }).toEqual({
    what,
    status: 'ok',
  });
  const wrote = remote.some((c) => /^issuing (INSERT|UPDATE|DELETE|WITH|COPY)\b/.test(c));
  const prepared = remote.filter((c) => /PREPARE TRANSACTION|COMMIT PREPARED/.test(c)).length;
  return { what, wrote, prepared, recorded: (await preparedCount()) - before, intermediate: subplans.length };
}

const expense = { amount: 4, category_id: 'food-drinks', method_id: 'cash' };

test('one row written by a request of one workspace commits on its shard in one phase', async () => {
  const results = [
    await commitOf('POST one row', () => rest('post', 'personal_transactions').send({ ...expense, name: 'Tea' })),
    await commitOf('POST one row, its representation back', () =>
      rest('post', 'personal_transactions?select=id,name')
        .set('Prefer', 'return=representation')
        .send([{ ...expense, name: 'Coffee' }]),
    ),
    await commitOf('upsert of one row', () =>
      rest('post', 'personal_transactions?on_conflict=workspace_id,id')
        .set('Prefer', 'resolution=merge-duplicates,missing=default')
        .send({ ...expense, id: a.expenseId, name: 'Lunch, upserted' }),
    ),
    await commitOf('PATCH', () => rest('patch', `personal_transactions?id=eq.${a.expenseId}`).send({ note: 'n' })),
    await commitOf('DELETE', () => rest('delete', `personal_transactions?name=eq.Tea`)),
    await commitOf('a fund transaction', () =>
      rest('post', 'fund_transactions').send({
        fund_id: a.fundId,
        name: 'In',
        amount: 5,
        category_id: 'fund-income',
        method_id: 'cash',
      }),
    ),
    await commitOf('/api/v1 POST personal_transactions', () =>
      request(app)
        .post('/api/v1/personal_transactions')
        .set('Authorization', `Bearer ${jwtA}`)
        .send({ ...expense, name: 'Bread' }),
    ),
    await commitOf('MCP create_expense', () => mcp('create_expense', { ...expense, name: 'Mcp lunch' })),
    await commitOf('POST one row with an Idempotency-Key', () =>
      rest('post', 'personal_transactions')
        .set('Idempotency-Key', 'commit-1')
        .send({ ...expense, name: 'Keyed' }),
    ),
  ];
  // A write answered with its rows (a representation, as /api/v1 and MCP answer) is still an
  // INSERT inside a WITH: planned apart, its rows an intermediate result on the coordinator, yet
  // on the one shard and in one phase. The instrument sees those subplans; the others have none.
  const represented = [
    'POST one row, its representation back',
    '/api/v1 POST personal_transactions',
    'MCP create_expense',
  ];
  expect(results).toEqual(
    results.map((r) => ({
      what: r.what,
      wrote: true,
      prepared: 0,
      recorded: 0,
      intermediate: represented.includes(r.what) ? expect.any(Number) : 0,
    })),
  );
  expect(results.filter((r) => represented.includes(r.what) && r.intermediate === 0)).toEqual([]);
  // The token exchange writes on the coordinator alone (the token's last use, the rate limit).
  const exchange = await commitOf('token exchange', () =>
    request(app).post('/api/v1/token').set('Authorization', `Bearer ${writeA.token}`),
  );
  expect(exchange).toEqual({ what: 'token exchange', wrote: false, prepared: 0, recorded: 0, intermediate: 0 });
  const [used] = await owner<
    { used: boolean }[]
  >`SELECT last_used_at IS NOT NULL AS used FROM api_tokens WHERE id = ${writeA.id}`;
  expect(used!.used).toBe(true);
});

test('an array of rows still commits in two phases, and both instruments see it', async () => {
  const bulk = await commitOf('POST two rows', () =>
    rest('post', 'personal_transactions').send([
      { ...expense, name: 'Bulk 1' },
      { ...expense, name: 'Bulk 2' },
    ]),
  );
  expect(bulk).toEqual({ what: 'POST two rows', wrote: true, prepared: 2, recorded: 1, intermediate: 1 });
});

/** The statements Citus ran through its local execution for one request, on any node. */
async function localOf(what: string, send: () => Promise<request.Response>) {
  local = [];
  const res = await send();
  expect({ what, status: res.status < 400 ? 'ok' : res.text }).toEqual({ what, status: 'ok' });
  return { what, local };
}

/** One request of each kind that touches one row (or reads one workspace's list), in turn. */
async function requestsOfOneRow(label: string) {
  return [
    await localOf('GET a list', () =>
      rest('get', 'personal_transactions?select=id,name&order=occurred_at.desc&limit=5'),
    ),
    await localOf('POST one row', () => rest('post', 'personal_transactions').send({ ...expense, name: label })),
    await localOf('a fund transaction', () =>
      rest('post', 'fund_transactions').send({
        fund_id: a.fundId,
        name: label,
        amount: 3,
        category_id: 'fund-income',
        method_id: 'bank-transfer',
      }),
    ),
    await localOf('PATCH one row', () =>
      rest('patch', `personal_transactions?id=eq.${a.expenseId}`).send({ note: label }),
    ),
    await localOf('DELETE one row', () => rest('delete', `personal_transactions?name=eq.${label}`)),
  ];
}

test("a one-row request runs no statement through Citus's local execution: the pre-request check and the triggers read and write the shards themselves", async () => {
  const results = await requestsOfOneRow('Local');
  expect(results).toEqual(results.map((r) => ({ what: r.what, local: [] })));
});

test("an insert's category trigger reads the lookups' shards by name: one look-up of a shard per insert, the activity row's", async () => {
  const [shard] = await owner<{ port: number; name: string }[]>`
    SELECT n.nodeport AS port, shard_name('public.personal_transactions', p.shardid) AS name
      FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid
     WHERE p.shardid = get_shard_id_for_distribution_column('public.personal_transactions', ${a.id}::uuid)`;
  const worker = postgres(cluster.workers.find((w) => w.port === shard!.port)!.url(DB), { max: 1, onnotice: () => {} });
  try {
    // A row written into the shard on its worker, as Citus writes it there (the triggers run),
    // then the function calls of that transaction, as the backend counts them; rolled back.
    const tx = await worker.reserve();
    let counted: Record<string, number>;
    try {
      await tx`BEGIN`;
      await tx`SELECT set_config('request.jwt.claims', ${JSON.stringify({ role: 'api_write', workspace_id: a.id })}, true)`;
      await tx.unsafe(
        `INSERT INTO public.${shard!.name} (workspace_id, name, amount, category_id, method_id) VALUES ($1, 'Counted', 2, 'food-drinks', 'cash')`,
        [a.id],
      );
      const rows = await tx<{ fn: string; calls: number }[]>`
        SELECT f AS fn, coalesce(pg_stat_get_xact_function_calls(to_regprocedure(f)), 0)::int AS calls
          FROM unnest(ARRAY['tally.check_category_domain()', 'tally.record_activity()',
                            'tally.local_shard(text,text,uuid)']) f`;
      counted = Object.fromEntries(rows.map((r) => [r.fn, r.calls]));
    } finally {
      await tx`ROLLBACK`;
      tx.release();
    }
    expect(counted).toEqual({
      'tally.check_category_domain()': 1,
      'tally.record_activity()': 1,
      'tally.local_shard(text,text,uuid)': 1,
    });
  } finally {
    await worker.end();
  }
});

test("after the workspace's shards move to the other worker, the functions find them there", async () => {
  const placement = async () =>
    (
      await owner<{ shard: string; port: number }[]>`
        SELECT p.shardid::text AS shard, n.nodeport AS port
          FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid
         WHERE p.shardid = get_shard_id_for_distribution_column('public.activity', ${a.id}::uuid)`
    )[0]!;
  const activity = async () =>
    (await owner<{ n: number }[]>`SELECT count(*)::int AS n FROM activity WHERE workspace_id = ${a.id}`)[0]!.n;
  const from = await placement();
  const to = cluster.workers.find((w) => w.port !== from.port)!;
  await owner`SELECT citus_move_shard_placement(get_shard_id_for_distribution_column('public.personal_transactions', ${a.id}::uuid),
                '127.0.0.1', ${from.port}, '127.0.0.1', ${to.port}, shard_transfer_mode => 'block_writes')`;
  expect(await placement()).toEqual({ shard: from.shard, port: to.port });

  const before = await activity();
  const results = await requestsOfOneRow('Moved');
  expect(results).toEqual(results.map((r) => ({ what: r.what, local: [] })));
  // Each write left its activity row, in the shard where Citus now reads it.
  expect(await activity()).toBe(before + 4);

  // A node without the shard has no local one, and the functions go through Citus there: the
  // pre-request check on a worker (where api_tokens is the coordinator's) answers as on the
  // coordinator, also for a token revoked since.
  const onWorker = async (port: number, fn: (tx: TransactionSql) => Promise<unknown>) => {
    const node = cluster.workers.find((w) => w.port === port)!;
    const sql = postgres(node.url(DB), { max: 1, onnotice: () => {} });
    try {
      return await sql.begin(fn);
    } finally {
      await sql.end();
    }
  };
  const shardOn = (port: number) =>
    onWorker(port, async (tx) => (await tx`SELECT tally.local_shard('public', 'activity', ${a.id}::uuid) AS s`)[0]!.s);
  expect(await shardOn(from.port)).toBeNull();
  expect(await shardOn(to.port)).toBe(`public.activity_${from.shard}`);
  const read = await tokenFor(owner, a.id, 'read');
  const claims = JSON.stringify({ role: 'api_read', sub: read.id, workspace_id: a.id, exp: 9999999999 });
  const check = async (tx: TransactionSql) => {
    await tx`SELECT set_config('request.jwt.claims', ${claims}, true), set_config('role', 'api_read', true)`;
    return tx`SELECT tally.check_request()`;
  };
  await onWorker(from.port, check);
  await owner`UPDATE api_tokens SET revoked_at = now() WHERE id = ${read.id}`;
  expect(await sqlState(onWorker(from.port, check))).toBe('PT401');
});
