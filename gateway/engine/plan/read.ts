// readPlan: select tree, filters, order and ranges of an ApiRequest resolved against the schema
// cache into ReadNodes. Unknown names fail here with PostgREST's errors, before any SQL exists.

import type { CatalogText } from '../sql.js';
import { catalogue } from '../errors/catalogue.js';
import type { Condition, FieldRef, NodeOptions, OrderTerm, SelectItem } from '../request/types.js';
import { BUILTIN_TYPES } from '../schema-cache/load.js';
import { withheldError } from '../schema-cache/isolation.js';
import {
  closeName,
  readableBy,
  readableColumns,
  type Relation,
  type Relationship,
  type SchemaCache,
} from '../schema-cache/types.js';
import type { Embed, FieldExpr, PlanCondition, PlanOrder, ReadNode, SelectOut } from './types.js';
import { spreadColumns } from './spread.js';
import { defined } from '../invariant.js';
import { missingColumn } from './missing-column.js';

export class AliasCounter {
  private n = 0;
  next(): string {
    return `pgrst_${this.n++}`;
  }
}

/** A node's relation and what PostgREST's query calls it, the name its errors give. */
interface Named {
  rel: Relation;
  queryName: string;
}

/** A field of a node's relation (column or computed field), with JSON path and cast. */
function resolveField(cache: SchemaCache, { rel, queryName }: Named, ref: FieldRef, cast?: string): FieldExpr {
  const found = rel.columns.get(ref.name);
  // A column kept from a caller who may read others of the relation is, to that caller, one
  // that does not exist: a 403 for it and a 400 for a name that is nowhere would tell which
  // internal columns there are. (A relation it may read nothing of stays Postgres's 42501.)
  const hidden = found && !readableBy(cache.viewer, found) && readableColumns(rel, cache.viewer).length > 0;
  const column = hidden ? undefined : found;
  const fn = found ? undefined : rel.computed.get(ref.name);
  if (!column && !fn) throw missingColumn(rel, queryName, ref.name, cache.viewer);
  const t = column ?? fn!;
  let typeSql = t.typeSql;
  let baseType = t.baseType;
  let isArray = t.isArray;
  const last = ref.json.at(-1);
  if (last) {
    if (last.arrow === '->>') {
      typeSql = BUILTIN_TYPES.text;
      baseType = 'text';
    } else {
      const json = baseType === 'json' ? 'json' : 'jsonb';
      typeSql = BUILTIN_TYPES[json];
      baseType = json;
    }
    isArray = false;
  }
  let castSql: CatalogText | undefined;
  if (cast !== undefined) {
    castSql = resolveType(cache, cast);
    typeSql = castSql;
    baseType = cast;
    isArray = false;
  }
  return {
    source: column ? { kind: 'column', column } : { kind: 'computed', fn: fn! },
    json: ref.json,
    cast: castSql,
    typeSql,
    baseType,
    isArray,
  };
}

/** A type the client named in a cast (letters, digits, _ and blanks: the grammar takes no array type), as the schema cache's catalog text for it. */
function resolveType(cache: SchemaCache, name: string): CatalogText {
  const t = cache.types.get(name.trim().toLowerCase().replace(/\s+/g, ' '));
  if (!t) throw catalogue.undefinedType(name);
  return t;
}

export function findRelation(cache: SchemaCache, schema: string, name: string): Relation {
  const rel = cache.relations.get(`${schema}.${name}`);
  const withheld = rel ? undefined : cache.withheld?.get(`${schema}.${name}`);
  if (withheld) throw withheldError(`${schema}.${name}`, withheld);
  if (!rel) {
    // Only relations the caller may read: a hint must not name a table kept from it.
    const names = [...cache.relations.values()]
      .filter((r) => r.schema === schema && r.kind !== 'composite' && readableColumns(r, cache.viewer).length > 0)
      .map((r) => r.name);
    const close = closeName(names, name);
    throw catalogue.noTable(`${schema}.${name}`, close ? `Perhaps you meant the table '${schema}.${close}'` : null);
  }
  return rel;
}

