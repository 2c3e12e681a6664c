import type { BlogSuite } from './harness/suite.js';
import { tearDown } from './harness/suite.js';
import { getter, setUpConformance } from './harness/conformance.js';

// Embedding as PostgREST resolves it: relationships through views over a private schema (and
// views of views), hints by constraint, column and junction, foreign-key columns as embed
// names, self references, several foreign keys to one table, one-to-one, composite keys and
// many-to-many; PGRST200/201 bodies in PostgREST's shape.

describe('PostgREST conformance: embedding', () => {
  let s: BlogSuite;
  beforeAll(async () => {
    s = await setUpConformance();
  });
  afterAll(() => tearDown(s.db, s.t));
  const get = getter(() => s);

  it('embeds between two views over private tables, both ways', async () => {
    const books = await get('books?select=title,author:authors(name)&order=id');
    expect(books.status).toBe(200);
    expect(books.body).toEqual([
      { title: 'Emma', author: { name: 'Austen' } },
      { title: 'War and Peace', author: { name: 'Tolstoy' } },
      { title: 'Orlando', author: { name: 'Woolf' } },
      { title: 'Persuasion', author: { name: 'Austen' } },
    ]);
    const authors = await get('authors?select=name,books(title)&id=eq.1&books.order=title');
    expect(authors.body).toEqual([{ name: 'Austen', books: [{ title: 'Emma' }, { title: 'Persuasion' }] }]);
  });

  it('embeds through a view of a view with renamed columns, and by the constraint or column hint', async () => {
    const res = await get('classics?select=book_id,book title,authors(name)&order=book_id');
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { book_id: 1, 'book title': 'Emma', authors: { name: 'Austen' } },
      { book_id: 2, 'book title': 'War and Peace', authors: { name: 'Tolstoy' } },
    ]);
    const hinted = await get(
      'classics?select=book_id,a:authors!books_author_fkey(name),b:authors!writer(name)&order=book_id&limit=1',
    );
    expect(hinted.body).toEqual([{ book_id: 1, a: { name: 'Austen' }, b: { name: 'Austen' } }]);
    const back = await get('authors?select=name,classics(book_id)&id=eq.2');
    expect(back.body).toEqual([{ name: 'Tolstoy', classics: [{ book_id: 2 }] }]);
  });

  it('embeds from a view with a join and a subquery, through the columns its top query shows', async () => {
    const res = await get('book_summaries?select=id,author_name,books_by_author,authors(name)&id=eq.4');
    expect(res.status).toBe(200);
    expect(res.body).toEqual([{ id: 4, author_name: 'Austen', books_by_author: 2, authors: { name: 'Austen' } }]);
    // Two views of one table are not related without a foreign key, as in PostgREST.
    expect((await get('book_summaries?select=id,books(title)')).body.code).toBe('PGRST200');
  });

  it('embeds by the foreign-key column name and by the constraint name, with or without an alias', async () => {
    const byColumn = await get('projects?select=name,client_id(name)&id=eq.1');
    expect(byColumn.status).toBe(200);
    expect(byColumn.body).toEqual([{ name: 'Windows', client_id: { name: 'Microsoft' } }]);
    const aliased = await get('projects?select=name,client:client_id(name)&id=eq.3');
    expect(aliased.body).toEqual([{ name: 'iOS', client: { name: 'Apple' } }]);
    const byConstraint = await get('projects?select=name,projects_client_id_fkey(name)&id=eq.3');
    expect(byConstraint.body).toEqual([{ name: 'iOS', projects_client_id_fkey: { name: 'Apple' } }]);
    const hinted = await get('projects?select=name,clients!client_id(name)&id=eq.3');
    expect(hinted.body).toEqual([{ name: 'iOS', clients: { name: 'Apple' } }]);
    const byRefColumn = await get('projects?select=name,clients!id(name)&id=eq.3');
    expect(byRefColumn.body).toEqual([{ name: 'iOS', clients: { name: 'Apple' } }]);
  });

  it('resolves a self reference: the table name is the children, the column the parent', async () => {
    const res = await get('employees?select=name,manager:manager_id(name),reports:employees(name)&id=eq.2');
    expect(res.status).toBe(200);
    expect(res.body).toEqual([{ name: 'Mid', manager: { name: 'Boss' }, reports: [{ name: 'Junior' }] }]);
    const hinted = await get('employees?select=name,employees!manager_id(name)&id=eq.1&employees.order=id');
    expect(hinted.body).toEqual([{ name: 'Boss', employees: [{ name: 'Mid' }, { name: 'Other' }] }]);
  });

  it("answers 300 PGRST201 for two foreign keys to one table, in PostgREST's shape, and resolves hints", async () => {
    const res = await get('messages?select=body,people(name)');
    expect(res.status).toBe(300);
    expect(res.body).toEqual({
      code: 'PGRST201',
      message: "Could not embed because more than one relationship was found for 'messages' and 'people'",
      details: [
        {
          cardinality: 'many-to-one',
          embedding: 'messages with people',
          relationship: 'message_receiver_fkey using messages(receiver) and people(id)',
        },
        {
          cardinality: 'many-to-one',
          embedding: 'messages with people',
          relationship: 'message_sender_fkey using messages(sender) and people(id)',
        },
      ],
      hint: "Try changing 'people' to one of the following: 'people!message_receiver_fkey', 'people!message_sender_fkey'. Find the desired relationship in the 'details' key.",
    });
    const ok = await get(
      'messages?select=body,from:people!sender(name),to:people!message_receiver_fkey(name)&order=id',
    );
    expect(ok.body).toEqual([
      { body: 'hi', from: { name: 'Ann' }, to: { name: 'Ben' } },
      { body: 'hello', from: { name: 'Ben' }, to: { name: 'Ann' } },
    ]);
    // One name for two embeds: PostgREST's 42712, where the second silently replaced the first.
    const twice = await get('messages?select=people!sender(name),people!receiver(name)');
    expect(twice.status).toBe(400);
    expect(twice.body).toMatchObject({
      code: '42712',
      message: 'table name "messages_people_1" specified more than once',
      details: null,
    });
    const byColumn = await get('messages?select=body,sender(name)&id=eq.1');
    expect(byColumn.body).toEqual([{ body: 'hi', sender: { name: 'Ann' } }]);
    const sent = await get('people?select=name,messages!sender(body)&id=eq.1');
    expect(sent.body).toEqual([{ name: 'Ann', messages: [{ body: 'hi' }] }]);
  });

  it('lists the candidates of an ambiguous embed in the order PostgREST does: by referencing table, then constraint', async () => {
    // departments is the older table, so its key comes first though its name sorts last.
    const res = await get('agents?select=*,departments(*)');
    expect(res.status).toBe(300);
    expect(res.body).toEqual({
      code: 'PGRST201',
      message: "Could not embed because more than one relationship was found for 'agents' and 'departments'",
      details: [
        {
          cardinality: 'one-to-many',
          embedding: 'agents with departments',
          relationship: 'departments_head_id_fkey using agents(id) and departments(head_id)',
        },
        {
          cardinality: 'many-to-one',
          embedding: 'agents with departments',
          relationship: 'agents_department_id_fkey using agents(department_id) and departments(id)',
        },
      ],
      hint: "Try changing 'departments' to one of the following: 'departments!departments_head_id_fkey', 'departments!agents_department_id_fkey'. Find the desired relationship in the 'details' key.",
    });
  });

  it('counts related rows with rel(count), also nested and aliased, with aggregates off', async () => {
    // Before: 42703 "column projects.count does not exist".
    const res = await get('clients?select=name,projects(count)&order=id');
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { name: 'Microsoft', projects: [{ count: 2 }] },
      { name: 'Apple', projects: [{ count: 2 }] },
    ]);
    const nested = await get('people?select=name,sent:messages!sender(n:count)&order=id');
    expect(nested.body).toEqual([
      { name: 'Ann', sent: [{ n: 1 }] },
      { name: 'Ben', sent: [{ n: 1 }] },
    ]);
    // At the top level `count` stays a column name.
    expect((await get('people?select=count')).body).toMatchObject({ code: '42703' });
  });

  it("answers 400 PGRST200 with PostgREST's message and details", async () => {
    const res = await get('projects?select=*,nothing(*)');
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      code: 'PGRST200',
      message: "Could not find a relationship between 'projects' and 'nothing' in the schema cache",
      details:
        "Searched for a foreign key relationship between 'projects' and 'nothing' in the schema 'conf', but no matches were found.",
    });
    const hinted = await get('projects?select=*,clients!nope(*)');
    expect(hinted.body.details).toBe(
      "Searched for a foreign key relationship between 'projects' and 'clients' using the hint 'nope' in the schema 'conf', but no matches were found.",
    );
  });

  it('embeds one-to-one both ways as an object', async () => {
    const res = await get('people?select=name,passports(number)&order=id');
    expect(res.body).toEqual([
      { name: 'Ann', passports: { number: 'P-1' } },
      { name: 'Ben', passports: null },
    ]);
    const back = await get('passports?select=number,people(name)');
    expect(back.body).toEqual([{ number: 'P-1', people: { name: 'Ann' } }]);
  });

  it('embeds over a composite foreign key', async () => {
    const res = await get('shifts?select=label,assignments(who)&assignments.order=who&order=day');
    expect(res.body).toEqual([
      { label: 'morning', assignments: [{ who: 'Ann' }, { who: 'Cid' }] },
      { label: 'night', assignments: [{ who: 'Ben' }] },
    ]);
    const back = await get('assignments?select=who,shifts(label)&id=eq.2');
    expect(back.body).toEqual([{ who: 'Ben', shifts: { label: 'night' } }]);
  });

  it('embeds many-to-many through the junction, with the junction as a hint', async () => {
    const res = await get('users?select=name,tasks(name)&tasks.order=id&order=id');
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { name: 'Angela', tasks: [{ name: 'Design w' }, { name: 'Code w' }] },
      { name: 'Michael', tasks: [{ name: 'Design o' }, { name: 'Design ios' }] },
    ]);
    const hinted = await get('tasks?select=name,users!users_tasks(name)&id=eq.3');
    expect(hinted.body).toEqual([{ name: 'Design o', users: [{ name: 'Michael' }] }]);
  });

  it('embeds through computed relationships (functions of the row), to-many and to-one, and orders by them', async () => {
    const res = await get('projects?select=name,design_tasks(name),owner(name)&id=lt.3&order=id');
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { name: 'Windows', design_tasks: [{ name: 'Design w' }], owner: { name: 'Microsoft' } },
      { name: 'Office', design_tasks: [{ name: 'Design o' }], owner: { name: 'Microsoft' } },
    ]);
    const inner = await get('projects?select=name,design_tasks!inner()&order=id');
    expect(inner.body).toEqual([{ name: 'Windows' }, { name: 'Office' }, { name: 'iOS' }]);
    const ordered = await get('projects?select=id,owner(name)&id=in.(1,3)&order=owner(name).asc');
    expect(ordered.body).toEqual([
      { id: 3, owner: { name: 'Apple' } },
      { id: 1, owner: { name: 'Microsoft' } },
    ]);
  });
});
