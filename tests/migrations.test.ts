import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { applyPolicies, migrate, sqlMigrations } from '../gateway/db/migrate.js';
import { splitStatements } from '../gateway/db/sql-statements.js';
import { catalogOf } from './harness/catalog.js';
import { asRole, createTestDatabase, sqlState, type TestDatabase } from './harness/db.js';
import { TENANT_TABLES, tenantTablesOf } from './harness/fixtures.js';

// The sets' migrations are whatever sql/gateway/migrations/ and sql/app/migrations/ hold.
const namesIn = (dir: string, prefix = '') =>
  readdirSync(new URL(`../sql/${dir}/migrations/`, import.meta.url))
    .filter((f) => f.endsWith('.sql'))
    .sort()
    .map((f) => prefix + f.replace(/\.sql$/, ''));
const GATEWAY_SET = namesIn('gateway', 'gateway/');
const APP_SET = namesIn('app');

describe('migrations', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase({ empty: true });
  });
  afterAll(() => db.drop());

  const tables = async (): Promise<string[]> =>
    (
      await db.admin<{ t: string }[]>`
      SELECT table_schema || '.' || table_name AS t FROM information_schema.tables
       WHERE table_schema IN ('public', 'tally') ORDER BY 1`
    ).map((r) => r.t);

  it('go up, down to nothing, and up again cleanly, each set in file order', async () => {
    const ran = await migrate(db.url);
    expect(ran).toEqual([...GATEWAY_SET, ...APP_SET]);
    const afterUp = await tables();
    expect(afterUp).toEqual(
      expect.arrayContaining([
        'public.personal_transactions',
        'public.funds',
        'public.fund_transactions',
        'public.contacts',
        'public.fund_participants',
        'public.categories',
        'public.payment_methods',
        'public.workspaces',
        'public.workspace_members',
        'public.user_credentials',
        'public.billing_accounts',
        'public.api_tokens',
        'public.publishable_keys',
        'tally.audit_log',
        'tally.rate_limits',
        'tally.settings_sessions',
        'tally.sign_in_failures',
      ]),
    );
    const catalog = await catalogOf(db.admin);

    expect(await migrate(db.url, 'down')).toEqual([...ran].reverse());
    expect(await tables()).toEqual([]);
    expect(await db.admin`SELECT proname FROM pg_proc WHERE pronamespace = 'public'::regnamespace`).toEqual([]);

    expect(await migrate(db.url)).toEqual(ran);
    expect(await tables()).toEqual(afterUp);
    expect(await catalogOf(db.admin)).toEqual(catalog);
    expect(await migrate(db.url)).toEqual([]); // nothing pending
  });

  it('applies a definition file again when its text changes, and only then', async () => {
    await migrate(db.url);
    const applied = async () =>
      (await db.admin<{ n: number }[]>`SELECT count(*)::int AS n FROM tally_migrations.definitions`)[0]!.n;
    expect(await applied()).toBeGreaterThan(10);
    // A DBA's hand edit of a function stays until its file changes: the runner keeps no copy of
    // the database's text, only the file's hash as last applied.
    await db.admin`UPDATE tally_migrations.definitions SET sha256 = 'edited' WHERE file = 'app/definitions/workspace.sql'`;
    await db.admin`COMMENT ON FUNCTION public.workspace_profile() IS 'changed by hand'`;
    await migrate(db.url);
    expect(await db.admin`SELECT obj_description('public.workspace_profile()'::regprocedure, 'pg_proc') AS c`).toEqual([
      { c: 'The name and currency of the workspace of the token' },
    ]);
  });

  it('an install from before the gateway had a set of its own gets it without losing anything', async () => {
    // Such a database has every app migration recorded and the gateway's objects made by them,
    // but no gateway_migrations rows: what is left after forgetting them here.
    await migrate(db.url);
    await db.admin`INSERT INTO public.publishable_keys (label, key_hash) VALUES ('kept', ${Buffer.alloc(32, 7)})`;
    await db.admin`SELECT * FROM tally.rate_limit_take('kept', 60000, 3)`;
    await db.admin`DELETE FROM tally_migrations.gateway_migrations`;

    expect(await migrate(db.url)).toEqual(GATEWAY_SET);
    expect(await migrate(db.url)).toEqual([]);
    expect(await db.admin`SELECT label FROM public.publishable_keys WHERE label = 'kept'`).toEqual([{ label: 'kept' }]);
    expect(await db.admin`SELECT hits FROM tally.rate_limit_get('kept')`).toEqual([{ hits: 3 }]);
    expect(await db.admin`SELECT tally.publishable_key_active(${Buffer.alloc(32, 7)}) AS active`).toEqual([
      { active: true },
    ]);
  });

  it("installs only the gateway's state with the gateway set, and takes it away again", async () => {
    const other = await createTestDatabase({ empty: true });
    try {
      expect(await migrate(other.url, 'up', Infinity, ['gateway'])).toEqual(GATEWAY_SET);
      const objects = await other.admin<{ t: string }[]>`
        SELECT table_schema || '.' || table_name AS t FROM information_schema.tables
         WHERE table_schema IN ('public', 'tally') ORDER BY 1`;
      expect(objects.map((r) => r.t)).toEqual([
        'public.publishable_keys',
        'tally.rate_limits',
        'tally.schema_version_row',
        'tally.watched_relations',
      ]);
      // Its SECURITY DEFINER functions search temporary tables last without the app's set too.
      const paths = await other.admin<{ path: string }[]>`
        SELECT array_to_string(proconfig, ';') AS path FROM pg_proc WHERE prosecdef`;
      expect(paths.length).toBeGreaterThan(0);
      for (const { path } of paths) expect(path).toMatch(/^search_path=.*, pg_temp$/);
      expect(await migrate(other.url, 'down', Infinity, ['gateway'])).toEqual([...GATEWAY_SET].reverse());
      expect(await other.admin`SELECT nspname FROM pg_namespace WHERE nspname = 'tally'`).toEqual([]);
    } finally {
      await other.drop();
    }
  });

  it('applies the policies idempotently, forcing RLS on every tenant table', async () => {
    await applyPolicies(db.url);
    await applyPolicies(db.url);
    const rows = await db.admin<
      { relname: string; relrowsecurity: boolean; relforcerowsecurity: boolean; policies: number }[]
    >`
      SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity,
             (SELECT count(*)::int FROM pg_policy p WHERE p.polrelid = c.oid) AS policies
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = 'public' AND c.relname = ANY(${await tenantTablesOf(db.admin)})
       ORDER BY 1`;
    expect(rows).toEqual(
      TENANT_TABLES.map((relname) => ({
        relname,
        relrowsecurity: true,
        relforcerowsecurity: true,
        // The activity log: what a workspace reads, and what the owner's trigger writes.
        policies: relname === 'activity' ? 2 : 1,
      })),
    );
  });

  it('refuses to finish while a tenant table has no policy, and leaves it closed', async () => {
    await migrate(db.url);
    // A tenant table made the wrong way: granted, with no file in policies/.
    await db.admin`CREATE TABLE public.unpoliced (workspace_id uuid NOT NULL DEFAULT tally.current_workspace_id(), note text)`;
    await db.admin`GRANT SELECT, INSERT ON public.unpoliced TO api_write`;
    const [ws] = await db.admin<{ id: string }[]>`SELECT tally.create_workspace('Unpoliced', 'USD', 'test') AS id`;
    await db.admin`INSERT INTO public.unpoliced (workspace_id, note) VALUES (${ws!.id}, 'planted')`;
    try {
      await expect(migrate(db.url)).rejects.toThrow(
        /^public\.unpoliced has workspace_id and is granted to an API role but had no row-level security policy: its row-level security is now forced/,
      );
      const [rls] = await db.admin`
        SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = 'public.unpoliced'::regclass`;
      expect(rls).toEqual({ relrowsecurity: true, relforcerowsecurity: true });
      // Closed: the owner's row is seen by no API role, and nothing can be written.
      await asRole(db.admin, 'api_write', { workspace_id: ws!.id }, async (tx) => {
        expect(await tx`SELECT note FROM public.unpoliced`).toEqual([]);
      });
      expect(
        await sqlState(
          asRole(
            db.admin,
            'api_write',
            { workspace_id: ws!.id },
            (tx) => tx`INSERT INTO public.unpoliced (note) VALUES ('x')`,
          ),
        ),
      ).toBe('42501');
    } finally {
      await db.admin`DROP TABLE public.unpoliced`;
    }
    expect(await migrate(db.url)).toEqual([]);
  });
});