const CARDINALITY = { m2o: 'many-to-one', o2m: 'one-to-many', o2o: 'one-to-one', m2m: 'many-to-many' } as const;
/** The order PostgREST lists ambiguous relationships in (its Ord of cardinalities). */
const LISTED = { o2m: 0, m2o: 1, o2o: 2, m2m: 3 } as const;

/**
 * The one relationship `name!hint` names from `source`, by PostgREST's rules (findRel): the
 * target's name, optionally narrowed by a hint that is a constraint, a column of either side or
 * a junction; or, without a hint, a foreign key's constraint or column name (`client_id(*)`). On
 * a self reference the table's name is the one-to-many side and a column name the many-to-one.
 */
function relationshipFor(cache: SchemaCache, source: Relation, name: string, hint: string | undefined): Relationship {
  // Relations the request's role may not read are not offered: neither embedded nor named.
  const visible = (rel: Relation) => readableColumns(rel, cache.viewer).length > 0;
  // Both ends of a foreign key are in the request's schema; a computed relationship's function is
  // (the source's schema), and its rows may be of a relation of any schema, as in PostgREST.
  const all = (cache.relationships.get(source.oid) ?? []).filter(
    (r) =>
      (r.computed ? r.computed.schema : r.target.schema) === source.schema &&
      visible(r.target) &&
      (!r.junction || visible(r.junction.relation)),
  );
  const single = (cols: string[], h: string) => cols.length === 1 && cols[0] === h;
  const candidates = all.filter((r) => {
    if (r.computed) return r.computed.name === name; // a function of the row, by its name
    const m2m = r.cardinality === 'm2m';
    const fkCol = (h: string) => !m2m && single(r.sourceColumns, h);
    const refCol = (h: string) => !m2m && single(r.targetColumns, h);
    const constraint = (h: string) => !m2m && r.constraint === h;
    const named = r.target.name === name;
    if (r.source.oid === r.target.oid && !m2m) {
      if (hint === undefined) return (named && r.cardinality === 'o2m') || (fkCol(name) && r.cardinality === 'm2o');
      return named && r.cardinality === 'o2m' && refCol(hint);
    }
    if (hint === undefined) return named || (r.target.kind !== 'view' && (constraint(name) || fkCol(name)));
    return named && (constraint(hint) || fkCol(hint) || refCol(hint) || r.junction?.relation.name === hint);
  });
  const [only] = candidates;
  if (only && candidates.length === 1) return only;
  if (candidates.length === 0) {
    const withheld = cache.withheld?.get(`${source.schema}.${name}`);
    if (withheld) throw withheldError(`${source.schema}.${name}`, withheld);
    // PostgREST suggests a related resource whose name is close to the one asked for.
    const close = closeName(new Set(all.map((r) => r.target.name)), name);
    throw catalogue.noRelationship(
      source.name,
      name,
      `Searched for a foreign key relationship between '${source.name}' and '${name}'${hint ? ` using the hint '${hint}'` : ''} in the schema '${source.schema}', but no matches were found.`,
      close,
    );
  }
  const list = (cols: string[]) => cols.join(', ');
  const listed = [...candidates].sort((a, b) => LISTED[a.cardinality] - LISTED[b.cardinality]);
  const details = listed.map((r) => ({
    cardinality: CARDINALITY[r.cardinality],
    embedding: `${source.name} with ${r.target.name}`,
    relationship: r.junction
      ? `${r.junction.relation.name} using ${r.junction.sourceConstraint}(${list(r.junction.junctionSourceColumns)}) and ${r.constraint}(${list(r.junction.junctionTargetColumns)})`
      : `${r.constraint} using ${source.name}(${list(r.sourceColumns)}) and ${r.target.name}(${list(r.targetColumns)})`,
  }));
  const label = (r: Relationship) => `'${r.target.name}!${r.junction ? r.junction.relation.name : r.constraint}'`;
  throw catalogue.ambiguousEmbed(
    source.name,
    name,
    details,
    `Try changing '${name}' to one of the following: ${listed.map(label).join(', ')}. Find the desired relationship in the 'details' key.`,
  );
}

