// An in-memory SchemaCache for the unit tier: the shape loadSchemaCache builds from pg_catalog,
// written out by hand for a small blog schema, so plan and SQL compilation run without Postgres.
//
//   users(id pk, name, email unique, prefs jsonb)
//   posts(id pk, author_id → users, editor_id → users (posts_editor_fkey), title, body, meta jsonb,
//         search tsvector (generated), active daterange, tags text[], rating numeric, published bool)
//   comments(id pk default nextval, post_id → posts, user_id → users, body)
//   tags(id pk, name unique);  post_tags(post_id, tag_id) pk both: the posts ↔ tags junction
//   published_posts: a view of posts (id as its key); title_upper(posts): a computed field
//   logs: a table without a primary key
//   functions: posts_by(author int) SETOF posts STABLE, add_them(a int, b int) int IMMUTABLE,
//   rename_user(uid int, new_name text) void VOLATILE, echo(json) json, greet(name text)/greet(name text, title text),
//   ids_of(ids int[]) SETOF int, new_post(title text) posts VOLATILE, post_count() int8 STABLE

import { catalogText } from '../../../gateway/engine/sql.js';
import {
  relationKey,
  type Column,
  type Relation,
  type Relationship,
  type Routine,
  type RoutineParam,
  type SchemaCache,
} from '../../../gateway/engine/schema-cache/types.js';
import { present } from '../../harness/present.js';

export const SCHEMA = 'blog';

const TYPES: Record<string, string> = {
  text: 'pg_catalog.text',
  int4: 'pg_catalog.int4',
  int8: 'pg_catalog.int8',
  numeric: 'pg_catalog.numeric',
  bool: 'pg_catalog.bool',
  jsonb: 'pg_catalog.jsonb',
  json: 'pg_catalog.json',
  date: 'pg_catalog.date',
  tsvector: 'pg_catalog.tsvector',
  daterange: 'pg_catalog.daterange',
  timestamptz: 'pg_catalog.timestamptz',
};

interface ColumnSpec {
  type: string;
  array?: boolean;
  nullable?: boolean;
  default?: string;
  generated?: boolean;
}

function column(name: string, spec: ColumnSpec): Column {
  // Catalog text as the loader would brand it: this file stands in for loadSchemaCache.
  const typeSql = catalogText(TYPES[spec.type] + (spec.array ? '[]' : ''));
  return {
    name,
    typeSql,
    typeDisplay: spec.type + (spec.array ? '[]' : ''),
    baseType: spec.type,
    isArray: spec.array ?? false,
    nullable: spec.nullable ?? true,
    defaultExpr: spec.default === undefined ? null : catalogText(spec.default),
    generated: spec.generated ?? false,
    description: null,
  };
}

let nextOid = 1000;

function relation(
  name: string,
  kind: Relation['kind'],
  cols: Record<string, ColumnSpec>,
  primaryKey: string[],
  unique: string[][] = [],
): Relation {
  const columnList = Object.entries(cols).map(([n, s]) => column(n, s));
  return {
    oid: nextOid++,
    schema: SCHEMA,
    name,
    kind,
    columns: new Map(columnList.map((c) => [c.name, c])),
    columnList,
    primaryKey,
    uniqueKeys: primaryKey.length > 0 ? [primaryKey, ...unique] : unique,
    computed: new Map(),
    description: null,
  };
}

function param(name: string, type: string, required = true, array = false): RoutineParam {
  return { name, typeSql: catalogText(TYPES[type] + (array ? '[]' : '')), baseType: type, isArray: array, required };
}

function routine(
  name: string,
  params: RoutineParam[],
  returns: Routine['returns'],
  volatility: Routine['volatility'],
): Routine {
  return { oid: nextOid++, schema: SCHEMA, name, params, returns, volatility, description: null };
}

export interface BlogSchema {
  cache: SchemaCache;
  users: Relation;
  posts: Relation;
  comments: Relation;
  tags: Relation;
  postTags: Relation;
  publishedPosts: Relation;
  logs: Relation;
}

