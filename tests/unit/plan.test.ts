// Planning (plan/read.ts, plan/write.ts, plan/routine.ts): the parsed request resolved against
// an in-memory schema cache, and the errors for names the cache does not know.

import type { Embed, ReadNode, SelectOut } from '../../gateway/engine/plan/types.js';
import { blogSchema } from './helpers/schema.js';
import type { InsertPlan, MutationPlan } from '../../gateway/engine/plan/write.js';
import { failure, plan, planRead, planRoutine, planWrite } from './helpers/pipeline.js';
import { RESERVED_KEYS } from '../../gateway/engine/request/types.js';
import { present } from '../harness/present.js';

/** The plan of a POST or PUT, which is an insert. */
function inserted(plan: MutationPlan): InsertPlan {
  if (plan.kind !== 'insert') throw new Error(`expected an insert plan, got ${plan.kind}`);
  return plan;
}

const embeds = (n: ReadNode): Embed[] => n.embeds;
const embedAt = (n: ReadNode, i: number): Embed => present(n.embeds[i], `embed ${i}`);
const keys = (select: SelectOut[]) =>
  select.map((s) =>
    s.kind === 'field' || s.kind === 'count' ? s.key : s.kind === 'embed' ? `embed:${s.embed.key}` : '*',
  );

describe('read plan', () => {
  it('resolves columns, computed fields, JSON paths and casts to the types of the cache', () => {
    const root = planRead('posts', {
      query: 'select=id,title_upper,lang:meta->>lang,meta->tags,prefs_text:title::text,rating::int',
    });
    expect(root.alias).toBe('pgrst_0');
    expect(root.relation.name).toBe('posts');
    expect(keys(root.select)).toEqual(['id', 'title_upper', 'lang', 'tags', 'prefs_text', 'rating']);
    const exprs = root.select.map((s) => (s.kind === 'field' ? s.expr : undefined));
    expect(exprs.map((e) => e?.source.kind)).toEqual(['column', 'computed', 'column', 'column', 'column', 'column']);
    expect(exprs.map((e) => [e?.typeSql, e?.baseType, e?.isArray, e?.cast])).toEqual([
      ['pg_catalog.int4', 'int4', false, undefined],
      ['pg_catalog.text', 'text', false, undefined],
      ['pg_catalog.text', 'text', false, undefined], // ->> yields text
      ['pg_catalog.jsonb', 'jsonb', false, undefined], // -> keeps jsonb
      ['pg_catalog.text', 'text', false, 'pg_catalog.text'],
      ['pg_catalog.int4', 'int', false, 'pg_catalog.int4'],
    ]);
  });

  it('takes the root range from limit/offset/Range and embedded ranges from their node', () => {
    const root = planRead('posts', {
      query: 'select=id,comments(id)&limit=5&offset=10&comments.limit=2&comments.offset=1',
    });
    expect([root.offset, root.limit]).toEqual([10, 5]);
    expect([embedAt(root, 0).node.offset, embedAt(root, 0).node.limit]).toEqual([1, 2]);
    expect(planRead('posts', { headers: { Range: '0-24' } })).toMatchObject({ offset: 0, limit: 25 });
  });

  it('embeds many-to-one, one-to-many and many-to-many relationships, numbering aliases in order', () => {
    const root = planRead('posts', {
      query: 'select=id,author:users!posts_author_id_fkey(name),comments(id),tags(name)',
    });
    expect(
      embeds(root).map((e) => [e.key, e.relationship.cardinality, e.toOne, e.node.alias, e.lateral, e.junctionAlias]),
    ).toEqual([
      ['author', 'm2o', true, 'pgrst_1', 'pgrst_2', undefined],
      ['comments', 'o2m', false, 'pgrst_3', 'pgrst_4', undefined],
      ['tags', 'm2m', false, 'pgrst_5', 'pgrst_6', 'pgrst_7'],
    ]);
    expect(embedAt(root, 2).relationship.junction?.relation.name).toBe('post_tags');
  });

  it('chooses between two foreign keys to one table by hint: constraint or column', () => {
    expect(
      embedAt(planRead('posts', { query: 'select=users!posts_editor_fkey(name)' }), 0).relationship.constraint,
    ).toBe('posts_editor_fkey');
    expect(embedAt(planRead('posts', { query: 'select=users!author_id(name)' }), 0).relationship.constraint).toBe(
      'posts_author_id_fkey',
    );
    // and by the foreign key's column or constraint name used as the embed's name
    expect(embedAt(planRead('posts', { query: 'select=editor_id(name)' }), 0)).toMatchObject({
      key: 'editor_id',
      relationship: { constraint: 'posts_editor_fkey', cardinality: 'm2o' },
    });
    expect(embedAt(planRead('users', { query: 'select=posts!posts_editor_fkey(id)' }), 0).relationship).toMatchObject({
      cardinality: 'o2m',
      sourceColumns: ['id'],
      targetColumns: ['editor_id'],
    });
    expect(embedAt(planRead('tags', { query: 'select=posts!post_tags(id)' }), 0).relationship.cardinality).toBe('m2m');
  });

  it('keeps !inner and spread, and plans embedded filters, order and is.null on embeds', () => {
    const root = planRead('posts', {
      query:
        'select=id,comments!inner(id),...users!author_id(name)&comments.id=gt.1&comments.order=id.desc&users=not.is.null',
    });
    expect(embeds(root).map((e) => [e.key, e.inner, e.spread])).toEqual([
      ['comments', true, false],
      ['users', false, true],
    ]);
    expect(embedAt(root, 0).node.conditions).toMatchObject([
      { kind: 'filter', expr: { source: { kind: 'column', column: { name: 'id' } } }, filter: { op: 'gt' } },
    ]);
    expect(embedAt(root, 0).node.order).toMatchObject([
      { direction: 'desc', expr: { source: { column: { name: 'id' } } } },
    ]);
    expect(root.conditions).toEqual([{ kind: 'embedNull', embed: embedAt(root, 1), isNull: false }]);
  });

  it('orders by a column of a to-one embed', () => {
    const root = planRead('posts', {
      query: 'select=id,author:users!author_id(name)&order=author(name).desc.nullslast,id',
    });
    expect(root.order).toMatchObject([
      { via: { key: 'author' }, direction: 'desc', nulls: 'last', expr: { source: { column: { name: 'name' } } } },
      { kind: 'field', expr: { source: { column: { name: 'id' } } } },
    ]);
    expect(present(root.order[1])).not.toHaveProperty('via');
  });

  it("orders by a column a to-one spread lifts, by its key, as the spread's output", () => {
    const root = planRead('posts', {
      query: 'select=id,...users!author_id(who:name)&order=users(who).desc,users(email)',
    });
    expect(root.order).toMatchObject([
      { kind: 'lifted', embed: { spread: true }, key: 'who', direction: 'desc' },
      { kind: 'field', via: { spread: true }, expr: { source: { column: { name: 'email' } } } },
    ]);
  });

  it('plans aggregates and count() when aggregates are enabled', () => {
    const root = planRead('posts', { query: 'select=author_id,total:rating.sum()::int,count()', aggregates: true });
    expect(root.select).toMatchObject([
      { kind: 'field', key: 'author_id' },
      { kind: 'field', key: 'total', aggregate: { fn: 'sum', cast: 'pg_catalog.int4' } },
      { kind: 'count', key: 'count' },
    ]);
  });

  it('reads a view like a table', () => {
    const root = planRead('published_posts', { query: 'select=id,users(name)' });
    expect(root.relation.kind).toBe('view');
    expect(embedAt(root, 0).relationship).toMatchObject({
      cardinality: 'm2o',
      constraint: 'published_posts_author_id_fkey',
    });
  });
});

