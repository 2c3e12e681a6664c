import type { Sql } from 'postgres';

// What a database's schemas public and tally hold, as sorted lines of text: two databases with
// the same lines have the same tables, columns, constraints, indexes, functions, triggers,
// policies, grants and comments. The node-pg-migrate tables (schema tally_migrations) are left
// out; the server's poll (tally.change_version) tells data changes apart by itself.
export async function catalogOf(sql: Sql): Promise<string[]> {
  const rows = await sql<{ line: string }[]>`
    WITH ns AS (SELECT oid, nspname FROM pg_namespace WHERE nspname IN ('public', 'tally')),
    rel AS (SELECT c.* FROM pg_class c JOIN ns ON ns.oid = c.relnamespace
             WHERE NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype = 'e'))
    SELECT 'schema ' || nspname || ' ' || coalesce(n.nspacl::text, '') AS line
      FROM pg_namespace n WHERE nspname IN ('public', 'tally')
    UNION ALL
    SELECT format('relation %s %s %s rls=%s/%s acl=%s comment=%s', c.oid::regclass, c.relkind, c.relpersistence,
                  c.relrowsecurity, c.relforcerowsecurity, c.relacl, obj_description(c.oid, 'pg_class'))
      FROM rel c
    UNION ALL
    SELECT format('column %s %s %s %s notnull=%s default=%s identity=%s acl=%s comment=%s', a.attrelid::regclass,
                  a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                  pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attacl, col_description(a.attrelid, a.attnum))
      FROM pg_attribute a JOIN rel c ON c.oid = a.attrelid
      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT format('constraint %s %s %s valid=%s', k.conrelid::regclass, k.conname, pg_get_constraintdef(k.oid),
                  k.convalidated)
      FROM pg_constraint k JOIN rel c ON c.oid = k.conrelid
    UNION ALL
    SELECT 'index ' || pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN rel c ON c.oid = i.indrelid
    UNION ALL
    SELECT format('function %s acl=%s comment=%s %s', p.oid::regprocedure, p.proacl,
                  obj_description(p.oid, 'pg_proc'), pg_get_functiondef(p.oid))
      FROM pg_proc p JOIN ns ON ns.oid = p.pronamespace
     WHERE NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
    UNION ALL
    SELECT 'trigger ' || pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN rel c ON c.oid = t.tgrelid
     WHERE NOT t.tgisinternal
    UNION ALL
    SELECT format('policy %s.%s %s %s %s to=%s using=%s check=%s', schemaname, tablename, policyname, permissive,
                  cmd, roles, qual, with_check)
      FROM pg_policies WHERE schemaname IN ('public', 'tally')
    UNION ALL
    SELECT format('type %s comment=%s', t.oid::regtype, obj_description(t.oid, 'pg_type'))
      FROM pg_type t JOIN ns ON ns.oid = t.typnamespace WHERE t.typtype = 'c' AND t.typrelid IN (
        SELECT oid FROM pg_class WHERE relkind = 'c')
    UNION ALL
    SELECT format('event trigger %s %s %s', evtname, evtevent, evtfoid::regproc) FROM pg_event_trigger
    UNION ALL
    SELECT format('default acl %s %s %s', defaclrole::regrole, defaclnamespace::regnamespace, defaclacl)
      FROM pg_default_acl
    ORDER BY 1`;
  return rows.map((r) => r.line);
}
