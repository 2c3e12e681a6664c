import type postgres from 'postgres';

// The rule `tally migrate` ends with: a table of the exposed schemas that has the tenant column
// and that an API role may touch is isolated, with row-level security enabled and forced and at
// least one policy. A table that breaks it is closed at once (RLS forced without a policy: no API
// role sees or writes a row of it), and the run fails, naming it and what to add. The server
// itself refuses such a table too, at start and after a reload; this makes the mistake loud where
// it was made, with nothing served in between.

export interface IsolationRule {
  schemas: string[];
  apiRoles: string[];
  /** Unset: no tenant column, nothing to check. */
  tenantColumn: string | undefined;
}

const DEFAULT_RULE: IsolationRule = {
  schemas: ['public'],
  apiRoles: ['anon', 'api_read', 'api_write'],
  tenantColumn: 'workspace_id',
};

class UnisolatedTablesError extends Error {}

export async function refuseUnisolated(sql: postgres.Sql, given: Partial<IsolationRule> = {}): Promise<void> {
  const rule = { ...DEFAULT_RULE, ...given };
  if (!rule.tenantColumn) return;
  const open = await sql<{ schema: string; name: string }[]>`
    SELECT n.nspname AS schema, c.relname AS name
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = ANY (${rule.schemas}::text[]) AND c.relkind IN ('r', 'p')
       AND EXISTS (SELECT 1 FROM pg_attribute a
                    WHERE a.attrelid = c.oid AND a.attname = ${rule.tenantColumn} AND a.attnum > 0 AND NOT a.attisdropped)
       AND EXISTS (SELECT 1 FROM pg_roles r
                    WHERE r.rolname = ANY (${rule.apiRoles}::text[])
                      AND has_table_privilege(r.oid, c.oid, 'SELECT, INSERT, UPDATE, DELETE'))
       AND NOT (c.relrowsecurity AND c.relforcerowsecurity
                AND EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid))
     ORDER BY 1, 2`;
  if (open.length === 0) return;
  for (const t of open) {
    await sql`ALTER TABLE ${sql(t.schema)}.${sql(t.name)} ENABLE ROW LEVEL SECURITY`;
    await sql`ALTER TABLE ${sql(t.schema)}.${sql(t.name)} FORCE ROW LEVEL SECURITY`;
  }
  const names = open.map((t) => `${t.schema}.${t.name}`);
  throw new UnisolatedTablesError(
    `${names.join(', ')} ${names.length === 1 ? 'has' : 'have'} ${rule.tenantColumn} and ${names.length === 1 ? 'is' : 'are'} granted to an API role but had no row-level security policy: ${names.length === 1 ? 'its' : 'their'} row-level security is now forced, so no API role reads or writes a row, until a file of policies/ gives ${names.length === 1 ? 'it' : 'them'} one (policies/${open[0]!.name}.sql, as in docs/architecture.md, "a new tenant table"); then run "tally migrate" again`,
  );
}