describe('read plan errors', () => {
  it('unknown column: 400 42703 as Postgres words it, with its hint of a close column', () => {
    expect(failure(() => planRead('tags', { query: 'select=nope' }))).toEqual({
      status: 400,
      code: '42703',
      message: 'column tags.nope does not exist',
      details: null,
      hint: 'Perhaps you meant to reference the column "tags.name".',
    });
    // No column is within half of the name's length: no hint.
    expect(failure(() => planRead('tags', { query: 'select=zebra' }))).toMatchObject({ hint: null });
    expect(failure(() => planRead('tags', { query: 'nope=eq.1' }))).toMatchObject({
      code: '42703',
      message: 'column tags.nope does not exist',
    });
    expect(failure(() => planRead('tags', { query: 'order=nope' }))).toMatchObject({ code: '42703' });
    expect(failure(() => planRead('posts', { query: 'select=comments(nope)' }))).toMatchObject({
      code: '42703',
      message: 'column comments_1.nope does not exist',
    });
  });

  it('unknown table: 404 PGRST205, with a suggestion when a name is close', () => {
    expect(failure(() => planRead('post'))).toEqual({
      status: 404,
      code: 'PGRST205',
      message: "Could not find the table 'blog.post' in the schema cache",
      details: null,
      hint: "Perhaps you meant the table 'blog.posts'",
    });
    expect(failure(() => planRead('zebra'))).toMatchObject({ status: 404, code: 'PGRST205', hint: null });
  });

  it('unknown type in a cast: 400 42704', () => {
    expect(failure(() => planRead('posts', { query: 'select=id::money' }))).toEqual({
      status: 400,
      code: '42704',
      message: 'type "money" does not exist',
      details: null,
      hint: 'Cast to a built-in type such as text, integer, numeric or date',
    });
  });

  it('no relationship: 400 PGRST200', () => {
    expect(failure(() => planRead('tags', { query: 'select=users(*)' }))).toEqual({
      status: 400,
      code: 'PGRST200',
      message: "Could not find a relationship between 'tags' and 'users' in the schema cache",
      details:
        "Searched for a foreign key relationship between 'tags' and 'users' in the schema 'blog', but no matches were found.",
      hint: null,
    });
    expect(failure(() => planRead('posts', { query: 'select=users!nope(*)' }))).toMatchObject({
      code: 'PGRST200',
      details:
        "Searched for a foreign key relationship between 'posts' and 'users' using the hint 'nope' in the schema 'blog', but no matches were found.",
    });
  });

  it('two relationships: 300 PGRST201 listing the hints that would choose', () => {
    expect(failure(() => planRead('posts', { query: 'select=users(*)' }))).toEqual({
      status: 300,
      code: 'PGRST201',
      message: "Could not embed because more than one relationship was found for 'posts' and 'users'",
      details: [
        {
          cardinality: 'many-to-one',
          embedding: 'posts with users',
          relationship: 'posts_author_id_fkey using posts(author_id) and users(id)',
        },
        {
          cardinality: 'many-to-one',
          embedding: 'posts with users',
          relationship: 'posts_editor_fkey using posts(editor_id) and users(id)',
        },
      ],
      hint: "Try changing 'users' to one of the following: 'users!posts_author_id_fkey', 'users!posts_editor_fkey'. Find the desired relationship in the 'details' key.",
    });
  });

  it('filter, order or limit on a resource not embedded: 400 PGRST108', () => {
    expect(failure(() => planRead('posts', { query: 'comments.id=eq.1' }))).toEqual({
      status: 400,
      code: 'PGRST108',
      message: "'comments' is not an embedded resource in this request",
      details: null,
      hint: "Verify that 'comments' is included in the 'select' query parameter.",
    });
    expect(failure(() => planRead('posts', { query: 'select=id&comments.limit=1' }))).toMatchObject({
      code: 'PGRST108',
    });
    expect(failure(() => planRead('posts', { query: 'order=users(name)' }))).toMatchObject({
      status: 400,
      code: 'PGRST108',
      hint: "Verify that 'users' is included in the 'select' query parameter.",
    });
  });

  it('order by a to-many embed: 400 PGRST118', () => {
    expect(failure(() => planRead('posts', { query: 'select=id,comments(id)&order=comments(id)' }))).toEqual({
      status: 400,
      code: 'PGRST118',
      message: "A related order on 'comments' is not possible",
      details: "'posts' and 'comments' do not form a many-to-one or one-to-one relationship",
      hint: null,
    });
  });

  it('embedded resource filtered by anything but is.null: 400 PGRST100', () => {
    expect(failure(() => planRead('posts', { query: 'select=id,comments(id)&comments=eq.1' }))).toMatchObject({
      status: 400,
      code: 'PGRST100',
    });
  });

  it('aggregates while they are off: 400 PGRST123', () => {
    expect(failure(() => planRead('posts', { query: 'select=rating.sum()' }))).toEqual({
      status: 400,
      code: 'PGRST123',
      message: 'Use of aggregate functions is not allowed',
      details: null,
      hint: 'Aggregates are off on this server (TALLY_DB_AGGREGATES_ENABLED)',
    });
    expect(failure(() => planRead('posts', { query: 'select=count()' }))).toMatchObject({ code: 'PGRST123' });
  });
});

