// writePlan: the body and target of POST/PUT/PATCH/DELETE checked against the schema cache.
// Only columns that matched the cache are written; the body travels as one JSON parameter.

import { catalogue, INVALID_JSON, type ApiError } from '../errors/catalogue.js';
import type { ApiRequest } from '../request/types.js';
import { columnsHint, type Column, type Relation } from '../schema-cache/types.js';
import type { PlanCondition, ReadNode } from './types.js';
import { defined } from '../invariant.js';
import { parseJsonText } from '../request/json.js';

/** POST/PUT: rows of one JSON array, each written into `columns`. */
export interface InsertPlan {
  kind: 'insert';
  relation: Relation;
  columns: Column[];
  /** The rows as one JSON array. */
  bodyJson: string;
  rowCount: number;
  /** Prefer: missing=default: a key absent from a row takes the column's default, not NULL. */
  missingDefault: boolean;
  /** columns= was given: only the named keys of each object are read, the others ignored. */
  onlyNamed: boolean;
  onConflict?: { columns: string[]; action: 'update' | 'nothing' };
}

/** PATCH: one JSON object's values written into `columns` of the rows the conditions select. */
export interface UpdatePlan {
  kind: 'update';
  relation: Relation;
  columns: Column[];
  /** The new values as one JSON object. */
  bodyJson: string;
  /** Prefer: missing=default with columns=: a named column the object leaves out takes its default. */
  missingDefault: boolean;
  onlyNamed: boolean;
  conditions: PlanCondition[];
}

/** DELETE of the rows the conditions select. */
export interface DeletePlan {
  kind: 'delete';
  relation: Relation;
  conditions: PlanCondition[];
}

export type MutationPlan = InsertPlan | UpdatePlan | DeletePlan;

function unknownBodyColumn(rel: Relation, name: string, viewer: string | undefined): ApiError {
  return catalogue.noColumn(name, rel.name, columnsHint(rel, viewer));
}

function invalidBody(message: string, hint: string | null = null): ApiError {
  return catalogue.invalidBody(message, null, hint);
}

/** PostgREST's message for an array of objects whose keys differ, or that holds other values. */
const KEYS_MUST_MATCH = 'All object keys must match';

/** A body's rows, and its JSON text as the client sent it when it was JSON text. */
export interface BodyRows {
  rows: Record<string, unknown>[];
  /** The JSON text of the body (an object or an array of objects), or undefined for a value or CSV/form. */
  json?: string;
}

/** The body as an array of objects (JSON text or value, form text or CSV text). */
export function bodyRows(body: unknown, contentType: string | undefined): BodyRows {
  const [mediaType = ''] = (contentType ?? 'application/json').split(';');
  const type = mediaType.trim().toLowerCase();
  if (type === 'application/x-www-form-urlencoded') {
    if (typeof body !== 'string') throw invalidBody('Invalid request body: not a form');
    return { rows: [Object.fromEntries(new URLSearchParams(body))] };
  }
  if (type === 'text/csv') {
    if (typeof body !== 'string') throw invalidBody('Invalid request body: not CSV text');
    return { rows: parseCsv(body) };
  }
  if (type !== 'application/json' && type !== '' && !type.endsWith('+json')) {
    throw catalogue.unsupportedContentType(type);
  }
  let value = body;
  let json: string | undefined;
  if (typeof value === 'string' || Buffer.isBuffer(value)) {
    json = value.toString();
    value = parseJsonText(json);
  }
  if (value === undefined || value === null) throw invalidBody(INVALID_JSON);
  if (!Array.isArray(value) && (typeof value !== 'object' || value === null)) throw invalidBody(INVALID_JSON);
  const rows = Array.isArray(value) ? value : [value];
  for (const r of rows) {
    if (typeof r !== 'object' || r === null || Array.isArray(r)) throw invalidBody(KEYS_MUST_MATCH);
  }
  return { rows: rows as Record<string, unknown>[], json };
}

