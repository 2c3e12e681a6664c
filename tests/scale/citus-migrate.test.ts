import postgres, { type Sql } from 'postgres';
import { migrate } from '../../gateway/db/migrate.js';
import { TENANT_TABLES, workspaceWithData } from '../harness/fixtures.js';
import { startCitusCluster, type CitusCluster } from './harness/citus.js';

// `tally migrate` makes the Citus deployment by itself (sql/extensions/citus/), and the whole
// set runs on plain PostgreSQL 15 and on a Citus coordinator with two workers.

/** The tenant tables with the workspace policy; the activity log has policies of its own (checked apart). */
const TENANT = TENANT_TABLES.filter((t) => t !== 'activity');
const REFERENCE = ['categories', 'fund_kinds', 'payment_methods', 'workspaces'];
const COORDINATOR_LOCAL = [
  'api_tokens',
  'billing_accounts',
  'tally.audit_log',
  'tally.settings_sessions',
  'user_credentials',
  'workspace_members',
];

let cluster: CitusCluster;
let citusUrl: string;
let citus: Sql;

beforeAll(async () => {
  cluster = await startCitusCluster({ workers: 2 });
  citusUrl = await cluster.createDatabase('tally_citus');
  citus = postgres(citusUrl, { max: 2, onnotice: () => {} });
});
afterAll(async () => {
  await citus?.end();
  await cluster?.stop();
});

/** What placement and policies leave: where each table is, its policies and foreign keys. */
async function layout(sql: Sql): Promise<string[]> {
  const rows = await sql<{ line: string }[]>`
    SELECT format('%s policy %s: %s / %s', c.oid::regclass, p.polname, pg_get_expr(p.polqual, p.polrelid),
                  pg_get_expr(p.polwithcheck, p.polrelid)) AS line
      FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
    UNION ALL
    SELECT format('%s rls %s forced %s', c.oid::regclass, c.relrowsecurity, c.relforcerowsecurity)
      FROM pg_class c WHERE c.relnamespace IN ('public'::regnamespace, 'tally'::regnamespace) AND c.relkind = 'r'
    UNION ALL
    SELECT format('%s fk %s %s', f.conrelid::regclass, f.conname, pg_get_constraintdef(f.oid))
      FROM pg_constraint f WHERE f.contype = 'f' AND f.connamespace IN ('public'::regnamespace, 'tally'::regnamespace)
    UNION ALL
    SELECT format('%s trigger %s', t.tgrelid::regclass, t.tgname) FROM pg_trigger t WHERE NOT t.tgisinternal
    ORDER BY 1`;
  const placement = (await sql<{ x: boolean }[]>`SELECT to_regclass('pg_dist_partition') IS NOT NULL AS x`)[0]!.x
    ? await sql<{ line: string }[]>`
        SELECT format('%s placed %s %s colocation %s shards %s', p.logicalrelid, p.partmethod, p.repmodel, p.colocationid,
                      (SELECT count(*) FROM pg_dist_shard s WHERE s.logicalrelid = p.logicalrelid)) AS line
          FROM pg_dist_partition p ORDER BY 1`
    : [];
  return [...rows, ...placement].map((r) => r.line).filter((l) => !l.includes('pg_dist_'));
}

async function placement(sql: Sql): Promise<Record<string, string>> {
  const rows = await sql<{ rel: string; kind: string }[]>`
    SELECT p.logicalrelid::regclass::text AS rel,
           CASE WHEN p.partmethod = 'h' THEN 'distributed by ' || column_to_column_name(p.logicalrelid, p.partkey)
                WHEN p.repmodel = 't' THEN 'reference' ELSE 'citus local' END AS kind
      FROM pg_dist_partition p`;
  return Object.fromEntries(rows.map((r) => [r.rel, r.kind]));
}