export interface ReadPlanInput {
  cache: SchemaCache;
  relation: Relation;
  select: SelectItem[];
  nodes: Map<string, NodeOptions>;
  range: { offset: number; limit?: number };
  aliases: AliasCounter;
  /** TALLY_DB_AGGREGATES_ENABLED: without it an aggregate in select is PGRST123. */
  aggregatesEnabled?: boolean;
  /** The tenant column and claim (EngineConfig.tenant), given when the caller has the claim. */
  tenant?: { column: string; claim: string };
}

/**
 * PostgREST's name for an unaliased field: the last key of its JSON path, or the column when the
 * path ends in array indexes (`data->list->0` is `list`, `numbers->0` is `numbers`).
 */
function outputKey(field: FieldRef): string {
  const keys = field.json.filter((s) => !s.index);
  return keys.at(-1)?.key ?? field.name;
}

/** The input, and what PostgREST's query calls each node's relation (its errors say that name). */
type Planning = ReadPlanInput & {
  queryNames: Map<ReadNode, string>;
  /** Each embed's relationship, found once by resolveEmbeds before any column is looked up. */
  relationships: Map<SelectItem, Relationship>;
};

const named = (input: Planning, node: ReadNode): Named => ({
  rel: node.relation,
  queryName: defined(input.queryNames.get(node), "a node's name in the query"),
});

export function readPlan(readInput: ReadPlanInput): ReadNode {
  const input: Planning = { ...readInput, queryNames: new Map(), relationships: new Map() };
  resolveEmbeds(input, input.relation, input.select);
  input.nodes = optionsByKey(input);
  // Refused before any column is looked up, as PostgREST refuses the planned tree before Postgres
  // sees a column: an aggregate on a missing column is PGRST123, not 42703.
  if (!input.aggregatesEnabled && usesAggregate(input.select)) throw catalogue.aggregatesDisabled();
  const used = new Set<string>();
  const root = buildNode(input, input.relation, input.select, '', used, input.relation.name);
  root.offset = input.range.offset;
  root.limit = input.range.limit;
  for (const path of input.nodes.keys()) {
    if (!used.has(path)) {
      // PostgREST names the first resource of the path that is not embedded where it is written.
      const segments = path.split('.');
      const at = segments.findIndex((_, i) => !used.has(segments.slice(0, i + 1).join('.')));
      const name = defined(segments[at], 'a segment of the path');
      throw catalogue.notEmbedded(name, `Verify that '${name}' is included in the 'select' query parameter.`);
    }
  }
  return root;
}

/**
 * Every embed's relationship, looked up before any column is: PostgREST resolves the whole tree
 * of embeds first (a missing or ambiguous relationship is PGRST200/201) and leaves columns to
 * Postgres, so a request with both mistakes gets the relationship's error.
 */
function resolveEmbeds(input: Planning, rel: Relation, items: SelectItem[]): void {
  for (const item of items) {
    if (item.kind !== 'embed') continue;
    const relationship = relationshipFor(input.cache, rel, item.name, item.hint);
    input.relationships.set(item, relationship);
    resolveEmbeds(input, relationship.target, item.select);
  }
}

/**
 * The filters, orders and ranges of each embed under the path of its keys. A client may name an
 * aliased embed by its relation instead (`the_tasks:tasks(…)&tasks.order=name`): PostgREST finds
 * each resource of a path by its alias or, when none has that alias, by its relation's name.
 */
function optionsByKey(input: Planning): Map<string, NodeOptions> {
  const out = new Map<string, NodeOptions>();
  for (const [path, options] of input.nodes) {
    const key = keyPath(input, path);
    const seen = out.get(key);
    out.set(
      key,
      seen
        ? {
            conditions: [...seen.conditions, ...options.conditions],
            order: options.order ?? seen.order,
            limit: options.limit ?? seen.limit,
            offset: options.offset ?? seen.offset,
          }
        : options,
    );
  }
  return out;
}

