import { uuid } from '../../gateway/fields.js';
import type { TableClient } from '../gateway-client.js';

// How a write tool names the change it made, so that undo_change can put it back.

/** The schema of the activity id an update_* or delete_* result names. */
export const changeId = uuid('The change this call made: undo_change with this id puts the record back');

/**
 * The change a write just made, from the activity log, for its result: `activity_id`, and a
 * sentence saying how to undo it. The write and this read are two calls; the record's latest
 * change is the write's unless the record changed again in between.
 */
export async function undoable(
  db: TableClient,
  table: string,
  id: string,
): Promise<{ fields: { activity_id?: string }; text: string }> {
  const [last] = await db.list<{ id: string }>(
    'activity',
    new URLSearchParams({
      select: 'id',
      table_name: `eq.${table}`,
      record_id: `eq.${id}`,
      order: 'at.desc',
      limit: '1',
    }),
  );
  if (!last) return { fields: {}, text: '' };
  return { fields: { activity_id: last.id }, text: ` To undo it: undo_change with activity_id ${last.id}.` };
}