/** RFC 4180 CSV with a header line; an empty unquoted field is NULL. */
function parseCsv(text: string): Record<string, unknown>[] {
  const records: { value: string; quoted: boolean }[][] = [];
  let row: { value: string; quoted: boolean }[] = [];
  let field = '';
  let quoted = false;
  let inQuotes = false;
  let i = 0;
  const endField = () => {
    row.push({ value: field, quoted });
    field = '';
    quoted = false;
  };
  while (i < text.length) {
    const ch = text[i];
    if (inQuotes) {
      if (ch === '"' && text[i + 1] === '"') {
        field += '"';
        i += 2;
        continue;
      }
      if (ch === '"') {
        inQuotes = false;
        i++;
        continue;
      }
      field += ch;
      i++;
      continue;
    }
    if (ch === '"' && field === '') {
      inQuotes = true;
      quoted = true;
      i++;
      continue;
    }
    if (ch === ',') {
      endField();
      i++;
      continue;
    }
    if (ch === '\r' && text[i + 1] === '\n') i++;
    if (ch === '\n' || ch === '\r') {
      endField();
      records.push(row);
      row = [];
      i++;
      continue;
    }
    field += ch;
    i++;
  }
  if (inQuotes) throw invalidBody('Invalid request body: the CSV has an unterminated quoted field');
  if (field !== '' || quoted || row.length > 0) {
    endField();
    records.push(row);
  }
  const [header, ...lines] = records.filter((r) => !(r.length === 1 && r[0]?.value === '' && !r[0].quoted));
  if (!header) throw invalidBody('Invalid request body: the CSV needs a header line');
  return lines.map((line, n) => {
    if (line.length !== header.length)
      throw invalidBody(
        'All lines must have same number of fields',
        `Line ${n + 2} has ${line.length} fields, the header ${header.length}`,
      );
    return Object.fromEntries(
      header.map((h, k) => {
        const f = defined(line[k], 'a CSV field under its header');
        // NULL (unquoted) is PostgREST's null; an empty unquoted field is one too.
        return [h.value, (f.value === '' || f.value === 'NULL') && !f.quoted ? null : f.value];
      }),
    );
  });
}

function pickColumns(rel: Relation, names: string[], viewer: string | undefined): Column[] {
  return names.map((n) => {
    const c = rel.columns.get(n);
    if (!c) throw unknownBodyColumn(rel, n, viewer);
    return c;
  });
}

export function insertPlan(api: ApiRequest, rel: Relation, body: BodyRows, viewer?: string): InsertPlan {
  const { rows, json } = body;
  let names: string[];
  if (api.columns) names = api.columns;
  else {
    const [first] = rows;
    names = first ? Object.keys(first) : [];
    const key = [...names].sort().join('\u0000');
    for (const r of rows) {
      if (Object.keys(r).sort().join('\u0000') !== key) throw invalidBody(KEYS_MUST_MATCH);
    }
  }
  const columns = pickColumns(rel, names, viewer);
  let onConflict: InsertPlan['onConflict'];
  if (api.method === 'PUT') {
    onConflict = { columns: rel.primaryKey, action: 'update' };
  } else if (api.preferences.resolution) {
    // PostgREST ignores a resolution where there is nothing to resolve on.
    const target = api.onConflict ?? rel.primaryKey;
    if (target.length > 0) {
      pickColumns(rel, target, viewer);
      onConflict = {
        columns: target,
        action: api.preferences.resolution === 'merge-duplicates' ? 'update' : 'nothing',
      };
    }
  }
  return {
    kind: 'insert',
    relation: rel,
    columns,
    // The client's text when it sent JSON text: its numbers reach Postgres exactly.
    bodyJson: json === undefined ? JSON.stringify(rows) : json.trimStart().startsWith('[') ? json : `[${json}]`,
    rowCount: rows.length,
    missingDefault: api.preferences.missing === 'default',
    onlyNamed: api.columns !== undefined,
    onConflict,
  };
}

