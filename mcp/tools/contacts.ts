import { nullable, uuid } from '../../gateway/fields.js';
import { searchFilter } from '../gateway-client.js';
import { CONTACT_COLUMNS, DEFAULT_LIMIT, array, contact, search, pageOutput } from '../schemas.js';
import { CREATE, DELETE, READ, UPDATE, tool, type Tool } from './tool.js';
import { given, notFound, pick, terse, pageFields, pageText, paging, type ById, type Paging } from './shared.js';
import { changeOutput, undoable } from './undoable.js';

// The workspace's roster: the members and participants of its funds.

export interface Contact {
  id: string;
  name: string;
}

type ContactArgs = {
  name: string;
  nickname?: string;
  phone?: string;
  email?: string;
  gender?: string;
  nationality?: string;
};

export const contactTools: Tool[] = [
  tool<Paging & { search?: string }>()({
    name: 'list_contacts',
    title: 'List contacts',
    description: 'Lists the roster of members and participants by name, in pages.',
    annotations: READ,
    required: [],
    input: () => ({ search: { ...search, description: 'Text to find in the name, nickname or phone' }, ...paging }),
    output: { contacts: array(contact), ...pageOutput },
    async run(args, { db }) {
      const q = new URLSearchParams({ select: CONTACT_COLUMNS, order: 'name.asc,id.asc' });
      if (args.search) q.append('or', searchFilter(['name', 'nickname', 'phone'], args.search));
      const page = await db.page<Contact>('contacts', q, args.limit ?? DEFAULT_LIMIT, args.offset ?? 0);
      const names = page.rows.length ? `: ${page.rows.map((c) => c.name).join(', ')}` : '';
      return { structured: { contacts: page.rows, ...pageFields(page) }, summary: pageText(page, 'contacts') + names };
    },
  }),
  tool<ContactArgs>()({
    name: 'create_contact',
    title: 'Add a contact',
    description: 'Adds a member or participant to the workspace roster.',
    annotations: CREATE,
    creates: true,
    required: ['name'],
    input: (f) => f.contact,
    output: { contact, ...changeOutput },
    async run(args, { db }) {
      const row = await db.insert<Contact>(
        'contacts',
        given(args, ['name', 'nickname', 'phone', 'email', 'gender', 'nationality']),
        CONTACT_COLUMNS,
      );
      const undo = undoable(db);
      return {
        structured: { contact: row, ...undo.fields },
        summary: `Added contact "${row.name}" with id ${row.id}.${undo.text}`,
      };
    },
  }),
  tool<ById & { name?: string; nickname?: string | null; phone?: string | null; email?: string | null }>()({
    name: 'update_contact',
    title: 'Update a contact',
    description:
      'Changes the given fields of a contact (as create_contact describes them); others stay, null clears an optional one.',
    annotations: UPDATE,
    required: ['id'],
    input: (f) => ({
      id: uuid('The contact id (list_contacts shows them)'),
      ...terse(pick(f.contact, ['name'])),
      nickname: nullable(terse(f.contact).nickname),
      phone: nullable(terse(f.contact).phone),
      email: nullable(terse(f.contact).email),
    }),
    output: { contact, ...changeOutput },
    async run(args, { db }) {
      const row = await db.update<Contact>(
        'contacts',
        args.id,
        given(args, ['name', 'nickname', 'phone', 'email']),
        CONTACT_COLUMNS,
      );
      if (!row) throw notFound('contact', args.id, 'list_contacts');
      const undo = undoable(db);
      return {
        structured: { contact: row, ...undo.fields },
        summary: `Updated contact "${row.name}" (${row.id}).${undo.text}`,
      };
    },
  }),

  // ---- Beyond the core tools ---------------------------------------------------------------,
  tool<ById>()({
    name: 'delete_contact',
    title: 'Delete a contact',
    description:
      'Permanently deletes a contact from the roster, and with it its taking part in funds (their transactions stay), and returns it.',
    annotations: DELETE,
    required: ['id'],
    input: () => ({ id: uuid('The contact id (list_contacts shows them)') }),
    output: { deleted: contact, ...changeOutput },
    async run(args, { db }) {
      const row = await db.remove<Contact>('contacts', args.id, CONTACT_COLUMNS);
      if (!row) throw notFound('contact', args.id, 'list_contacts');
      const undo = undoable(db);
      return {
        structured: { deleted: row, ...undo.fields },
        summary: `Deleted contact "${row.name}" (${row.id}).${undo.text}`,
      };
    },
  }),
];
