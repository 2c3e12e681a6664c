import { PostgrestClient } from '@supabase/postgrest-js';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { listen } from '../gateway/server.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { accessToken, startTestApp, type TestApp } from './harness/app.js';
import { tokenFor, workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpBlog, tearDown, type BlogSuite } from './harness/suite.js';
import { setUpConformance } from './harness/conformance.js';
import { first } from './harness/present.js';

// postgrest-js (what supabase-js uses) drives the running gateway unmodified.

describe('postgrest-js against /rest/v1', () => {
  let db: TestDatabase;
  let t: TestApp;
  let server: Server;
  let a: WorkspaceFixture;
  let client: PostgrestClient;

  beforeAll(async () => {
    db = await createTestDatabase();
    a = await workspaceWithData(db.admin, 'alpha');
    await workspaceWithData(db.admin, 'beta');
    const tok = await tokenFor(db.admin, a.id, 'write');
    const jwt = await accessToken({ role: 'api_write', workspace_id: a.id, scope: 'write', sub: tok.id });
    t = startTestApp(db.url, restEnv());
    server = await listen(t.app, 0, '127.0.0.1', t.ctx.config);
    const { port } = server.address() as AddressInfo;
    client = new PostgrestClient(`http://127.0.0.1:${port}/rest/v1`, {
      headers: { apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}` },
    });
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
    await t.close();
    await db.drop();
  });

  it('selects with embedding, filters, order, range and an exact count', async () => {
    await client
      .from('fund_transactions')
      .insert([
        { fund_id: a.fundId, name: 'Hotel', amount: -300, category_id: 'hotel', method_id: 'credit-card' },
        { fund_id: a.fundId, name: 'Taxi', amount: -25, category_id: 'local-transport', method_id: 'cash' },
      ])
      .throwOnError();
    const { data, count, status } = await client
      .from('funds')
      .select('name, balance, fund_transactions(name, amount)', { count: 'exact' })
      .eq('id', a.fundId)
      .order('amount', { referencedTable: 'fund_transactions', ascending: true })
      .throwOnError();
    expect(status).toBe(200);
    expect(count).toBe(1);
    expect(data).toEqual([
      {
        name: 'alpha fund',
        balance: -225,
        fund_transactions: [
          { name: 'Hotel', amount: -300 },
          { name: 'Taxi', amount: -25 },
          { name: 'Contribution', amount: 100 },
        ],
      },
    ]);

    const page = await client
      .from('fund_transactions')
      .select('name', { count: 'exact' })
      .lt('amount', 0)
      .order('name')
      .range(1, 1)
      .throwOnError();
    expect(page.data).toEqual([{ name: 'Taxi' }]);
    expect(page.count).toBe(2);
    expect(page.status).toBe(206);

    const filtered = await client
      .from('fund_transactions')
      .select('name')
      .in('name', ['Hotel', 'Contribution'])
      .not('amount', 'gt', 0)
      .throwOnError();
    expect(filtered.data).toEqual([{ name: 'Hotel' }]);
    const ored = await client
      .from('fund_transactions')
      .select('name')
      .or('amount.gt.50,name.ilike.tax*')
      .order('name')
      .throwOnError();
    expect(ored.data).toEqual([{ name: 'Contribution' }, { name: 'Taxi' }]);
    const head = await client.from('fund_transactions').select('*', { count: 'exact', head: true });
    expect([head.count, head.data]).toEqual([3, null]);
  });

  it('single() and maybeSingle()', async () => {
    const one = await client.from('funds').select('name').eq('id', a.fundId).single().throwOnError();
    expect(one.data).toEqual({ name: 'alpha fund' });
    const none = await client.from('funds').select('name').eq('name', 'nope').maybeSingle();
    expect(none.data).toBeNull();
    // single() asks the server for one object: PostgREST's wording of more than one row
    const many = await client.from('fund_transactions').select('name').single();
    expect([many.status, many.error]).toEqual([
      406,
      {
        code: 'PGRST116',
        message: 'Cannot coerce the result to a single JSON object',
        details: 'The result contains 3 rows',
        hint: null,
      },
    ]);
  });

  it('insert, upsert, update and delete with select() and single(), checked in the database', async () => {
    const ins = await client
      .from('contacts')
      .insert({ name: 'Ana', phone: '+1 555 0200' })
      .select('id, name')
      .single()
      .throwOnError();
    expect(ins.status).toBe(201);
    const id = (ins.data as { id: string }).id;
    expect(first(await db.admin`SELECT workspace_id FROM public.contacts WHERE id = ${id}`).workspace_id).toBe(a.id);

    const up = await client
      .from('contacts')
      .upsert({ workspace_id: a.id, id, name: 'Ana B' })
      .select('name')
      .throwOnError();
    expect(up.data).toEqual([{ name: 'Ana B' }]);

    const upd = await client
      .from('contacts')
      .update({ nickname: 'AB' }, { count: 'exact' })
      .eq('id', id)
      .select('name, nickname')
      .throwOnError();
    expect(upd.data).toEqual([{ name: 'Ana B', nickname: 'AB' }]);
    expect(upd.count).toBe(1);
    expect(first(await db.admin`SELECT nickname FROM public.contacts WHERE id = ${id}`).nickname).toBe('AB');

    const unfiltered = await client.from('contacts').delete();
    expect([unfiltered.status, unfiltered.error?.code]).toEqual([400, '21000']); // safe by default
    const del = await client.from('contacts').delete().eq('id', id);
    expect(del.status).toBe(204);
    expect(first(await db.admin`SELECT count(*)::int AS n FROM public.contacts WHERE id = ${id}`).n).toBe(0);

    const bad = await client
      .from('personal_transactions')
      .insert({ name: 'x', amount: -1, category_id: 'other', method_id: 'cash' });
    expect([bad.status, bad.error?.code]).toEqual([400, '23514']);
  });
});

// The same client on a schema that is not Tally's (tests/fixtures/conformance.sql): the
// PostgREST features its users lean on, as postgrest-js writes the requests.
describe('postgrest-js against a generic schema', () => {
  let s: BlogSuite;
  let server: Server;
  let client: PostgrestClient;
  beforeAll(async () => {
    s = await setUpConformance();
    server = await listen(s.t.app, 0, '127.0.0.1', s.t.ctx.config);
    const { port } = server.address() as AddressInfo;
    client = new PostgrestClient(`http://127.0.0.1:${port}/rest/v1`, {
      headers: { apikey: TEST_API_KEY, Authorization: `Bearer ${s.userJwt}` },
    });
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
    await tearDown(s.db, s.t);
  });

  it('embeds through views over a private schema, by foreign-key column, hint and self reference', async () => {
    const books = await client.from('books').select('title, author:authors(name)').order('id').limit(2).throwOnError();
    expect(books.data).toEqual([
      { title: 'Emma', author: { name: 'Austen' } },
      { title: 'War and Peace', author: { name: 'Tolstoy' } },
    ]);
    const projects = await client
      .from('projects')
      .select('name, client:client_id(name)')
      .eq('id', 3)
      .single()
      .throwOnError();
    expect(projects.data).toEqual({ name: 'iOS', client: { name: 'Apple' } });
    const messages = await client
      .from('messages')
      .select('body, from:people!sender(name), to:people!receiver(name)')
      .eq('id', 1)
      .single()
      .throwOnError();
    expect(messages.data).toEqual({ body: 'hi', from: { name: 'Ann' }, to: { name: 'Ben' } });
    const boss = await client
      .from('employees')
      .select('name, reports:employees(name)')
      .eq('id', 1)
      .order('id', { referencedTable: 'reports' })
      .single()
      .throwOnError();
    expect(boss.data).toEqual({ name: 'Boss', reports: [{ name: 'Mid' }, { name: 'Other' }] });
    const tasks = await client
      .from('users')
      .select('name, tasks(name)')
      .eq('id', 2)
      .order('id', { referencedTable: 'tasks' })
      .single()
      .throwOnError();
    expect(tasks.data).toEqual({ name: 'Michael', tasks: [{ name: 'Design o' }, { name: 'Design ios' }] });
  });

  it("reports an ambiguous embed with PostgREST's PGRST201 body", async () => {
    const { error, status } = await client.from('messages').select('body, people(name)');
    expect(status).toBe(300);
    expect(error?.code).toBe('PGRST201');
    expect(error?.details).toEqual([
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
    ]);
  });

  it('filters through an empty !inner embed, reads JSON/array paths and array literals in or()', async () => {
    const apple = await client
      .from('projects')
      .select('id, clients!inner()')
      .eq('clients.name', 'Apple')
      .order('id')
      .throwOnError();
    expect(apple.data).toEqual([{ id: 3 }, { id: 4 }]);
    const paths = await client
      .from('things')
      .select('id, data->a->>b, numbers->0')
      .eq('data->a->>b', 'y')
      .throwOnError();
    expect(paths.data).toEqual([{ id: 2, b: 'y', numbers: 4 }]);
    const ored = await client
      .from('things')
      .select('id')
      .or('numbers.cs.{1,2}, status.eq.done')
      .order('id')
      .throwOnError();
    expect(ored.data).toEqual([{ id: 1 }, { id: 2 }, { id: 3 }]);
    const contains = await client.from('things').select('id').contains('tags', ['a']).throwOnError();
    expect(contains.data).toEqual([{ id: 1 }]);
  });

  it('calls functions: GET on a VOLATILE one, counts and HEAD on a table result, custom statuses', async () => {
    const answer = await client.rpc('volatile_answer', {}, { get: true }).throwOnError();
    expect(answer.data).toBe(42);
    const rows = await client
      .rpc('projects_of', { client: 1 }, { count: 'exact' })
      .select('name')
      .order('id')
      .throwOnError();
    expect(rows.data).toEqual([{ name: 'Windows' }, { name: 'Office' }]);
    expect(rows.count).toBe(2);
    const head = await client.rpc('projects_of', { client: 2 }, { head: true, count: 'exact', get: true });
    expect([head.status, head.count, head.data]).toEqual([200, 2, null]);
    const pay = await client.rpc('pay');
    expect(pay.status).toBe(402);
    expect(pay.error).toMatchObject({
      code: 'PT402',
      message: 'Payment Required',
      details: 'Quota exceeded',
      hint: 'Upgrade your plan',
    });
  });

  it('reads unicode and spaced names and domain representations', async () => {
    const arabic = await client.from('موارد').select('هویت, "اسم کامل"'); // postgrest-js drops unquoted spaces.throwOnError();
    expect(arabic.data).toEqual([{ هویت: 1, 'اسم کامل': 'یک' }]);
    const spaced = await client.from('my table').select('"full name"').throwOnError();
    expect(spaced.data).toEqual([{ 'full name': 'Ada Lovelace' }]);
    const colors = await client.from('swatches').select('name, color').eq('color', '#0000ff').throwOnError();
    expect(colors.data).toEqual([{ name: 'blue', color: '#0000ff' }]);
  });
});