describe('a database migrated by the pre-release history', () => {
  const fixture = (path: string) => fileURLToPath(new URL(`./fixtures/prerelease/${path}`, import.meta.url));

  /** What `tally migrate` and `tally policies apply` of the release before the squash did. */
  async function migrateAsBefore(url: string): Promise<void> {
    const { runner } = await import('node-pg-migrate');
    for (const [dir, table] of [
      ['sql/gateway', 'gateway_migrations'],
      ['sql', 'pgmigrations'],
    ] as const) {
      await runner({
        databaseUrl: url,
        dir: fixture(dir),
        direction: 'up',
        migrationsTable: table,
        migrationsSchema: 'tally_migrations',
        createMigrationsSchema: true,
        checkOrder: true,
        singleTransaction: true,
        migrationLoaderStrategies: [{ extensions: ['.sql'], loader: sqlMigrations() }],
        log: () => {},
      });
    }
    const { default: postgres } = await import('postgres');
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      await sql.begin(async (tx) => {
        for (const file of readdirSync(fixture('policies')).sort()) {
          for (const statement of splitStatements(readFileSync(fixture(`policies/${file}`), 'utf8'))) {
            await tx.unsafe(statement);
          }
        }
      });
    } finally {
      await sql.end();
    }
  }

  it('is recognised and brought to exactly the state of a fresh database, keeping its rows', async () => {
    const old = await createTestDatabase({ empty: true });
    const fresh = await createTestDatabase({ empty: true });
    try {
      await migrateAsBefore(old.url);
      const [ws] = await old.admin<{ id: string }[]>`SELECT tally.create_workspace('Before', 'EUR', 'test') AS id`;
      await old.admin`INSERT INTO public.contacts (workspace_id, name) VALUES (${ws!.id}, 'Kept')`;

      expect(await migrate(old.url)).toEqual(APP_SET.filter((n) => n !== '000_baseline'));
      expect(await migrate(fresh.url)).toEqual([...GATEWAY_SET, ...APP_SET]);
      expect(await catalogOf(old.admin)).toEqual(await catalogOf(fresh.admin));
      expect(await old.admin`SELECT name FROM tally_migrations.pgmigrations ORDER BY id`).toEqual(
        APP_SET.map((name) => ({ name })),
      );
      expect(await old.admin`SELECT name FROM public.contacts`).toEqual([{ name: 'Kept' }]);
      expect(await migrate(old.url)).toEqual([]);
    } finally {
      await old.drop();
      await fresh.drop();
    }
  });

  it('is refused, naming what is missing, when it stopped part of the way', async () => {
    const old = await createTestDatabase({ empty: true });
    try {
      await migrateAsBefore(old.url);
      await old.admin`DELETE FROM tally_migrations.pgmigrations WHERE name = '167_citus_bound_shards'`;
      await expect(migrate(old.url)).rejects.toThrow(
        'the database was migrated by a pre-release of Tally that stopped before 167_citus_bound_shards: finish with that release\'s "tally migrate" first',
      );
    } finally {
      await old.drop();
    }
  });
});