describe('write plan', () => {
  it('inserts the columns of the body, all rows as one JSON parameter', () => {
    const plan = inserted(
      planWrite('tags', {
        method: 'POST',
        body: [
          { id: 1, name: 'a' },
          { name: 'b', id: 2 },
        ],
      }).plan,
    );
    expect(plan).toMatchObject({
      kind: 'insert',
      bodyJson: '[{"id":1,"name":"a"},{"name":"b","id":2}]',
      rowCount: 2,
      missingDefault: false,
      onConflict: undefined,
    });
    expect(plan.columns.map((c) => c.name)).toEqual(['id', 'name']);
    expect(
      inserted(
        planWrite('tags', { method: 'POST', query: 'columns=name', body: { name: 'a', extra: 1 } }).plan,
      ).columns.map((c) => c.name),
    ).toEqual(['name']);
    expect(
      inserted(planWrite('tags', { method: 'POST', body: { name: 'a' }, headers: { Prefer: 'missing=default' } }).plan)
        .missingDefault,
    ).toBe(true);
  });

  it('reads CSV and form bodies', () => {
    expect(
      inserted(
        planWrite('tags', { method: 'POST', headers: { 'Content-Type': 'text/csv' }, body: 'id,name\n1,"a,b"\n2,\n' })
          .plan,
      ).bodyJson,
    ).toBe('[{"id":"1","name":"a,b"},{"id":"2","name":null}]');
    expect(
      inserted(
        planWrite('tags', {
          method: 'POST',
          headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
          body: 'id=1&name=x%20y',
        }).plan,
      ).bodyJson,
    ).toBe('[{"id":"1","name":"x y"}]');
  });

  it('upserts on the primary key or on_conflict columns', () => {
    expect(
      inserted(
        planWrite('tags', {
          method: 'POST',
          body: { id: 1, name: 'a' },
          headers: { Prefer: 'resolution=merge-duplicates' },
        }).plan,
      ).onConflict,
    ).toEqual({ columns: ['id'], action: 'update' });
    expect(
      inserted(
        planWrite('tags', {
          method: 'POST',
          query: 'on_conflict=name',
          body: { id: 1, name: 'a' },
          headers: { Prefer: 'resolution=ignore-duplicates' },
        }).plan,
      ).onConflict,
    ).toEqual({ columns: ['name'], action: 'nothing' });
    expect(
      inserted(planWrite('tags', { method: 'PUT', query: 'id=eq.1', body: { id: 1, name: 'a' } }).plan).onConflict,
    ).toEqual({
      columns: ['id'],
      action: 'update',
    });
  });

  it('updates and deletes the filtered rows', () => {
    const patch = planWrite('tags', { method: 'PATCH', query: 'id=eq.1', body: { name: 'b' } }).plan;
    if (patch.kind !== 'update') throw new Error('expected an update plan');
    expect(patch).toMatchObject({
      kind: 'update',
      bodyJson: '{"name":"b"}',
      conditions: [{ kind: 'filter', filter: { op: 'eq' } }],
    });
    expect(patch.columns.map((c) => c.name)).toEqual(['name']);
    expect(planWrite('tags', { method: 'DELETE', query: 'id=in.(1,2)' }).plan).toMatchObject({
      kind: 'delete',
      conditions: [{ filter: { op: 'in' } }],
    });
  });

  it('refuses unknown body columns (PGRST204) and bulk rows with different keys (PGRST102)', () => {
    expect(failure(() => planWrite('tags', { method: 'POST', body: { id: 1, colour: 'red' } }))).toEqual({
      status: 400,
      code: 'PGRST204',
      message: "Could not find the 'colour' column of 'tags' in the schema cache",
      details: null,
      hint: 'The columns of tags are: id, name',
    });
    expect(failure(() => planWrite('tags', { method: 'POST', body: [{ id: 1 }, { name: 'a' }] }))).toEqual({
      status: 400,
      code: 'PGRST102',
      message: 'All object keys must match',
      details: null,
      hint: null,
    });
    expect(failure(() => planWrite('tags', { method: 'POST', body: '{oops' }))).toMatchObject({
      status: 400,
      code: 'PGRST102',
      message: 'Empty or invalid json',
    });
    expect(failure(() => planWrite('tags', { method: 'POST', body: [1, 2] }))).toMatchObject({
      code: 'PGRST102',
      message: 'All object keys must match',
    });
    expect(
      failure(() => planWrite('tags', { method: 'POST', body: 'x', headers: { 'Content-Type': 'application/xml' } })),
    ).toMatchObject({ status: 415, code: 'PGRST107' });
    expect(
      failure(() =>
        planWrite('tags', { method: 'POST', headers: { 'Content-Type': 'text/csv' }, body: 'id,name\n1\n' }),
      ),
    ).toMatchObject({
      code: 'PGRST102',
      message: 'All lines must have same number of fields',
      hint: 'Line 2 has 1 fields, the header 2',
    });
  });

  it('ignores a resolution without a conflict target, refuses an unknown on_conflict column', () => {
    const plan = planWrite('logs', {
      method: 'POST',
      body: { line: 'x' },
      headers: { Prefer: 'resolution=merge-duplicates' },
    }).plan;
    expect(plan.kind === 'insert' && plan.onConflict).toBe(undefined);
    expect(
      failure(() =>
        planWrite('tags', {
          method: 'POST',
          query: 'on_conflict=nope',
          body: { id: 1 },
          headers: { Prefer: 'resolution=merge-duplicates' },
        }),
      ),
    ).toMatchObject({ code: 'PGRST204' });
  });

  it('PUT: filters must be eq on exactly the primary key (PGRST105), the body must agree (PGRST115)', () => {
    const pgrst105 = {
      status: 405,
      code: 'PGRST105',
      message: "Filters must include all and only primary key columns with 'eq' operators",
      details: null,
      hint: 'Filter on post_id=eq.<value>&tag_id=eq.<value>',
    };
    expect(
      failure(() => planWrite('post_tags', { method: 'PUT', query: 'post_id=eq.1', body: { post_id: 1, tag_id: 2 } })),
    ).toEqual(pgrst105);
    expect(
      failure(() =>
        planWrite('post_tags', { method: 'PUT', query: 'post_id=eq.1&tag_id=gt.2', body: { post_id: 1, tag_id: 2 } }),
      ),
    ).toEqual(pgrst105);
    expect(
      failure(() =>
        planWrite('post_tags', {
          method: 'PUT',
          query: 'post_id=eq.1&tag_id=eq.2&tag_id=eq.2',
          body: { post_id: 1, tag_id: 2 },
        }),
      ),
    ).toEqual(pgrst105);
    expect(
      failure(() =>
        planWrite('post_tags', {
          method: 'PUT',
          query: 'post_id=not.eq.1&tag_id=eq.2',
          body: { post_id: 1, tag_id: 2 },
        }),
      ),
    ).toEqual(pgrst105);
    expect(failure(() => planWrite('logs', { method: 'PUT', query: 'line=eq.x', body: { line: 'x' } }))).toMatchObject({
      code: 'PGRST105',
      hint: 'logs has no primary key',
    });
    expect(
      failure(() =>
        planWrite('post_tags', { method: 'PUT', query: 'post_id=eq.1&tag_id=eq.2', body: { post_id: 1, tag_id: 3 } }),
      ),
    ).toEqual({
      status: 400,
      code: 'PGRST115',
      message: 'Payload values do not match URL in primary key column(s)',
      details: null,
      hint: 'The body must carry post_id, tag_id with the values of the filters',
    });
    expect(
      failure(() => planWrite('post_tags', { method: 'PUT', query: 'post_id=eq.1&tag_id=eq.2', body: { post_id: 1 } })),
    ).toMatchObject({ code: 'PGRST115' });
    // PostgREST takes the first object of an array
    expect(planWrite('tags', { method: 'PUT', query: 'id=eq.1', body: [{ id: 1 }, { id: 2 }] }).plan).toMatchObject({
      rowCount: 1,
      bodyJson: '[{"id":1}]',
    });
    expect(failure(() => planWrite('tags', { method: 'PUT', query: 'id=eq.1&limit=1', body: { id: 1 } }))).toEqual({
      status: 400,
      code: 'PGRST114',
      message: 'limit/offset querystring parameters are not allowed for PUT',
      details: null,
      hint: null,
    });
    expect(
      planWrite('post_tags', { method: 'PUT', query: 'post_id=eq.1&tag_id=eq.2', body: { post_id: 1, tag_id: '2' } })
        .plan.kind,
    ).toBe('insert');
  });

  it('refuses an unfiltered PATCH or DELETE, a limit without an order, and embed filters on them', () => {
    expect(failure(() => planWrite('tags', { method: 'DELETE' }))).toEqual({
      status: 400,
      code: '21000',
      message: 'DELETE requires a filter: a DELETE without one would change every row',
      details: null,
      hint: 'Add a filter such as ?id=eq.<id>. To really delete every row, say so with a filter every row matches, e.g. ?id=not.is.null',
    });
    expect(failure(() => planWrite('tags', { method: 'PATCH', body: { name: 'x' } }))).toMatchObject({
      status: 400,
      code: '21000',
      message: 'PATCH requires a filter: a PATCH without one would change every row',
    });
    // a filter on an embedded resource does not count as a filter of the table
    expect(
      failure(() => planWrite('tags', { method: 'DELETE', query: 'select=id,posts(id)&posts.id=eq.1' })),
    ).toMatchObject({ code: '21000' });
    expect(failure(() => planWrite('tags', { method: 'DELETE', query: 'id=gt.0&limit=1' }))).toEqual({
      status: 400,
      code: 'PGRST109',
      message: "A 'limit' was applied without an explicit 'order'",
      details: null,
      hint: "Apply an 'order' using unique column(s)",
    });
    expect(planWrite('tags', { method: 'DELETE', query: 'id=gt.0&order=id&limit=1' }).root).toMatchObject({ limit: 1 });
    // a limit does not stand in for a filter
    expect(failure(() => planWrite('tags', { method: 'DELETE', query: 'order=id&limit=1' }))).toMatchObject({
      code: '21000',
    });
    expect(
      failure(() =>
        planWrite('posts', { method: 'PATCH', query: 'select=id,comments(id)&comments=is.null', body: { title: 'x' } }),
      ),
    ).toMatchObject({
      code: 'PGRST100',
      message: 'PATCH cannot filter on embedded resources',
    });
    expect(
      failure(() => planWrite('tags', { method: 'PATCH', query: 'id=eq.1', body: [{ name: 'a' }, { name: 'b' }] })),
    ).toMatchObject({
      code: 'PGRST102',
      message: 'Invalid request body: a PATCH body must be one JSON object',
    });
  });
});

