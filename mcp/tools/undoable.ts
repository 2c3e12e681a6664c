import { uuid, type JsonSchema } from '../../gateway/fields.js';
import type { TableClient } from '../gateway-client.js';
import { array } from '../schemas.js';

// How a write tool names the change it made, so that undo_change can put it back: from what the
// write's own transaction reported (TableClient.changes), never from a read of the log after it,
// which could find an older change (a creation, when this update changed nothing) or another
// client's.

/** The output fields of a write that names its change. */
export const changeOutput: Record<string, JsonSchema> = {
  activity_id: uuid('The change this call made: undo_change with this id puts it back. Absent when nothing changed'),
  changed: {
    type: 'boolean',
    description: 'false when the call changed nothing (the record already had these values): there is nothing to undo',
  },
};

/** The output fields of a write of several records. */
export const changesOutput: Record<string, JsonSchema> = {
  activity_ids: array(
    uuid('A change'),
    'The changes this call made, in order: undo_changes with them puts them all back',
  ),
};

type Undoable = { fields: { activity_id?: string; changed?: boolean }; text: string };

/** The change the tool call's write made, for its result: `activity_id`, and a sentence saying how to undo it. */
export function undoable(db: TableClient): Undoable {
  const made = db.changes();
  if (made === undefined) return { fields: {}, text: '' };
  const [id] = made.ids;
  if (made.count === 0 || id === undefined)
    return {
      fields: { changed: false },
      text: ' Nothing changed (the record already had these values), so there is nothing to undo.',
    };
  return { fields: { activity_id: id, changed: true }, text: ` To undo it: undo_change with activity_id ${id}.` };
}

/** The changes of a tool call that wrote several records. */
export function undoableAll(db: TableClient): { fields: { activity_ids?: string[] }; text: string } {
  const made = db.changes();
  if (made === undefined || made.ids.length === 0) return { fields: {}, text: '' };
  return {
    fields: { activity_ids: made.ids },
    text: ` To undo them all: undo_changes with the ${made.ids.length} activity_ids of this result.`,
  };
}
