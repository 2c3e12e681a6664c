import { uuid } from '../../gateway/fields.js';
import {
  ACTIVITY_COLUMNS,
  DEFAULT_LIMIT,
  TRACKED_TABLES,
  array,
  change,
  dateOrDateTime,
  rangeStart,
  pageOutput,
} from '../schemas.js';
import { READ, tool, type Tool } from './tool.js';
import { pageFields, pageText, paging, type Paging } from './shared.js';

// The activity log: who changed what, and putting a change back.

/** A row of public.activity, as list_activity and undo_change answer it. */
interface Change {
  id: string;
  table_name: string;
  record_id: string;
  action: string;
}

export const activityTools: Tool[] = [
  tool<Paging & { table?: string; record_id?: string; since?: string }>()({
    name: 'list_activity',
    title: 'List changes: who changed what',
    description:
      "Lists the changes of the workspace's records, newest first: every create, update and delete, made through any " +
      'surface or by SQL in the database, with the record before and after, when, who (the token and its scope, or the ' +
      'database) and through which surface. Filters: table, record_id, since (a date or date-time). Pages like the other ' +
      'lists. undo_change takes the id of a change.',
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
      since: dateOrDateTime('Only changes at or after this moment (a date means from 00:00 UTC of that day)'),
    }),
    output: { changes: array(change), ...pageOutput },
    async run(args, { db }) {
      const q = new URLSearchParams({ select: ACTIVITY_COLUMNS, order: 'at.desc,id.desc' });
      if (args.table !== undefined) q.append('table_name', `eq.${args.table}`);
      if (args.record_id !== undefined) q.append('record_id', `eq.${args.record_id}`);
      if (args.since !== undefined) q.append('at', `gte.${rangeStart(args.since)}`);
      const page = await db.page<Change>('activity', q, args.limit ?? DEFAULT_LIMIT, args.offset ?? 0);
      return { structured: { changes: page.rows, ...pageFields(page) }, summary: pageText(page, 'changes') };
    },
  }),
  tool<{ activity_id: string }>()({
    name: 'undo_change',
    title: 'Undo a change',
    description:
      'Puts the record of a change (an id from list_activity, or the activity_id an update_* or delete_* result names) back ' +
      'as it was before it: a deleted record comes back with its id (a fund with the transactions and participants its ' +
      'delete took), an update is reverted, a created record is deleted. Refused, naming the later change, when the ' +
      'record changed again since. The undo is itself a change in the log.',
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    required: ['activity_id'],
    input: () => ({ activity_id: uuid('The id of the change to undo (list_activity shows them)') }),
    output: { undone: uuid('The change undone'), changes: array(change, 'The changes the undo made') },
    async run(args, { db }) {
      const changes = await db.rpc<Change[]>('undo_change', { activity_id: args.activity_id });
      const what = changes.map((c) => `${c.action} of ${c.table_name} ${c.record_id}`).join(', ');
      return {
        structured: { undone: args.activity_id, changes },
        summary: `Undid change ${args.activity_id}. The undo made: ${what || 'no change (nothing was left to put back)'}.`,
      };
    },
  }),
];