export function updatePlan(
  api: ApiRequest,
  rel: Relation,
  body: BodyRows,
  root: ReadNode,
  viewer?: string,
): UpdatePlan {
  const { rows, json } = body;
  // [] and [{}] change nothing, as {} does.
  const row = rows[0] ?? {};
  if (rows.length > 1)
    throw invalidBody(
      'Invalid request body: a PATCH body must be one JSON object',
      'Filters select the rows; the object holds the new values',
    );
  requireFilter('PATCH', root);
  const columns = pickColumns(rel, api.columns ?? Object.keys(row), viewer);
  return {
    kind: 'update',
    relation: rel,
    columns,
    bodyJson: json !== undefined && !json.trimStart().startsWith('[') ? json : JSON.stringify(row),
    missingDefault: api.preferences.missing === 'default',
    onlyNamed: api.columns !== undefined,
    conditions: root.conditions,
  };
}

export function deletePlan(rel: Relation, root: ReadNode): DeletePlan {
  requireFilter('DELETE', root);
  return { kind: 'delete', relation: rel, conditions: root.conditions };
}

/**
 * Safe by default: an unfiltered PATCH or DELETE would touch every row the caller can see. A
 * limit needs an order (PGRST109), so which rows change is decided by the request, not by chance.
 */
function requireFilter(method: string, root: ReadNode): void {
  if (root.conditions.length === 0) {
    throw catalogue.unfilteredMutation(method);
  }
  if (root.conditions.some((c) => c.kind === 'embedNull')) {
    throw catalogue.mutationEmbedFilter(method);
  }
  if ((root.limit !== undefined || (root.offset ?? 0) > 0) && root.order.length === 0) {
    throw catalogue.limitWithoutOrder();
  }
}

/**
 * PUT's query: no limit or offset (PGRST114), and filters that are eq on exactly the primary key
 * (PGRST105), checked before any column is looked up, as PostgREST does (a filter on a column
 * that does not exist is PGRST105 too). Returns the filters' values by column.
 */
export function putKey(api: ApiRequest, rel: Relation): Map<string, string> {
  const node = api.nodes.get('');
  if (node?.limit !== undefined || node?.offset !== undefined) throw catalogue.putLimit();
  const pk = rel.primaryKey;
  const conditions = node?.conditions ?? [];
  const eqs = new Map<string, string>();
  const ok =
    pk.length > 0 &&
    conditions.every((c) => {
      if (
        c.kind !== 'filter' ||
        c.filter.negate ||
        c.filter.op !== 'eq' ||
        c.filter.value.kind !== 'scalar' ||
        c.filter.field.json.length > 0
      )
        return false;
      eqs.set(c.filter.field.name, c.filter.value.text);
      return pk.includes(c.filter.field.name);
    }) &&
    pk.every((k) => eqs.has(k)) &&
    conditions.length === pk.length;
  if (!ok) {
    throw catalogue.invalidPut(
      pk.length ? `Filter on ${pk.map((k) => `${k}=eq.<value>`).join('&')}` : `${rel.name} has no primary key`,
    );
  }
  return eqs;
}

/**
 * PUT's body (one object, or the first of an array) must carry the key values of its filters
 * (PGRST115). Returns the body of the one row to write.
 */
export function checkPut(api: ApiRequest, rel: Relation, body: BodyRows, eqs: Map<string, string>): BodyRows {
  const { rows } = body;
  const pk = rel.primaryKey;
  const [row] = rows;
  if (row === undefined) throw invalidBody('Invalid request body: a PUT body must be one JSON object');
  for (const k of pk) {
    const v = row[k];
    if (v === undefined || v === null || String(v) !== eqs.get(k)) {
      throw catalogue.putPkMismatch(`The body must carry ${pk.join(', ')} with the values of the filters`);
    }
  }
  if (api.columns) throw catalogue.putColumns();
  // The client's text is written as it is only when it holds that one row.
  return rows.length === 1 ? body : { rows: [row] };
}