/** A path as the client wrote it, in the select's keys as far as it names embeds. */
function keyPath(input: Planning, path: string): string {
  const segments = path === '' ? [] : path.split('.');
  const keys: string[] = [];
  let items = input.select;
  for (const [i, segment] of segments.entries()) {
    const embeds = items.filter((x) => x.kind === 'embed');
    const item =
      embeds.find((e) => (e.alias ?? e.name) === segment) ??
      embeds.find((e) => input.relationships.get(e)?.target.name === segment);
    if (!item) return [...keys, ...segments.slice(i)].join('.');
    keys.push(item.alias ?? item.name);
    items = item.select;
  }
  return keys.join('.');
}

/** Whether a select, embeds included, asks for `count()` or `column.fn()`. */
function usesAggregate(items: SelectItem[]): boolean {
  return items.some(
    (item) =>
      item.kind === 'count' ||
      (item.kind === 'field' && item.aggregate !== undefined) ||
      (item.kind === 'embed' && usesAggregate(item.select)),
  );
}

/** A bare `count` in an embed's select whose relation has no column or computed field of that name. */
function relatedCount(item: SelectItem, rel: Relation, path: string): boolean {
  return (
    path !== '' &&
    item.kind === 'field' &&
    item.field.name === 'count' &&
    item.field.json.length === 0 &&
    item.cast === undefined &&
    item.aggregate === undefined &&
    !rel.columns.has('count') &&
    !rel.computed.has('count')
  );
}

/** One node of the read: its relation, its select items in order (embeds built depth first), then its options. */
function buildNode(
  input: Planning,
  rel: Relation,
  items: SelectItem[],
  path: string,
  used: Set<string>,
  queryName: string,
): ReadNode {
  const node: ReadNode = {
    relation: rel,
    alias: input.aliases.next(),
    select: [],
    conditions: [],
    order: [],
    embeds: [],
  };
  const tenantColumn = input.tenant && rel.kind !== 'composite' ? rel.columns.get(input.tenant.column) : undefined;
  if (tenantColumn && input.tenant) node.tenant = { column: tenantColumn, claim: input.tenant.claim };
  input.queryNames.set(node, queryName);
  used.add(path);
  for (const item of items) node.select.push(selectOut(input, node, item, path, used));
  applyOptions(input, node, path);
  return node;
}

function selectOut(input: Planning, node: ReadNode, item: SelectItem, path: string, used: Set<string>): SelectOut {
  if (item.kind === 'star') return { kind: 'star' };
  if (relatedCount(item, node.relation, path)) {
    // `rel(count)`: the embedded rows counted, the older spelling of `rel(count())` that
    // supabase-js users write to count related rows; a count bounded like the embed itself,
    // so it needs no aggregates switched on.
    return { kind: 'count', key: item.alias ?? 'count', cast: undefined };
  }
  if (item.kind === 'count') {
    return {
      kind: 'count',
      key: item.alias ?? 'count',
      cast: item.cast === undefined ? undefined : resolveType(input.cache, item.cast),
    };
  }
  if (item.kind === 'field') return fieldOut(input, named(input, node), item);
  const embed = embedOf(input, node, item, path, used);
  node.embeds.push(embed);
  return { kind: 'embed', embed };
}

function fieldOut(input: Planning, node: Named, item: SelectItem & { kind: 'field' }): SelectOut {
  const expr = resolveField(input.cache, node, item.field, item.cast);
  if (!item.aggregate) return { kind: 'field', expr, key: item.alias ?? outputKey(item.field) };
  const aggregate = {
    fn: item.aggregate,
    cast: item.aggregateCast === undefined ? undefined : resolveType(input.cache, item.aggregateCast),
  };
  return { kind: 'field', expr, key: item.alias ?? item.aggregate, aggregate };
}

