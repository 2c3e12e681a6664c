import { uuid } from '../../gateway/fields.js';
import { ToolError } from '../gateway-client.js';
import {
  ACTIVITY_COLUMNS,
  DEFAULT_LIMIT,
  TRACKED_TABLES,
  array,
  change,
  dateOrDateTime,
  pageOutput,
  rangeEnd,
  rangeStart,
  undoneRecord,
} from '../schemas.js';
import { READ, tool, UNDO, type Tool } from './tool.js';
import { pageFields, pageText, paging, type Paging } from './shared.js';

// The activity log: who changed what, and putting changes back. Undo works as a stack (see
// sql/169_undo_stack.sql): undoing changes newest-first always works, and a refusal names the
// newest change in the way that is not undone, so following it converges.

/** A row of public.activity, as the database answers it. */
interface ActivityRow {
  id: string;
  at: string;
  table_name: string;
  record_id: string;
  action: 'insert' | 'update' | 'delete';
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
  actor: string;
  token_name: string | null;
  surface: string;
  undo_of: string | null;
}

/** A change as an agent reads it (schemas.ts `change`): an update's changed fields only, no workspace, no nulls. */
function compact(row: ActivityRow): Record<string, unknown> {
  const out: Record<string, unknown> = {
    id: row.id,
    at: row.at,
    table: row.table_name,
    record_id: row.record_id,
    action: row.action,
  };
  if (row.action === 'update') {
    const before = row.before ?? {};
    const after = row.after ?? {};
    out.changed = Object.fromEntries(Object.keys(after).map((k) => [k, [before[k] ?? null, after[k]]]));
  } else {
    const { workspace_id: _ws, ...record } = (row.action === 'insert' ? row.after : row.before) ?? {};
    out.record = record;
  }
  out.by = row.actor === 'token' ? (row.token_name ?? 'a workspace token') : row.actor;
  out.surface = row.surface;
  if (row.undo_of) out.undo_of = row.undo_of;
  return out;
}

/** One line per record an undo puts back: "delete personal_transactions 1b2… (undoes its insert)". */
interface Undone {
  undone: string;
  table_name: string;
  record_id: string;
  action: 'insert' | 'update' | 'delete';
  activity_id: string | null;
}
const UNDO_WORDS = { insert: 'bring back', update: 'revert', delete: 'remove' } as const;
const undoneLine = (u: Undone): string => `${UNDO_WORDS[u.action]} ${u.table_name} ${u.record_id}`;

const ACTORS = ['me', 'token', 'member', 'database'] as const;
type ActivityArgs = Paging & {
  table?: string;
  record_id?: string;
  action?: 'insert' | 'update' | 'delete';
  actor?: (typeof ACTORS)[number];
  since?: string;
  until?: string;
};