describe('tally migrate on a Citus coordinator', () => {
  it('distribute the tenant tables on workspace_id, colocated; replicate workspaces and the lookups; keep the internal tables on the coordinator', async () => {
    await migrate(citusUrl);
    const placed = await placement(citus);
    for (const t of TENANT) expect(placed[t]).toBe('distributed by workspace_id');
    // A workspace's activity lives with its records: the trigger on a record's shard writes it.
    expect(placed['activity']).toBe('distributed by workspace_id');
    // So do its idempotency keys: a keyed create claims its key on the shard it writes.
    expect(placed['tally.idempotency_keys']).toBe('distributed by workspace_id');
    // And what they take of its budgets: a write counts them on the shard it writes.
    expect(placed['tally.workspace_usage']).toBe('distributed by workspace_id');
    for (const t of REFERENCE) expect(placed[t]).toBe('reference');
    for (const t of COORDINATOR_LOCAL) expect(placed[t]).toBe('citus local');
    // Written on every request or often: plain tables of the coordinator, outside Citus.
    for (const t of ['tally.rate_limits', 'tally.sign_in_failures', 'publishable_keys'])
      expect(placed[t]).toBeUndefined();
    const groups = await citus<{ n: number }[]>`
      SELECT count(DISTINCT colocationid)::int AS n FROM pg_dist_partition
       WHERE logicalrelid = ANY (${[...TENANT.map((t) => 'public.' + t), 'public.activity', 'tally.idempotency_keys', 'tally.workspace_usage']}::regclass[])`;
    expect(groups[0]!.n).toBe(1);
  });

  it('force the workspace policy on every shard, on the workers themselves', async () => {
    const shards = await citus<{ shard: string; port: number }[]>`
      SELECT s.shardid::text AS shard, n.nodeport AS port, s.logicalrelid::regclass::text AS rel
        FROM pg_dist_shard s JOIN pg_dist_placement pl USING (shardid) JOIN pg_dist_node n ON n.groupid = pl.groupid
       WHERE s.logicalrelid = ANY (${TENANT.map((t) => 'public.' + t)}::regclass[])`;
    expect(shards.length).toBe(TENANT.length * 32);
    const seen: string[] = [];
    for (const worker of cluster.workers) {
      const w = postgres(worker.url('tally_citus'), { max: 1, onnotice: () => {} });
      try {
        await w`SET citus.override_table_visibility = off`;
        const rows = await w<{ rel: string; rls: boolean; forced: boolean; policy: string | null }[]>`
          SELECT c.relname AS rel, c.relrowsecurity AS rls, c.relforcerowsecurity AS forced,
                 (SELECT pg_get_expr(p.polqual, p.polrelid) FROM pg_policy p WHERE p.polrelid = c.oid AND p.polname = 'workspace_isolation') AS policy
            FROM pg_class c
           WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace
             AND c.relname ~ ${'^(' + TENANT.join('|') + ')_[0-9]+$'}`;
        for (const r of rows) {
          expect({ rel: r.rel, rls: r.rls, forced: r.forced, policy: r.policy }).toEqual({
            rel: r.rel,
            rls: true,
            forced: true,
            policy: '(workspace_id = tally.current_workspace_id())',
          });
          seen.push(r.rel);
        }
      } finally {
        await w.end();
      }
    }
    // Every shard was looked at on the worker that holds it (both workers hold some).
    expect(seen.length).toBe(shards.length);
    expect(new Set(shards.map((s) => s.port)).size).toBe(2);
  });

  it('keep the database rules on the shards: the category trigger, foreign keys and deleting a workspace', async () => {
    const ws = await workspaceWithData(citus, 'citus-rules');
    const wrong = citus`
      INSERT INTO personal_transactions (workspace_id, name, amount, category_id, method_id)
      VALUES (${ws.id}, 'x', 1, 'hotel', 'cash')`;
    await expect(wrong).rejects.toMatchObject({
      code: '23514',
      message: 'category_id "hotel" is not offered to expenses',
    });
    const orphan = citus`
      INSERT INTO fund_transactions (workspace_id, fund_id, name, amount, category_id, method_id)
      VALUES (${ws.id}, gen_random_uuid(), 'x', 1, 'hotel', 'cash')`;
    await expect(orphan).rejects.toMatchObject({ code: '23503' });
    await citus`DELETE FROM workspaces WHERE id = ${ws.id}`;
    const left = await citus<{ n: number }[]>`
      SELECT (SELECT count(*) FROM funds WHERE workspace_id = ${ws.id})
           + (SELECT count(*) FROM fund_transactions WHERE workspace_id = ${ws.id})
           + (SELECT count(*) FROM personal_transactions WHERE workspace_id = ${ws.id})
           + (SELECT count(*) FROM api_tokens WHERE workspace_id = ${ws.id}) AS n`;
    expect(Number(left[0]!.n)).toBe(0);
  });

  it('read the token and the workspace of the pre-request check on the coordinator alone', async () => {
    // Its two statements (sql/app/definitions/check_request.sql), each one task. The token's is on the coordinator (a Citus
    // local table has no other placement); the workspace's, alone here, may go to any copy of
    // the reference table, but in the check it follows the token's read, which Citus ran
    // locally, and then Citus runs it on the coordinator's copy too (citus-commit.test.ts sees
    // both run there).
    const explain = async (query: Promise<{ 'QUERY PLAN': string }[]>) =>
      (await query).map((r) => r['QUERY PLAN']).join('\n');
    const token = await explain(citus`
      EXPLAIN (COSTS OFF) SELECT t.revoked_at, t.workspace_id, t.scope FROM api_tokens t WHERE t.id = gen_random_uuid()`);
    expect(token).toContain('Task Count: 1');
    expect(token).toContain(`port=${cluster.coordinator.port} `);
    const space = await explain(citus`
      EXPLAIN (COSTS OFF) SELECT w.api_enabled FROM workspaces w WHERE w.id = gen_random_uuid()`);
    expect(space).toContain('Task Count: 1');
  });

  it('change nothing when run again', async () => {
    const before = await layout(citus);
    expect(await migrate(citusUrl)).toEqual([]);
    expect(await layout(citus)).toEqual(before);
  });

  it('place a tenant table a later migration adds, following the rule of docs/architecture.md', async () => {
    // The rule: one migration creates and grants the table (foreign keys to workspaces and the
    // lookups may be inline), which tally migrate ends with sql/extensions/citus/
    // after-each-migration.sql; the next adds its foreign keys to other tenant tables; its
    // policy file follows. As tally migrate runs them:
    await citus.begin(async (tx) => {
      await tx`CREATE TABLE public.budgets (
        workspace_id uuid NOT NULL DEFAULT tally.current_workspace_id() REFERENCES public.workspaces (id) ON DELETE CASCADE,
        id uuid NOT NULL DEFAULT gen_random_uuid(),
        fund_id uuid NOT NULL,
        category_id text NOT NULL REFERENCES public.categories (id),
        PRIMARY KEY (workspace_id, id))`;
      await tx`GRANT SELECT ON public.budgets TO api_read`;
      await tx`SELECT tally.place_tables()`;
      await tx`ALTER TABLE public.budgets ADD FOREIGN KEY (workspace_id, fund_id) REFERENCES public.funds (workspace_id, id) ON DELETE CASCADE`;
      await tx`SELECT tally.place_tables()`;
      await tx`SELECT tally.workspace_isolation('public.budgets')`;
    });
    const placed = await placement(citus);
    expect(placed['budgets']).toBe('distributed by workspace_id');
    const fks = await citus<{ n: number }[]>`
      SELECT count(*)::int AS n FROM pg_constraint WHERE conrelid = 'public.budgets'::regclass AND contype = 'f'`;
    expect(fks[0]!.n).toBe(3);
    const colocated = await citus<{ n: number }[]>`
      SELECT count(DISTINCT colocationid)::int AS n FROM pg_dist_partition
       WHERE logicalrelid IN ('public.budgets'::regclass, 'public.funds'::regclass)`;
    expect(colocated[0]!.n).toBe(1);
  });
});