/** A fresh cache each call, so a test cannot leak changes into another. */
export function blogSchema(): BlogSchema {
  nextOid = 1000;
  const users = relation(
    'users',
    'table',
    {
      id: { type: 'int4', nullable: false },
      name: { type: 'text', nullable: false },
      email: { type: 'text' },
      prefs: { type: 'jsonb', nullable: false, default: "'{}'::jsonb" },
    },
    ['id'],
    [['email']],
  );
  const posts = relation(
    'posts',
    'table',
    {
      id: { type: 'int4', nullable: false },
      author_id: { type: 'int4', nullable: false },
      editor_id: { type: 'int4' },
      title: { type: 'text', nullable: false },
      body: { type: 'text' },
      meta: { type: 'jsonb', nullable: false, default: "'{}'::jsonb" },
      search: { type: 'tsvector', generated: true },
      active: { type: 'daterange' },
      tags: { type: 'text', array: true, default: "'{}'::text[]" },
      rating: { type: 'numeric' },
      published: { type: 'bool', nullable: false, default: 'false' },
    },
    ['id'],
  );
  posts.computed.set('title_upper', {
    schema: SCHEMA,
    name: 'title_upper',
    typeSql: catalogText('pg_catalog.text'),
    baseType: 'text',
    isArray: false,
  });
  const comments = relation(
    'comments',
    'table',
    {
      id: { type: 'int4', nullable: false, default: "nextval('blog.comments_id_seq'::regclass)" },
      post_id: { type: 'int4', nullable: false },
      user_id: { type: 'int4', nullable: false },
      body: { type: 'text', nullable: false },
    },
    ['id'],
  );
  const tags = relation(
    'tags',
    'table',
    { id: { type: 'int4', nullable: false }, name: { type: 'text', nullable: false } },
    ['id'],
    [['name']],
  );
  const postTags = relation(
    'post_tags',
    'table',
    { post_id: { type: 'int4', nullable: false }, tag_id: { type: 'int4', nullable: false } },
    ['post_id', 'tag_id'],
  );
  const publishedPosts = relation(
    'published_posts',
    'view',
    {
      id: { type: 'int4' },
      author_id: { type: 'int4' },
      title: { type: 'text' },
      rating: { type: 'numeric' },
    },
    ['id'],
  );
  const logs = relation('logs', 'table', { at: { type: 'timestamptz' }, line: { type: 'text' } }, []);

  const relationships = new Map<number, Relationship[]>();
  const add = (r: Relationship) => relationships.set(r.source.oid, [...(relationships.get(r.source.oid) ?? []), r]);
  // A foreign key child(cols) → parent(pcols), in both directions, as load.ts adds it.
  const fk = (constraint: string, child: Relation, cols: string[], parent: Relation, pcols: string[]) => {
    add({ cardinality: 'm2o', source: child, target: parent, constraint, sourceColumns: cols, targetColumns: pcols });
    add({ cardinality: 'o2m', source: parent, target: child, constraint, sourceColumns: pcols, targetColumns: cols });
  };
  fk('posts_author_id_fkey', posts, ['author_id'], users, ['id']);
  fk('posts_editor_fkey', posts, ['editor_id'], users, ['id']);
  fk('comments_post_id_fkey', comments, ['post_id'], posts, ['id']);
  fk('comments_user_id_fkey', comments, ['user_id'], users, ['id']);
  fk('post_tags_post_id_fkey', postTags, ['post_id'], posts, ['id']);
  fk('post_tags_tag_id_fkey', postTags, ['tag_id'], tags, ['id']);
  fk('published_posts_author_id_fkey', publishedPosts, ['author_id'], users, ['id']);
  const m2m = (src: Relation, srcFk: string, srcCols: string[], tgt: Relation, tgtFk: string, tgtCols: string[]) =>
    add({
      cardinality: 'm2m',
      source: src,
      target: tgt,
      constraint: tgtFk,
      sourceColumns: ['id'],
      targetColumns: ['id'],
      junction: {
        relation: postTags,
        sourceConstraint: srcFk,
        junctionSourceColumns: srcCols,
        junctionTargetColumns: tgtCols,
      },
    });
  m2m(posts, 'post_tags_post_id_fkey', ['post_id'], tags, 'post_tags_tag_id_fkey', ['tag_id']);
  m2m(tags, 'post_tags_tag_id_fkey', ['tag_id'], posts, 'post_tags_post_id_fkey', ['post_id']);

  const routines = new Map<string, Routine[]>();
  const fn = (r: Routine) =>
    routines.set(relationKey(r.schema, r.name), [...(routines.get(relationKey(r.schema, r.name)) ?? []), r]);
  fn(routine('posts_by', [param('author', 'int4')], { setOf: true, kind: 'composite', relation: posts }, 'stable'));
  fn(routine('add_them', [param('a', 'int4'), param('b', 'int4')], { setOf: false, kind: 'scalar' }, 'immutable'));
  fn(
    routine(
      'rename_user',
      [param('uid', 'int4'), param('new_name', 'text')],
      { setOf: false, kind: 'void' },
      'volatile',
    ),
  );
  fn(routine('echo', [param('', 'json')], { setOf: false, kind: 'scalar' }, 'immutable'));
  fn(routine('greet', [param('name', 'text')], { setOf: false, kind: 'scalar' }, 'immutable'));
  fn(routine('greet', [param('name', 'text'), param('title', 'text')], { setOf: false, kind: 'scalar' }, 'immutable'));
  fn(routine('new_post', [param('title', 'text')], { setOf: false, kind: 'composite', relation: posts }, 'volatile'));
  fn(routine('post_count', [], { setOf: false, kind: 'scalar' }, 'stable'));
  fn(routine('ids_of', [param('ids', 'int4', true, true)], { setOf: true, kind: 'scalar' }, 'stable'));

  const types = new Map(Object.entries(TYPES).map(([k, v]) => [k, catalogText(v)]));
  for (const [alias, name] of Object.entries({ integer: 'int4', int: 'int4', bigint: 'int8', boolean: 'bool' }))
    types.set(alias, catalogText(present(TYPES[name], `the type ${name}`)));

  const all = [users, posts, comments, tags, postTags, publishedPosts, logs];
  return {
    cache: {
      schemas: [SCHEMA],
      relations: new Map(all.map((r) => [relationKey(r.schema, r.name), r])),
      relationships,
      routines,
      types,
      loadedAt: new Date(0),
    },
    users,
    posts,
    comments,
    tags,
    postTags,
    publishedPosts,
    logs,
  };
}
