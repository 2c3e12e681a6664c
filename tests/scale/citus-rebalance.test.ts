import { randomBytes } from 'node:crypto';
import postgres, { type Sql } from 'postgres';
import request from 'supertest';
import { migrate } from '../../gateway/db/migrate.js';
import { createWorkspace } from '../../gateway/admin/workspaces.js';
import { accessToken, startTestApp, type TestApp } from '../harness/app.js';
import { tokenFor } from '../harness/fixtures.js';
import { restEnv, TEST_API_KEY } from '../harness/rest.js';
import { startCitusCluster, type CitusCluster, type PgNode } from './harness/citus.js';

// Resharding without loss: a third worker joins a running cluster that holds several
// workspaces, Citus moves shards onto it (citus_rebalance_start / citus_rebalance_wait) while
// Tally, on the coordinator, serves writes and reads of every workspace through /rest/v1, and
// afterwards every row is there: the
// count and sum of every tenant table per workspace are what they were plus what was written,
// and no statement failed.
//
// The moves block writes to the shard being moved (shard_transfer_mode => 'block_writes'):
// Citus's default moves catch up by logical replication, whose apply worker refuses tables with
// forced row-level security ("cannot replicate into relation with row-level security enabled"),
// so a move under writes never ends. A write to a moving shard waits for its move instead.

const DB = 'tally_rebalance';
const WORKSPACES = 6;

let cluster: CitusCluster;
let url: string;
let sql: Sql;
let third: PgNode;
let tally: TestApp;

beforeAll(async () => {
  cluster = await startCitusCluster({ workers: 2 });
  url = await cluster.createDatabase(DB);
  third = await cluster.startServer('worker3'); // not in the database yet: it joins in the test
  await migrate(url);
  sql = postgres(url, { max: 6, onnotice: () => {} });
  // Tally logs in as authenticator, as `tally serve` does.
  process.env.TALLY_TEST_AUTHENTICATOR_PASSWORD = randomBytes(18).toString('base64url');
  await sql`SELECT tally.set_login_password('authenticator', ${process.env.TALLY_TEST_AUTHENTICATOR_PASSWORD})`;
  tally = startTestApp(url, restEnv());
});
afterAll(async () => {
  await tally?.close();
  await sql?.end({ timeout: 5 });
  await cluster?.stop();
});

interface Figures {
  [workspace: string]: { [table: string]: { rows: number; sum: number } };
}

/** Rows and the sum of the amounts (or of the ids' hashes) of every tenant table, per workspace. */
async function figures(ids: string[]): Promise<Figures> {
  const rows = await sql<{ ws: string; t: string; rows: number; sum: string }[]>`
    SELECT workspace_id::text AS ws, 'personal_transactions' AS t, count(*)::int AS rows, sum(amount)::text AS sum
      FROM personal_transactions WHERE workspace_id = ANY (${ids}::uuid[]) GROUP BY 1
    UNION ALL
    SELECT workspace_id::text, 'fund_transactions', count(*)::int, sum(amount)::text
      FROM fund_transactions WHERE workspace_id = ANY (${ids}::uuid[]) GROUP BY 1
    UNION ALL
    SELECT workspace_id::text, 'funds', count(*)::int, sum(hashtext(id::text)::numeric)::text
      FROM funds WHERE workspace_id = ANY (${ids}::uuid[]) GROUP BY 1
    UNION ALL
    SELECT workspace_id::text, 'contacts', count(*)::int, sum(hashtext(id::text)::numeric)::text
      FROM contacts WHERE workspace_id = ANY (${ids}::uuid[]) GROUP BY 1
    UNION ALL
    SELECT workspace_id::text, 'fund_participants', count(*)::int, sum(hashtext(contact_id::text)::numeric)::text
      FROM fund_participants WHERE workspace_id = ANY (${ids}::uuid[]) GROUP BY 1`;
  const out: Figures = {};
  for (const r of rows) (out[r.ws] ??= {})[r.t] = { rows: r.rows, sum: Number(r.sum) };
  return out;
}

async function seed(ws: string, n: number): Promise<void> {
  await sql`
    INSERT INTO personal_transactions (workspace_id, name, amount, category_id, method_id, occurred_at)
    SELECT ${ws}, 'expense ' || i, (i % 97) + 0.25, 'food-drinks', 'cash', now() - i * interval '1 hour'
      FROM generate_series(1, ${n}) i`;
  await sql`INSERT INTO funds (workspace_id, name, kind) SELECT ${ws}, 'fund ' || i, 'Travel' FROM generate_series(1, 3) i`;
  await sql`INSERT INTO contacts (workspace_id, name) SELECT ${ws}, 'contact ' || i FROM generate_series(1, 10) i`;
  await sql`
    INSERT INTO fund_transactions (workspace_id, fund_id, name, amount, category_id, method_id)
    SELECT f.workspace_id, f.id, 'move ' || i, CASE WHEN i % 3 = 0 THEN -i ELSE i END, 'fund-income', 'bank-transfer'
      FROM funds f, generate_series(1, 20) i WHERE f.workspace_id = ${ws}`;
  await sql`
    INSERT INTO fund_participants (workspace_id, fund_id, contact_id)
    SELECT f.workspace_id, f.id, c.id FROM funds f JOIN contacts c ON c.workspace_id = f.workspace_id
     WHERE f.workspace_id = ${ws}`;
}