export const activityTools: Tool[] = [
  tool<ActivityArgs>()({
    name: 'list_activity',
    title: 'List changes: who changed what',
    description:
      "Lists the changes of the workspace's records, newest first: every create, update and delete, through any " +
      'surface or by SQL. An update names only the fields it changed, as [before, after]; a create or delete the ' +
      'record; by is the token that made it. undo_change and undo_changes take their ids.',
    annotations: READ,
    required: [],
    input: () => ({
      ...paging,
      table: { type: 'string', enum: TRACKED_TABLES, description: 'Only changes of this table' },
      record_id: {
        type: 'string',
        minLength: 1,
        maxLength: 200,
        description: "Only changes of this record (its id; a fund participant's is fund_id/contact_id)",
      },
      action: { type: 'string', enum: ['insert', 'update', 'delete'], description: 'Only creates, updates or deletes' },
      actor: {
        type: 'string',
        enum: [...ACTORS],
        description:
          "Only changes by this token ('me'), by any workspace token ('token'), by a signed-in member, or by SQL run in the database",
      },
      since: dateOrDateTime('Only changes at or after this moment (a date: from its start, UTC)'),
      until: dateOrDateTime('Only changes at or before this moment (a date: its whole UTC day)'),
    }),
    output: { changes: array(change), ...pageOutput },
    async run(args, { db, caller }) {
      const q = new URLSearchParams({ select: ACTIVITY_COLUMNS, order: 'at.desc,id.desc' });
      if (args.table !== undefined) q.append('table_name', `eq.${args.table}`);
      if (args.record_id !== undefined) q.append('record_id', `eq.${args.record_id}`);
      if (args.action !== undefined) q.append('action', `eq.${args.action}`);
      if (args.actor === 'me') q.append('token_id', `eq.${String(caller.auth.claims.sub)}`);
      else if (args.actor !== undefined) q.append('actor', `eq.${args.actor}`);
      if (args.since !== undefined) q.append('at', `gte.${rangeStart(args.since)}`);
      if (args.until !== undefined) {
        const [op, value] = rangeEnd(args.until);
        q.append('at', `${op}.${value}`);
      }
      const page = await db.page<ActivityRow>('activity', q, args.limit ?? DEFAULT_LIMIT, args.offset ?? 0);
      return {
        structured: { changes: page.rows.map(compact), ...pageFields(page) },
        summary: pageText(page, 'changes'),
      };
    },
  }),
  tool<{ activity_id: string }>()({
    name: 'undo_change',
    title: 'Undo a change',
    description:
      'Puts the record of a change (from list_activity, or the activity_id of a write) back as it was before it: a ' +
      'deleted record comes back with its id (a fund with what its delete took), an update is reverted, a created ' +
      'record is deleted. A stack: undoing newest first always works; when a later change is in the way, the refusal ' +
      'names it: undo that one first. The undo is a change in the log too.',
    annotations: UNDO,
    required: ['activity_id'],
    input: () => ({ activity_id: uuid('The id of the change to undo (list_activity shows them)') }),
    output: { undone: uuid('The change undone'), changes: array(change, 'The changes the undo made') },
    async run(args, { db }) {
      const rows = await db.rpc<ActivityRow[]>('undo_change', { activity_id: args.activity_id });
      const what = rows.map((c) => `${c.action} of ${c.table_name} ${c.record_id}`).join(', ');
      return {
        structured: { undone: args.activity_id, changes: rows.map(compact) },
        summary: `Undid change ${args.activity_id}. The undo made: ${what || 'no change (nothing was left to put back)'}.`,
      };
    },
  }),
  tool<{ activity_ids?: string[]; since?: string; dry_run?: boolean }>()({
    name: 'undo_changes',
    title: 'Undo several changes',
    description:
      'Undoes several changes, newest first, all or nothing: those of activity_ids, or every change this token made ' +
      "since a moment ('undo everything I did since 10:00'). A refusal names the change in the way. Answers each " +
      'record put back with the id of its undo (undo_change of it redoes the change).',
    annotations: UNDO,
    required: [],
    input: () => ({
      activity_ids: {
        ...array(uuid('A change'), 'The changes to undo'),
        minItems: 1,
        maxItems: 1000,
        uniqueItems: true,
      },
      since: dateOrDateTime('Undo every change of this token at or after this moment (instead of activity_ids)'),
      dry_run: { type: 'boolean', description: 'Only say what the undo would do' },
    }),
    output: {
      undone: array(undoneRecord, 'What the undo does to each record, in the order it is done'),
      count: { type: 'integer' },
      dry_run: { type: 'boolean' },
    },
    async run(args, { db }) {
      if ((args.activity_ids === undefined) === (args.since === undefined))
        throw new ToolError('Name what to undo: activity_ids, or since (every change of this token since then).');
      const dryRun = args.dry_run === true;
      const rows = await db.rpc<Undone[]>('undo_changes', {
        activity_ids: args.activity_ids ?? null,
        since: args.since === undefined ? null : rangeStart(args.since),
        dry_run: dryRun,
      });
      const lines = rows.map(undoneLine).join('; ');
      const summary =
        rows.length === 0
          ? 'Nothing to undo: no change of this token in that range stands.'
          : dryRun
            ? `Would undo ${rows.length} change(s): ${lines}. Nothing was changed; call again without dry_run to do it.`
            : `Undid ${rows.length} change(s): ${lines}.`;
      const undone = rows.map(({ table_name, ...u }) => ({ ...u, table: table_name }));
      return { structured: { undone, count: rows.length, dry_run: dryRun }, summary };
    },
  }),
];