describe('routine plan', () => {
  it('chooses the overload whose parameters the arguments name', () => {
    expect(planRoutine('greet', { method: 'POST', body: { name: 'Ada' } }).routine.params.map((p) => p.name)).toEqual([
      'name',
    ]);
    const call = planRoutine('greet', { method: 'POST', body: { name: 'Ada', title: 'Dr' } });
    expect(call).toMatchObject({ args: { kind: 'named', json: '{"name":"Ada","title":"Dr"}' }, readOnly: true });
    expect(call.routine.params.map((p) => p.name)).toEqual(['name', 'title']);
  });

  it('takes GET arguments from the query, a repeated key as an array', () => {
    expect(planRoutine('posts_by', { query: 'author=1&select=id' })).toMatchObject({
      args: { kind: 'named', json: '{"author":"1"}' },
      readOnly: true,
    });
    expect(planRoutine('ids_of', { query: 'ids=1&ids=2' }).args).toMatchObject({ json: '{"ids":["1","2"]}' });
  });

  it('gives the whole body to one unnamed json parameter', () => {
    expect(planRoutine('echo', { method: 'POST', body: [1, { a: 2 }] }).args).toMatchObject({
      kind: 'single',
      json: '[1,{"a":2}]',
      param: { name: '' },
    });
  });

  it('marks a VOLATILE function over POST read-write', () => {
    expect(planRoutine('rename_user', { method: 'POST', body: { uid: 1, new_name: 'x' } }).readOnly).toBe(false);
  });

  it('leaves every reserved query key out of the arguments a missing function is searched with', () => {
    // One list (RESERVED_KEYS) says which keys are never arguments, for a call and for its 404.
    const query = [...Object.keys(RESERVED_KEYS).map((k) => `${k}=x`), 'a=1'].join('&');
    expect(failure(() => plan('rpc/nope', { query })).message).toBe(
      'Could not find the function blog.nope(a) in the schema cache',
    );
  });

  it('answers PGRST202 for unknown arguments, PGRST203 for ambiguity, and plans GET on VOLATILE', () => {
    expect(failure(() => planRoutine('greet', { method: 'POST', body: { nom: 'Ada' } }))).toEqual({
      status: 404,
      code: 'PGRST202',
      message: 'Could not find the function blog.greet(nom) in the schema cache',
      details:
        'Searched for the function blog.greet with parameter nom or with a single unnamed json/jsonb parameter, but no matches were found in the schema cache.',
      hint: 'Perhaps you meant to call the function blog.greet(name)',
    });
    const cache = blogSchema().cache;
    const greet = cache.routines.get('blog.greet')!;
    const twoArgs = present(greet[1], 'the two-argument greet');
    const [name, second] = twoArgs.params;
    greet.push({
      ...twoArgs,
      oid: 9999,
      params: [present(name), { ...present(second), name: 'shout', required: false }],
    });
    expect(failure(() => planRoutine('greet', { method: 'POST', body: { name: 'Ada' }, cache }))).toMatchObject({
      status: 300,
      code: 'PGRST203',
      message:
        'Could not choose the best candidate function between: blog.greet(name => text), blog.greet(name => text, shout => text)',
    });
    // GET on a VOLATILE function plans (it runs in a READ ONLY transaction, as in PostgREST).
    expect(() => planRoutine('rename_user', { query: 'uid=1&new_name=x' })).not.toThrow();
    expect(failure(() => planRoutine('greet', { method: 'POST', body: [1] }))).toMatchObject({
      status: 400,
      code: 'PGRST102',
    });
  });
});