describe('adding a worker and rebalancing while the coordinator serves', () => {
  it('moves shards to the new worker and loses no row and no request', async () => {
    const ids: string[] = [];
    for (let i = 0; i < WORKSPACES; i++) {
      const ws = await createWorkspace(sql, `rebalance ${i}`, 'EUR', 'test');
      ids.push(ws.id);
      await seed(ws.id, 200 + 50 * i);
    }
    const before = await figures(ids);

    // The new node gets the database and the extension, as every node does; then it joins.
    const node = postgres(third.url(), { max: 1, onnotice: () => {} });
    await node.unsafe(`CREATE DATABASE ${DB}`);
    await node.end();
    const nodeDb = postgres(third.url(DB), { max: 1, onnotice: () => {} });
    await nodeDb`CREATE EXTENSION citus`;
    await nodeDb.end();
    await sql`SELECT citus_add_node('127.0.0.1', ${third.port})`;

    // Writes and reads of every workspace through Tally, one after the other, until the
    // rebalance is done: each read must count exactly the rows written so far.
    const jwts: Record<string, string> = {};
    for (const ws of ids) {
      const t = await tokenFor(sql, ws, 'write');
      jwts[ws] = await accessToken({ role: 'api_write', workspace_id: ws, scope: 'write', sub: t.id });
    }
    const as = (ws: string) => ({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwts[ws]}` });
    const written: Record<string, { rows: number; sum: number }> = Object.fromEntries(
      ids.map((id) => [id, { rows: 0, sum: 0 }]),
    );
    const failures: string[] = [];
    let statements = 0;
    let slowestWriteMs = 0;
    let done = false;
    const load = (async () => {
      for (let i = 0; !done; i++) {
        const ws = ids[i % ids.length]!;
        const amount = (i % 50) + 1;
        try {
          const t0 = Date.now();
          const insert = await request(tally.app)
            .post('/rest/v1/personal_transactions')
            .set({ ...as(ws), Prefer: 'return=minimal' })
            .send({ name: `during ${i}`, amount, category_id: 'essentials', method_id: 'credit-card' });
          slowestWriteMs = Math.max(slowestWriteMs, Date.now() - t0);
          if (insert.status !== 201) failures.push(`insert answered ${insert.status} ${insert.text}`);
          else {
            written[ws]!.rows++;
            written[ws]!.sum += amount;
          }
          const read = await request(tally.app)
            .get('/rest/v1/personal_transactions?select=id&limit=1')
            .set({ ...as(ws), Prefer: 'count=exact' });
          const n = Number(/\/(\d+)$/.exec(String(read.headers['content-range']))?.[1]);
          const expected = before[ws]!['personal_transactions']!.rows + written[ws]!.rows;
          // 206: one row of the workspace's `n` (PostgREST's partial content with a count).
          if (read.status !== 206 || n !== expected)
            failures.push(`read answered ${read.status} with ${n} rows of ${ws}, expected ${expected}`);
          statements += 2;
        } catch (err) {
          failures.push(String(err));
        }
      }
    })();

    const started = Date.now();
    const [job] = await sql<
      { id: string | null }[]
    >`SELECT citus_rebalance_start(shard_transfer_mode => 'block_writes')::text AS id`;
    await sql`SELECT citus_rebalance_wait()`;
    const seconds = (Date.now() - started) / 1000;
    done = true;
    await load;

    const [moved] = await sql<{ shards: number; status: string }[]>`
      SELECT (SELECT count(*)::int FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid
                JOIN pg_dist_shard s USING (shardid)
               WHERE n.nodeport = ${third.port} AND s.logicalrelid = 'public.funds'::regclass) AS shards,
             (SELECT state::text FROM pg_dist_background_job WHERE job_id = ${job!.id}::bigint) AS status`;
    const after = await figures(ids);
    const expected = structuredClone(before);
    for (const ws of ids) {
      const p = expected[ws]!['personal_transactions']!;
      p.rows += written[ws]!.rows;
      p.sum += written[ws]!.sum;
    }
    expect(after).toEqual(expected);
    process.stdout.write(
      `rebalance: ${moved!.shards} of 32 funds shards moved to the new worker in ${seconds.toFixed(1)} s (job ${moved!.status}); ` +
        `${statements} requests through Tally during it, ${failures.length} failed, slowest write ${slowestWriteMs} ms; rows before ${total(before)}, written ${Object.values(written).reduce((a, w) => a + w.rows, 0)}, after ${total(after)}\n`,
    );
    expect(failures).toEqual([]);
    expect(moved!.status).toBe('finished');
    expect(moved!.shards).toBeGreaterThan(0);
    expect(statements).toBeGreaterThan(0);
  });
});

function total(f: Figures): number {
  return Object.values(f).reduce((a, t) => a + Object.values(t).reduce((b, x) => b + x.rows, 0), 0);
}
