// The statements of the root's description (PostgREST's OpenAPI): what the transaction's role
// may do with the relations and functions of a schema, asked of Postgres under that role.

import type { Relation, Routine } from '../schema-cache/types.js';
import { compile, sql, text } from '../sql.js';
import type { Statement } from './read.js';

const oidArray = (oids: number[]) => text(`{${oids.join(',')}}`);

/**
 * What the transaction's role may do with the columns of these relations: read, insert, update
 * (privileges, on a view only where it is updatable); delete the rows; and which are identity
 * columns. Columns it may do nothing with are left out.
 */
const columnPrivilegesStatement = (oids: number[]) =>
  compile(sql`SELECT c.oid::int AS oid, a.attname AS column,
       pg_catalog.has_column_privilege(c.oid, a.attnum, 'SELECT') AS read,
       pg_catalog.has_column_privilege(c.oid, a.attnum, 'INSERT') AND pg_catalog.pg_column_is_updatable(c.oid, a.attnum, false) AS insert,
       pg_catalog.has_column_privilege(c.oid, a.attnum, 'UPDATE') AND pg_catalog.pg_column_is_updatable(c.oid, a.attnum, false) AS update,
       pg_catalog.has_table_privilege(c.oid, 'DELETE') AND pg_catalog.pg_relation_is_updatable(c.oid, false) & 16 = 16 AS delete,
       a.attidentity <> '' AS identity
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
 WHERE c.oid = ANY(${oidArray(oids)}::oid[])
   AND pg_catalog.has_any_column_privilege(c.oid, 'SELECT, INSERT, UPDATE')`);

/** The functions of these the transaction's role may execute. */
const executableStatement = (oids: number[]) =>
  compile(sql`SELECT p.oid::int AS oid FROM pg_catalog.pg_proc p
 WHERE p.oid = ANY(${oidArray(oids)}::oid[]) AND pg_catalog.has_function_privilege(p.oid, 'EXECUTE')`);

/** The column privileges of `relations`, then the functions of `routines` the role may execute. */
export function inspectStatements(relations: Relation[], routines: Routine[]): Statement[] {
  return [columnPrivilegesStatement(relations.map((r) => r.oid)), executableStatement(routines.map((r) => r.oid))];
}
