// Deny by default: a relation that holds tenants' rows is served only while row-level security
// isolates them. A table with the tenant column (EngineConfig.tenantColumn) is isolated when
// row-level security is enabled and forced on it with at least one policy; a materialized view
// or foreign table with it never is (neither has row-level security). A view is isolated when
// every tenant relation it reads, through views of views, is, and it reads them under row-level
// security: a view runs as its owner unless it is security_invoker, and an owner that is a
// superuser or has BYPASSRLS reads every tenant's rows. Whatever is not isolated is left out of
// the schema cache (load.ts), with the functions that return its rows, so no path of the engine
// reaches it: each is answered by the reason it is withheld (withheldError) until a reload finds
// it isolated. A table granted before its policy was served by the next reload, so one workspace
// could write into another's.

import { catalogue, type ApiError } from '../errors/catalogue.js';
import { relationKey, type Relation, type Withheld } from './types.js';

/** A relation of any user schema that has the tenant column, and its row-level security. */
export interface TenantRelationRow {
  oid: number;
  schema: string;
  name: string;
  /** pg_class.relkind: r, p (tables), f (foreign table), m (materialized view). */
  relkind: string;
  rls: boolean;
  forced: boolean;
  policies: number;
}

/** A view or materialized view of any user schema, and the relations its query reads. */
export interface ViewReadsRow {
  oid: number;
  schema: string;
  name: string;
  /** Its query reads tables as a role that row-level security does not hold (or, materialized, as no one). */
  bypass: boolean;
  reads: number[];
}

const qualified = (r: { schema: string; name: string }) => `${r.schema}.${r.name}`;

/** The reason a tenant table is not isolated, or undefined when it is. */
function tableReason(t: TenantRelationRow, column: string): string | undefined {
  const name = qualified(t);
  if (t.relkind === 'm' || t.relkind === 'f')
    return `${name} has the tenant column ${column} and, as a ${t.relkind === 'm' ? 'materialized view' : 'foreign table'}, no row-level security`;
  if (!t.rls) return `${name} has the tenant column ${column} but row-level security is not enabled on it`;
  if (!t.forced) return `${name} has the tenant column ${column} but its row-level security is not forced`;
  if (t.policies === 0) return `${name} has the tenant column ${column} but no row-level security policy`;
  return undefined;
}

/** Whether a relation holds tenants' rows: a tenant table, or a view that reads one (through views of views). */
export function holdsTenantRows(tenants: TenantRelationRow[], views: ViewReadsRow[]): (oid: number) => boolean {
  const tenantOids = new Set(tenants.map((t) => t.oid));
  const viewByOid = new Map(views.map((v) => [v.oid, v]));
  const reads = (oid: number, seen: Set<number>): boolean => {
    if (tenantOids.has(oid)) return true;
    const v = viewByOid.get(oid);
    if (!v || seen.has(oid)) return false;
    seen.add(oid);
    return v.reads.some((r) => reads(r, seen));
  };
  return (oid) => reads(oid, new Set());
}

/**
 * The reason a function is not isolated, or undefined: one that runs as its owner (SECURITY
 * DEFINER), an owner row-level security does not hold (a superuser or BYPASSRLS), and returns a
 * relation's tenant rows reads every tenant's, as such a view does.
 */
export function routineReason(
  routine: { schema: string; name: string; bypass: boolean },
  returned: { schema: string; name: string } | undefined,
  tenantish: boolean,
): string | undefined {
  if (!routine.bypass || !tenantish) return undefined;
  const rows = returned ? `the tenant rows of ${qualified(returned)}` : 'tenant rows';
  return `${qualified(routine)} returns ${rows} as its owner, whom row-level security does not hold (a SECURITY DEFINER function of a superuser or BYPASSRLS role): make it SECURITY INVOKER, or owned by a role without BYPASSRLS`;
}

/**
 * Each relation of `candidates` that is not isolated, by oid, with the reason. `tenants` and
 * `views` cover every user schema (a view may read a table of a schema that is not exposed);
 * `tenantish` is holdsTenantRows of them.
 */
export function unisolatedRelations(
  candidates: Relation[],
  tenants: TenantRelationRow[],
  views: ViewReadsRow[],
  column: string,
  tenantish: (oid: number) => boolean,
): Map<number, Withheld> {
  const tenantByOid = new Map(tenants.map((t) => [t.oid, t]));
  const viewByOid = new Map(views.map((v) => [v.oid, v]));
  const memo = new Map<number, string | undefined>();
  const reasonOf = (oid: number, seen: Set<number>): string | undefined => {
    if (memo.has(oid)) return memo.get(oid);
    const t = tenantByOid.get(oid);
    const v = viewByOid.get(oid);
    let reason: string | undefined;
    if (t) reason = tableReason(t, column);
    else if (v && !seen.has(oid)) {
      seen.add(oid);
      for (const read of v.reads) {
        const inner = reasonOf(read, seen);
        const name = qualified(tenantByOid.get(read) ?? viewByOid.get(read) ?? { schema: '?', name: String(read) });
        if (inner) reason = `${qualified(v)} reads ${name}: ${inner}`;
        else if (v.bypass && tenantish(read))
          reason = `${qualified(v)} reads the tenant rows of ${name} as its owner, whom row-level security does not hold (a superuser or BYPASSRLS role; a materialized view is read as no one): make it security_invoker, or owned by a role without BYPASSRLS`;
        if (reason) break;
      }
    }
    memo.set(oid, reason);
    return reason;
  };
  const out = new Map<number, Withheld>();
  for (const rel of candidates) {
    const reason = reasonOf(rel.oid, new Set());
    if (reason) out.set(rel.oid, { kind: rel.kind === 'view' ? 'view' : 'table', reason });
  }
  return out;
}

/** The answer to a request that names a withheld relation or function. */
export function withheldError(name: string, withheld: Withheld): ApiError {
  return catalogue.notIsolated(withheld.kind, name, withheld.reason);
}

/** Withheld relations by schema.name (those of exposed schemas: the others are no resource). */
export function withheldByName(relations: Map<number, Withheld>, byOid: Map<number, Relation>): Map<string, Withheld> {
  const out = new Map<string, Withheld>();
  for (const [oid, w] of relations) {
    const rel = byOid.get(oid);
    if (rel && !rel.hidden) out.set(relationKey(rel.schema, rel.name), w);
  }
  return out;
}
