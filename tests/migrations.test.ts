import { readdirSync } from 'node:fs';
import { applyPolicies, migrate } from '../gateway/db/migrate.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { TENANT_TABLES, tenantTablesOf } from './harness/fixtures.js';

// The gateway's set is whatever sql/gateway/ holds, in file order.
const GATEWAY_SET = readdirSync(new URL('../sql/gateway/', import.meta.url))
  .filter((f) => f.endsWith('.sql'))
  .sort()
  .map((f) => 'gateway/' + f.replace(/\.sql$/, ''));

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

  it('go up, down to nothing, and up again cleanly', async () => {
    // Several people add migrations (005…, 010…, 020…): check those known here, in file order.
    const ran = await migrate(db.url);
    // The gateway's own set first, then the app's, each in file order.
    const gatewaySet = ran.filter((n) => n.startsWith('gateway/'));
    expect(gatewaySet).toEqual(GATEWAY_SET);
    expect(ran.slice(0, gatewaySet.length)).toEqual(gatewaySet);
    expect(ran.slice(gatewaySet.length)).toEqual([...ran.slice(gatewaySet.length)].sort());
    expect(ran).toEqual(
      expect.arrayContaining([
        '001_roles_and_internal',
        '002_finance',
        '003_admin',
        '004_publishable_keys_check',
        '005_access',
        '020_settings',
        '021_settings_passwords',
        '030_lookup_change_notify',
        '040_fund_summary',
        '050_field_rules_in_database',
      ]),
    );
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

    expect(await migrate(db.url, 'down')).toEqual([...ran].reverse());
    expect(await tables()).toEqual([]);

    expect(await migrate(db.url)).toEqual(ran);
    expect(await tables()).toEqual(afterUp);
    expect(await migrate(db.url)).toEqual([]); // nothing pending
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
});