/** An embedded resource: the relationship its name (and hint) picks, and its own node under its key's path. */
function embedOf(
  input: Planning,
  node: ReadNode,
  item: SelectItem & { kind: 'embed' },
  path: string,
  used: Set<string>,
): Embed {
  const rel = node.relation;
  const relationship = defined(input.relationships.get(item), "an embed's relationship");
  const key = item.alias ?? item.name;
  // Two embeds under one name would be one key of the row, the second hiding the first:
  // refused as PostgREST refuses it, naming the table alias its SQL gives both.
  const depth = path === '' ? 1 : path.split('.').length + 1;
  if (!item.spread && node.embeds.some((e) => !e.spread && e.key === key)) {
    throw catalogue.embeddedTwice(`${rel.name}_${key}_${depth}`);
  }
  const childPath = path === '' ? key : `${path}.${key}`;
  // PostgREST's query aliases an embedded table by its depth; through a junction it keeps its name.
  const target = relationship.target;
  const queryName = relationship.cardinality === 'm2m' ? target.name : `${target.name}_${depth}`;
  const child = buildNode(input, target, item.select, childPath, used, queryName);
  return {
    key,
    relationship,
    toOne: relationship.cardinality === 'm2o' || relationship.cardinality === 'o2o',
    inner: item.inner,
    spread: item.spread,
    node: child,
    lateral: input.aliases.next(),
    junctionAlias: relationship.junction ? input.aliases.next() : undefined,
  };
}

/** The node's filters and order, and an embedded node's limit and offset (the root's range is the request's). */
function applyOptions(input: Planning, node: ReadNode, path: string): void {
  const options = input.nodes.get(path);
  if (!options) return;
  node.conditions = options.conditions.map((c) => condition(input, node, c));
  node.order = (options.order ?? []).map((o) => orderTerm(input, node, o));
  if (path !== '') {
    node.limit = options.limit;
    node.offset = options.offset;
  }
}

function condition(input: Planning, node: ReadNode, c: Condition): PlanCondition {
  if (c.kind === 'logic')
    return { kind: 'logic', op: c.op, negate: c.negate, children: c.children.map((x) => condition(input, node, x)) };
  const f = c.filter;
  const embed =
    f.field.json.length === 0 && !node.relation.columns.has(f.field.name)
      ? node.embeds.find((e) => e.key === f.field.name)
      : undefined;
  if (embed) {
    if (f.op !== 'is' || f.value.kind !== 'is' || (f.value.value !== 'null' && f.value.value !== 'not_null')) {
      throw catalogue.parse(
        `filter (${f.field.name})`,
        null,
        `An embedded resource can only be filtered with ${f.field.name}=is.null or ${f.field.name}=not.is.null`,
      );
    }
    const isNull = (f.value.value === 'null') !== f.negate;
    return { kind: 'embedNull', embed, isNull };
  }
  return { kind: 'filter', expr: resolveField(input.cache, named(input, node), f.field), filter: f };
}

function orderTerm(input: Planning, node: ReadNode, o: OrderTerm): PlanOrder {
  if (o.relation !== undefined) {
    const via = node.embeds.find((e) => e.key === o.relation || e.node.relation.name === o.relation);
    if (!via) {
      throw catalogue.notEmbedded(
        o.relation,
        `Verify that '${o.relation}' is included in the 'select' query parameter.`,
      );
    }
    if (!via.toOne) {
      throw catalogue.relatedOrder(
        o.relation,
        `'${node.relation.name}' and '${o.relation}' do not form a many-to-one or one-to-one relationship`,
      );
    }
    const sense = { direction: o.direction, nulls: o.nulls };
    if (via.spread && o.field.json.length === 0 && spreadColumns(via.node).some((c) => c.key === o.field.name))
      return { kind: 'lifted', embed: via, key: o.field.name, ...sense };
    return { kind: 'field', expr: resolveField(input.cache, named(input, via.node), o.field), via, ...sense };
  }
  const expr = resolveField(input.cache, named(input, node), o.field);
  return { kind: 'field', expr, direction: o.direction, nulls: o.nulls };
}
