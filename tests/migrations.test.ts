import { applyPolicies, migrate } from '../gateway/db/migrate.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';

describe('migrations', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase({ empty: true });
  });
  afterAll(() => db.drop());

  const tables = async (): Promise<string[]> =>
    (await db.admin<{ t: string }[]>`
      SELECT table_schema || '.' || table_name AS t FROM information_schema.tables
       WHERE table_schema IN ('public', 'tally') ORDER BY 1`).map((r) => r.t);

  it('go up, down to nothing, and up again cleanly', async () => {
    // Several people add migrations (005…, 010…, 020…): check those known here, in file order.
    const ran = await migrate(db.url);
    expect(ran).toEqual([...ran].sort());
    expect(ran).toEqual(expect.arrayContaining([
      '001_roles_and_internal', '002_finance', '003_admin', '004_publishable_keys_check', '005_access', '020_settings', '021_settings_passwords',
      '030_lookup_change_notify', '040_fund_summary', '050_field_rules_in_database',
    ]));
    const afterUp = await tables();
    expect(afterUp).toEqual(expect.arrayContaining([
      'public.personal_transactions', 'public.funds', 'public.fund_transactions', 'public.contacts',
      'public.fund_participants', 'public.categories', 'public.payment_methods', 'public.workspaces',
      'public.workspace_members', 'public.user_credentials', 'public.billing_accounts', 'public.api_tokens',
      'public.publishable_keys', 'tally.audit_log', 'tally.rate_limits', 'tally.settings_sessions', 'tally.sign_in_failures',
    ]));

    expect(await migrate(db.url, 'down')).toEqual([...ran].reverse());
    expect(await tables()).toEqual([]);

    expect(await migrate(db.url)).toEqual(ran);
    expect(await tables()).toEqual(afterUp);
    expect(await migrate(db.url)).toEqual([]); // nothing pending
  });

  it('applies the policies idempotently, forcing RLS on every tenant table', async () => {
    await applyPolicies(db.url);
    await applyPolicies(db.url);
    const rows = await db.admin<{ relname: string; relrowsecurity: boolean; relforcerowsecurity: boolean; policies: number }[]>`
      SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity,
             (SELECT count(*)::int FROM pg_policy p WHERE p.polrelid = c.oid) AS policies
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = 'public' AND c.relkind = 'r'
         AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'workspace_id')
         AND c.relname NOT IN ('workspace_members', 'billing_accounts', 'api_tokens')
       ORDER BY 1`;
    expect(rows).toEqual(['contacts', 'fund_participants', 'fund_transactions', 'funds', 'personal_transactions'].map((relname) => ({
      relname, relrowsecurity: true, relforcerowsecurity: true, policies: 1,
    })));
  });
});