// postgrest-js's own cases where Tally answered differently, ported onto the write fixture
// (tests/fixtures/conformance-write.sql) and run in order, as the anonymous role of PostgREST's
// test configuration: counts and HEAD on functions, upsert statuses, max-affected, singular
// answers, CSV and query plans.
describe("postgrest-js's own cases", () => {
  let s: BlogSuite;
  let server: Server;
  let client: PostgrestClient;
  let rest: string;
  beforeAll(async () => {
    s = await setUpBlog(['conformance-write.sql'], { TALLY_DB_SCHEMAS: 'wr', TALLY_DB_PLAN_ENABLED: 'true' });
    server = await listen(s.t.app, 0, '127.0.0.1', s.t.ctx.config);
    const { port } = server.address() as AddressInfo;
    rest = `http://127.0.0.1:${port}/rest/v1`;
    client = new PostgrestClient(rest, { headers: { apikey: TEST_API_KEY } });
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
    await tearDown(s.db, s.t);
  });

  /** maxAffected() is typed for clients of PostgREST 13 only; an untyped client has it at run time. */
  const maxAffected = <T>(builder: T, n: number): T =>
    (builder as unknown as { maxAffected(n: number): T }).maxAffected(n);

  const shape = (res: { data: unknown; error: unknown; count: number | null; status: number }) => ({
    data: res.data,
    error: res.error,
    count: res.count,
    status: res.status,
  });

  it('counts a scalar function: exact, with HEAD, over GET', async () => {
    expect(shape(await client.rpc('add_them', { a: 1, b: 2 }, { count: 'exact' }))).toEqual({
      data: 3,
      error: null,
      count: 1,
      status: 200,
    });
    expect(shape(await client.rpc('add_them', { a: 1, b: 2 }, { head: true, count: 'exact' }))).toEqual({
      data: null,
      error: null,
      count: 1,
      status: 200,
    });
    expect(shape(await client.rpc('add_them', { a: 1, b: 2 }, { get: true, count: 'exact' }))).toEqual({
      data: 3,
      error: null,
      count: 1,
      status: 200,
    });
  });

  it('passes an array argument over GET, and answers a void function with 204', async () => {
    expect(shape(await client.rpc('variadic_param', { v: ['a', 'b'] }, { get: true }))).toEqual({
      data: ['a', 'b'],
      error: null,
      count: null,
      status: 200,
    });
    expect(shape(await client.rpc('reset_sequence', { name: 'items_id_seq', value: 16 }, { get: true }))).toMatchObject(
      { status: 405, error: { code: '25006' } },
    ); // GET is read-only, as in PostgREST
    expect(shape(await client.rpc('reset_sequence', { name: 'items_id_seq', value: 16 }))).toEqual({
      data: null,
      error: null,
      count: null,
      status: 204,
    });
  });

  it('counts with estimated and HEAD', async () => {
    expect(shape(await client.from('projects').select('*', { count: 'estimated', head: true }))).toEqual({
      data: null,
      error: null,
      count: 4,
      status: 200,
    });
    const page = await client.from('projects').select('id', { count: 'estimated' }).order('id').range(0, 1);
    expect(shape(page)).toEqual({ data: [{ id: 1 }, { id: 2 }], error: null, count: 4, status: 206 });
  });

  it('answers upserts by what they did', async () => {
    const updated = await client.from('tiobe_pls').upsert({ name: 'Java', rank: 1 }).select();
    expect(shape(updated)).toEqual({ data: [{ name: 'Java', rank: 1 }], error: null, count: null, status: 200 });
    const ignored = await client
      .from('tiobe_pls')
      .upsert({ name: 'Java', rank: 5 }, { onConflict: 'name', ignoreDuplicates: true })
      .select();
    expect(shape(ignored)).toEqual({ data: [], error: null, count: null, status: 201 });
    const inserted = await client.from('tiobe_pls').upsert({ name: 'Go', rank: 9 }, { count: 'exact' }).select();
    expect(shape(inserted)).toEqual({ data: [{ name: 'Go', rank: 9 }], error: null, count: 1, status: 201 });
    const defaults = await client
      .from('channels')
      .upsert([{ id: 50, slug: 'one' }, { slug: 'two' }], { defaultToNull: false })
      .select('slug, data')
      .rollback();
    expect(shape(defaults)).toEqual({
      data: [
        { slug: 'one', data: { foo: 'bar' } },
        { slug: 'two', data: { foo: 'bar' } },
      ],
      error: null,
      count: null,
      status: 201,
    });
  });

  it('refuses more rows than maxAffected, on tables and functions, and changes nothing', async () => {
    const over = await maxAffected(client.from('clients').update({ name: 'x' }).gt('id', 0), 1);
    expect([over.status, over.error?.code]).toEqual([400, 'PGRST124']);
    const within = await maxAffected(client.from('clients').update({ name: 'Apple' }).eq('id', 2), 1).select();
    expect(shape(within)).toEqual({ data: [{ id: 2, name: 'Apple' }], error: null, count: null, status: 200 });
    const rpcOver = await maxAffected(client.rpc('touch_clients'), 1).select('id');
    expect([rpcOver.status, rpcOver.error?.code, rpcOver.data]).toEqual([400, 'PGRST124', null]);
    const names = await client.from('clients').select('name').order('id');
    expect(names.data).toEqual([{ name: 'Microsoft' }, { name: 'Apple' }]);
  });

  it('maybeSingle: no row is null, two rows are an error', async () => {
    expect(shape(await client.from('clients').select().eq('name', 'nope').maybeSingle())).toEqual({
      data: null,
      error: null,
      count: null,
      status: 200,
    });
    // postgrest-js decides maybeSingle() itself from the rows it got back (the insert stays)
    const two = await client
      .from('clients')
      .insert([
        { id: 70, name: 'a' },
        { id: 71, name: 'b' },
      ])
      .select()
      .maybeSingle();
    expect(shape(two)).toEqual({
      data: null,
      error: {
        code: 'PGRST116',
        details: 'Results contain 2 rows, application/vnd.pgrst.object+json requires 1 row',
        hint: null,
        message: 'JSON object requested, multiple (or no) rows returned',
      },
      count: null,
      status: 406,
    });
    await client.from('clients').delete().gte('id', 70).throwOnError();
  });

  it('leaves null fields out with stripNulls(): rows, one object, and written rows', async () => {
    const rows = await client
      .from('complex_items')
      .select('id, settings, arr_data')
      .gte('id', 2)
      .order('id')
      .stripNulls();
    expect(shape(rows)).toEqual({
      data: [{ id: 2, settings: {}, arr_data: [1, 2] }, { id: 3 }],
      error: null,
      count: null,
      status: 200,
    });
    const one = await client.from('complex_items').select('id, settings').eq('id', 3).single().stripNulls();
    expect(shape(one)).toEqual({ data: { id: 3 }, error: null, count: null, status: 200 });
    const written = await client
      .from('complex_items')
      .insert({ id: 9, settings: null })
      .select('id, name, settings')
      .stripNulls()
      .rollback();
    expect(shape(written)).toEqual({ data: [{ id: 9, name: 'Default' }], error: null, count: null, status: 201 });
  });

  it('answers CSV', async () => {
    const csv = await client.from('clients').select('id, name').order('id').csv();
    expect(shape(csv)).toEqual({ data: 'id,name\n1,Microsoft\n2,Apple', error: null, count: null, status: 200 });
  });

  it('explains with options', async () => {
    const res = await client.from('clients').select().explain({ verbose: true, settings: true, format: 'json' });
    expect(res.status).toBe(200);
    expect(res.data).toEqual([expect.objectContaining({ Plan: expect.any(Object) })]);
    const text = await client.from('clients').select().explain();
    expect(text.data).toMatch(/Aggregate {2}\(cost=/);
  });

  const failure = (res: { error: unknown; status: number }) => ({ status: res.status, error: res.error });

  it("names a missing column as PostgREST's query names its table, with the hint Postgres gives", async () => {
    expect(failure(await client.from('clients').select('missing_column'))).toEqual({
      status: 400,
      error: { code: '42703', details: null, hint: null, message: 'column clients.missing_column does not exist' },
    });
    // An embedded table is aliased by its depth; the far side of a many-to-many keeps its name.
    expect(failure(await client.from('clients').select('name, projects(nme)'))).toEqual({
      status: 400,
      error: {
        code: '42703',
        details: null,
        hint: 'Perhaps you meant to reference the column "projects_1.name".',
        message: 'column projects_1.nme does not exist',
      },
    });
    expect(failure(await client.from('clients').select('projects(tasks(id))').eq('projects.tasks.nam', 'x'))).toEqual({
      status: 400,
      error: {
        code: '42703',
        details: null,
        hint: 'Perhaps you meant to reference the column "tasks_2.name".',
        message: 'column tasks_2.nam does not exist',
      },
    });
    expect(failure(await client.from('users').select('tasks(nam)'))).toMatchObject({
      error: {
        message: 'column tasks.nam does not exist',
        hint: 'Perhaps you meant to reference the column "tasks.name".',
      },
    });
  });

  it('refuses a resource embedded twice under one name with the error Postgres gives, without a hint', async () => {
    expect(failure(await client.from('projects').select('clients(id), clients(name)'))).toEqual({
      status: 400,
      error: {
        code: '42712',
        details: null,
        hint: null,
        message: 'table name "projects_clients_1" specified more than once',
      },
    });
  });

  it('looks every embedded name up before it bounds the depth', async () => {
    expect(failure(await client.from('clients').select('projects(nope(users(tasks(id))))'))).toEqual({
      status: 400,
      error: {
        code: 'PGRST200',
        details:
          "Searched for a foreign key relationship between 'projects' and 'nope' in the schema 'wr', but no matches were found.",
        hint: null,
        message: "Could not find a relationship between 'projects' and 'nope' in the schema cache",
      },
    });
    const deep = await client.from('clients').select('projects(tasks(users(tasks(id))))');
    expect([deep.status, deep.error?.code]).toEqual([400, 'PGRST100']);
  });

  it('evaluates a default for every row of missing=default, as PostgREST does: a sequence skips the given keys', async () => {
    const ids = async (rows: Record<string, unknown>[]) =>
      (await client.from('channels').insert(rows, { defaultToNull: false }).select('id').rollback().throwOnError())
        .data;
    const [first] = (await ids([{ slug: 'a' }])) as { id: number }[];
    const start = first!.id;
    expect(await ids([{ id: 100 }, { slug: 'b' }])).toEqual([{ id: 100 }, { id: start + 2 }]);
    expect(await ids([{ id: 101, slug: 'c' }])).toEqual([{ id: 101 }]);
    expect(await ids([{ slug: 'd' }])).toEqual([{ id: start + 4 }]);
    const upsert = await client
      .from('channels')
      .upsert([{ id: 102 }, { slug: 'e' }], { defaultToNull: false })
      .select('id')
      .rollback();
    expect(upsert.data).toEqual([{ id: 102 }, { id: start + 6 }]);
  });

  it("sends PostgREST's Proxy-Status on an error, naming its code", async () => {
    const statusOf = async (path: string, headers: Record<string, string> = { apikey: TEST_API_KEY }) => {
      const res = await fetch(`${rest}/${path}`, { headers });
      return [res.status, res.headers.get('proxy-status')];
    };
    expect(await statusOf('nope')).toEqual([404, 'PostgREST; error=PGRST205']);
    expect(await statusOf('clients?select=nope')).toEqual([400, 'PostgREST; error=42703']);
    expect(await statusOf('clients', { apikey: TEST_API_KEY, authorization: 'Bearer not-a-jwt' })).toEqual([
      401,
      'PostgREST; error=PGRST301',
    ]);
    expect(await statusOf('clients')).toEqual([200, null]);
  });
});
