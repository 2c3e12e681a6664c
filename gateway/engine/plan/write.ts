// writePlan: the body and target of POST/PUT/PATCH/DELETE checked against the schema cache.
// Only columns that matched the cache are written; the body travels as one JSON parameter.

import { catalogue, type ApiError } from '../errors.js';
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
  onConflict?: { columns: string[]; action: 'update' | 'nothing' };
}

/** PATCH: one JSON object's values written into `columns` of the rows the conditions select. */
export interface UpdatePlan {
  kind: 'update';
  relation: Relation;
  columns: Column[];
  /** The new values as one JSON object. */
  bodyJson: string;
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
    if (typeof body !== 'string') throw invalidBody('not a form');
    return { rows: [Object.fromEntries(new URLSearchParams(body))] };
  }
  if (type === 'text/csv') {
    if (typeof body !== 'string') throw invalidBody('not CSV text');
    return { rows: parseCsv(body) };
  }
  if (type !== 'application/json' && type !== '' && !type.endsWith('+json')) {
    throw catalogue.unsupportedContentType(type);
  }
  let value = body;
  let json: string | undefined;
  if (typeof value === 'string' || Buffer.isBuffer(value)) {
    json = value.toString();
    if (json.trim() === '') throw invalidBody('empty or invalid JSON', 'Send a JSON object or an array of objects');
    value = parseJsonText(json);
  }
  if (value === undefined || value === null)
    throw invalidBody('empty or invalid JSON', 'Send a JSON object or an array of objects');
  const rows = Array.isArray(value) ? value : [value];
  for (const r of rows) {
    if (typeof r !== 'object' || r === null || Array.isArray(r)) {
      throw invalidBody('expected a JSON object or an array of JSON objects');
    }
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
  if (inQuotes) throw invalidBody('the CSV has an unterminated quoted field');
  if (field !== '' || quoted || row.length > 0) {
    endField();
    records.push(row);
  }
  const [header, ...lines] = records.filter((r) => !(r.length === 1 && r[0]?.value === '' && !r[0].quoted));
  if (!header) throw invalidBody('the CSV needs a header line');
  return lines.map((line, n) => {
    if (line.length !== header.length)
      throw invalidBody(`the CSV's line ${n + 2} has ${line.length} fields, the header ${header.length}`);
    return Object.fromEntries(
      header.map((h, k) => {
        const f = defined(line[k], 'a CSV field under its header');
        return [h.value, f.value === '' && !f.quoted ? null : f.value];
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
      if (Object.keys(r).sort().join('\u0000') !== key) {
        throw invalidBody(
          'all object keys must match',
          'Give every object of a bulk insert the same keys, or name the columns with columns=',
        );
      }
    }
  }
  const columns = pickColumns(rel, names, viewer);
  let onConflict: InsertPlan['onConflict'];
  if (api.method === 'PUT') {
    onConflict = { columns: rel.primaryKey, action: 'update' };
  } else if (api.preferences.resolution) {
    const target = api.onConflict ?? rel.primaryKey;
    if (target.length === 0) {
      throw catalogue.upsertWithoutTarget(rel.name);
    }
    pickColumns(rel, target, viewer);
    onConflict = { columns: target, action: api.preferences.resolution === 'merge-duplicates' ? 'update' : 'nothing' };
  }
  return {
    kind: 'insert',
    relation: rel,
    columns,
    // The client's text when it sent JSON text: its numbers reach Postgres exactly.
    bodyJson: json === undefined ? JSON.stringify(rows) : json.trimStart().startsWith('[') ? json : `[${json}]`,
    rowCount: rows.length,
    missingDefault: api.preferences.missing === 'default',
    onConflict,
  };
}

export function updatePlan(rel: Relation, body: BodyRows, root: ReadNode, viewer?: string): UpdatePlan {
  const { rows, json } = body;
  const [row] = rows;
  if (row === undefined || rows.length !== 1)
    throw invalidBody(
      'a PATCH body must be one JSON object',
      'Filters select the rows; the object holds the new values',
    );
  requireFilter('PATCH', root);
  const columns = pickColumns(rel, Object.keys(row), viewer);
  return {
    kind: 'update',
    relation: rel,
    columns,
    bodyJson: json !== undefined && !json.trimStart().startsWith('[') ? json : JSON.stringify(row),
    conditions: root.conditions,
  };
}

export function deletePlan(rel: Relation, root: ReadNode): DeletePlan {
  requireFilter('DELETE', root);
  return { kind: 'delete', relation: rel, conditions: root.conditions };
}

/** Safe by default: an unfiltered PATCH or DELETE would touch every row the caller can see. */
function requireFilter(method: string, root: ReadNode): void {
  if (root.conditions.length === 0) {
    throw catalogue.unfilteredMutation(method);
  }
  if (root.conditions.some((c) => c.kind === 'embedNull')) {
    throw catalogue.mutationEmbedFilter(method);
  }
  if (root.limit !== undefined || (root.offset ?? 0) > 0) {
    throw catalogue.mutationLimit(method);
  }
}

/** PUT: filters must be eq on exactly the primary key, and the body must carry the same values. */
export function checkPut(api: ApiRequest, rel: Relation, rows: Record<string, unknown>[], root: ReadNode): void {
  const pk = rel.primaryKey;
  const eqs = new Map<string, string>();
  const ok =
    pk.length > 0 &&
    root.conditions.every((c) => {
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
    root.conditions.length === pk.length;
  if (!ok) {
    throw catalogue.invalidPut(
      pk.length ? `Filter on ${pk.map((k) => `${k}=eq.<value>`).join('&')}` : `${rel.name} has no primary key`,
    );
  }
  const [row] = rows;
  if (row === undefined || rows.length !== 1) throw invalidBody('a PUT body must be one JSON object');
  for (const k of pk) {
    const v = row[k];
    if (v === undefined || v === null || String(v) !== eqs.get(k)) {
      throw catalogue.putPkMismatch(`The body must carry ${pk.join(', ')} with the values of the filters`);
    }
  }
  if (api.columns) throw catalogue.putColumns();
}
