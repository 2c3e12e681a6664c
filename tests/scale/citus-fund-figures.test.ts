import { readFileSync } from 'node:fs';
import postgres, { type Sql } from 'postgres';
import request from 'supertest';
import type { AppContext } from '../../gateway/context.js';
import { migrate } from '../../gateway/db/migrate.js';
import { createApp, type App } from '../../gateway/server.js';
import { accessToken } from '../harness/app.js';
import { tokenFor, workspaceWithData } from '../harness/fixtures.js';
import { defined } from '../../gateway/engine/invariant.js';
import { TEST_API_KEY } from '../harness/rest.js';
import { startCitusCluster, type CitusCluster } from './harness/citus.js';
import { coordinatorContext } from './harness/coordinator.js';

// On Citus, the figures of a workspace's funds cost the same commands to the workers whatever
// the number of funds: rpc/fund_summaries is one statement on the workspace's shard (it was two
// commands per fund, 4,000 at 2,000 funds, and 4.9 s), MCP list_funds reads it and the funds,
// and a read of funds with the computed fields is one routed statement (the fields, functions of
// one row, then run their two statements per fund on that shard's worker, which the
// coordinator does not send). Counted from the coordinator's own log of the commands it sends
// (citus.log_remote_commands); the time of each request at 2,000 funds is printed for the
// record (speed belongs to the benchmark, not to an assertion).

const DB = 'tally_figures';
const FUNDS = { few: 2, many: 2000 };

let cluster: CitusCluster;
let owner: Sql;
let app: App;
let ctx: AppContext;
let remote: string[] = [];
const callers = {} as Record<keyof typeof FUNDS, { jwt: string; token: string }>;

beforeAll(async () => {
  cluster = await startCitusCluster({ workers: 2 });
  const ownerUrl = await cluster.createDatabase(DB);
  await migrate(ownerUrl);
  owner = postgres(ownerUrl, { max: 2, onnotice: () => {} });
  for (const [size, funds] of Object.entries(FUNDS) as [keyof typeof FUNDS, number][]) {
    const ws = await workspaceWithData(owner, `Figures ${size}`);
    await owner`
      INSERT INTO public.funds (workspace_id, name, target_amount)
      SELECT ${ws.id}, 'fund ' || i, 100 FROM generate_series(2, ${funds}) i`;
    await owner`
      INSERT INTO public.fund_transactions (workspace_id, fund_id, name, amount, category_id, method_id)
      SELECT f.workspace_id, f.id, x.name, x.amount, x.category, 'cash'
        FROM public.funds f, (VALUES ('in', 30, 'fund-income'), ('out', -10, 'hotel')) x(name, amount, category)
       WHERE f.workspace_id = ${ws.id} AND f.name LIKE 'fund %'`;
    const token = await tokenFor(owner, ws.id, 'write');
    callers[size] = {
      jwt: await accessToken({ role: 'api_write', workspace_id: ws.id, scope: 'write', sub: token.id }),
      token: token.token,
    };
  }
  ctx = coordinatorContext(ownerUrl, {
    acquireTimeoutMs: 30_000,
    onNotice: (message) => {
      if (message.startsWith('issuing ')) remote.push(message);
    },
  });
  app = createApp(ctx);
}, 900_000);

afterAll(async () => {
  await ctx?.db.end({ timeout: 5 });
  await owner?.end();
  await cluster?.stop();
});

const rest = (size: keyof typeof FUNDS, path: string) => () =>
  request(app)
    .get(`/rest/v1/${path}`)
    .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${callers[size].jwt}` })
    .then((res) => {
      expect({ path, status: res.status }).toEqual({ path, status: 200 });
      expect((res.body as unknown[]).length).toBe(FUNDS[size]);
    });

const listFunds = (size: keyof typeof FUNDS) => () =>
  request(app)
    .post(`/mcp?token=${callers[size].token}`)
    .set({ Accept: 'application/json, text/event-stream', 'Content-Type': 'application/json' })
    .send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_funds', arguments: {} } })
    .then((res) => {
      expect(res.body.result?.isError).toBeUndefined();
      expect((res.body.result.structuredContent.funds as unknown[]).length).toBe(FUNDS[size]);
    });

const KINDS: Record<string, (size: keyof typeof FUNDS) => () => Promise<void>> = {
  'GET /rest/v1/rpc/fund_summaries': (size) => rest(size, 'rpc/fund_summaries'),
  'GET /rest/v1/funds?select=*,summary': (size) => rest(size, 'funds?select=*,summary'),
  'GET /rest/v1/funds?select=id,balance': (size) => rest(size, 'funds?select=id,balance'),
  'MCP tools/call list_funds': listFunds,
};

/** The commands the coordinator sent the workers for one request (the second of two), and its time. */
async function commandsOf(send: () => Promise<void>): Promise<{ commands: number; ms: number }> {
  await send();
  remote = [];
  const started = performance.now();
  await send();
  return { commands: remote.length, ms: Math.round(performance.now() - started) };
}

test.each(Object.keys(KINDS))('%s: the commands sent to the workers at 2,000 funds are those at 2', async (kind) => {
  const few = await commandsOf(KINDS[kind]!('few'));
  const many = await commandsOf(KINDS[kind]!('many'));
  process.stdout.write(
    `${kind}: ${many.commands} commands to the workers, ${many.ms} ms at ${FUNDS.many} funds (${few.ms} ms at ${FUNDS.few})\n`,
  );
  expect({ kind, commands: many.commands }).toEqual({ kind, commands: few.commands });
});

/**
 * The private memory (kB) of every session the API roles hold on the workers: the sessions Citus
 * opened from the coordinator, which it keeps between transactions. This machine runs the
 * cluster, so /proc shows them.
 */
async function workerSessionsMemory(): Promise<number> {
  let kB = 0;
  for (const worker of cluster.workers) {
    const sql = postgres(worker.url(DB), { max: 1, onnotice: () => {} });
    try {
      const sessions = await sql<{ pid: number }[]>`
        SELECT pid FROM pg_stat_activity
         WHERE datname = ${DB} AND backend_type = 'client backend'
           AND usename IN ('api_read', 'api_write', 'anon')`;
      for (const { pid } of sessions) {
        const anonymous = /^Anonymous:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
        kB += Number(defined(anonymous ?? undefined, 'the Anonymous line of smaps_rollup')[1]);
      }
    } finally {
      await sql.end();
    }
  }
  return kB;
}

// A computed field's statements run on the worker, from inside the query on the shard, in a
// session the coordinator keeps. Citus 13.2 added a plan to PL/pgSQL's kept plan at each call:
// the worker's session grew about 240 MB per read of 2,000 funds with their summary (or their
// balance, summary's field), until the worker ran out of memory. The field now plans at each
// call (api_roles.sql), and the plans go with the call.
test.each(['summary', 'balance'])(
  "reads of the computed field %s leave the workers' sessions their size",
  async (field) => {
    const read = rest('many', `funds?select=id,${field}`);
    await read(); // PL/pgSQL keeps a statement's plan from its sixth call
    const before = await workerSessionsMemory();
    for (let i = 0; i < 3; i += 1) await read();
    const grown = (await workerSessionsMemory()) - before;
    process.stdout.write(
      `the workers' API sessions grew ${grown} kB over three reads of ${field} at ${FUNDS.many} funds\n`,
    );
    expect(grown).toBeLessThan(32 * 1024);
  },
);