describe('the whole migration set on plain PostgreSQL 15', () => {
  let plain: Sql;
  let plainUrl: string;
  beforeAll(async () => {
    // The coordinator's server, a database without the citus extension: plain Postgres.
    const owner = postgres(cluster.coordinator.url(), { max: 1, onnotice: () => {} });
    await owner`CREATE DATABASE tally_plain`;
    await owner.end();
    plainUrl = cluster.coordinator.url('tally_plain');
    plain = postgres(plainUrl, { max: 2, onnotice: () => {} });
  });
  afterAll(() => plain?.end());

  it('migrates, policies included, as before: the claim read once per statement, nothing distributed', async () => {
    await migrate(plainUrl);
    const policies = await plain<{ rel: string; qual: string }[]>`
      SELECT polrelid::regclass::text AS rel, pg_get_expr(polqual, polrelid) AS qual FROM pg_policy ORDER BY 1, polname`;
    expect(policies).toEqual([
      // The activity log: the owner's trigger writes it, a workspace reads its own.
      { rel: 'activity', qual: 'true' },
      { rel: 'activity', qual: '(workspace_id = tally.current_workspace_id())' },
      ...TENANT.map((rel) => ({
        rel,
        qual: '(workspace_id = ( SELECT tally.current_workspace_id() AS current_workspace_id))',
      })),
      // The idempotency keys: the owner's sweep, and the write role for its workspace's keys.
      { rel: 'tally.idempotency_keys', qual: 'true' },
      { rel: 'tally.idempotency_keys', qual: '(workspace_id = tally.current_workspace_id())' },
      // What a workspace's log and keys take: the owner's sweeps, and the write role's count of its own.
      { rel: 'tally.workspace_usage', qual: 'true' },
      { rel: 'tally.workspace_usage', qual: '(workspace_id = tally.current_workspace_id())' },
    ]);
    const before = await layout(plain);
    expect(await migrate(plainUrl)).toEqual([]);
    expect(await layout(plain)).toEqual(before);
  });
});
