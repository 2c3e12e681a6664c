// Request parsing (request/parse.ts, request/grammar.ts): query strings and headers → ApiRequest,
// and the grammar's errors as the client sees them. No schema cache, no database.

import { parseAccept, parsePreferences, parseRange } from '../../gateway/engine/request/parse.js';
import { parseLogic, parseOperation, parseOrder, parseSelect, toFilter } from '../../gateway/engine/request/grammar.js';
import type { Condition, FieldRef, Filter } from '../../gateway/engine/request/types.js';
import { failure, parse, SCALAR_OPERATORS } from './helpers/pipeline.js';
import { isQuantified, OPERATOR_NAMES } from '../../gateway/engine/operators.js';
import fc from 'fast-check';
import { ApiError } from '../../gateway/engine/errors/catalogue.js';
import { section } from '../harness/docs.js';

const col = (name: string): FieldRef => ({ name, json: [] });
const filter = (raw: string, name = 'x'): Filter => toFilter(col(name), parseOperation(raw));
/** The conditions of the root node of GET /posts?{query}. */
const rootConditions = (query: string): Condition[] => parse('posts', { query }).nodes.get('')?.conditions ?? [];

describe('select', () => {
  it('defaults to * and reads plain columns', () => {
    expect(parse('posts').select).toEqual([{ kind: 'star' }]);
    expect(parse('posts').selectGiven).toBe(false);
    expect(parseSelect('')).toEqual([{ kind: 'star' }]);
    expect(parseSelect('id, title')).toEqual([
      { kind: 'field', field: col('id'), alias: undefined, cast: undefined },
      { kind: 'field', field: col('title'), alias: undefined, cast: undefined },
    ]);
  });

  it('reads aliases, casts and quoted names', () => {
    expect(parseSelect('headline:title,id::text,"odd name",n:"a,b"::numeric')).toEqual([
      { kind: 'field', field: col('title'), alias: 'headline', cast: undefined },
      { kind: 'field', field: col('id'), alias: undefined, cast: 'text' },
      { kind: 'field', field: col('odd name'), alias: undefined, cast: undefined },
      { kind: 'field', field: col('a,b'), alias: 'n', cast: 'numeric' },
    ]);
    expect(parseSelect('id::double precision,n:rating::int')).toMatchObject([
      { cast: 'double precision' },
      { cast: 'int', alias: 'n' },
    ]);
  });

  it('reads JSON paths with -> and ->>, array indexes included', () => {
    expect(parseSelect('meta->lang,theme:prefs->>theme,meta->a->0->>b')).toEqual([
      {
        kind: 'field',
        field: { name: 'meta', json: [{ arrow: '->', key: 'lang' }] },
        alias: undefined,
        cast: undefined,
      },
      {
        kind: 'field',
        field: { name: 'prefs', json: [{ arrow: '->>', key: 'theme' }] },
        alias: 'theme',
        cast: undefined,
      },
      {
        kind: 'field',
        field: {
          name: 'meta',
          json: [
            { arrow: '->', key: 'a' },
            { arrow: '->', key: '0', index: true },
            { arrow: '->>', key: 'b' },
          ],
        },
        alias: undefined,
        cast: undefined,
      },
    ]);
  });

  it('reads embeds with aliases, hints, !inner and spread', () => {
    expect(
      parseSelect(
        'id,author:users!posts_author_id_fkey(name),comments!inner(*),...users!editor_id(editor:name),tags()',
      ),
    ).toEqual([
      { kind: 'field', field: col('id'), alias: undefined, cast: undefined },
      {
        kind: 'embed',
        name: 'users',
        alias: 'author',
        hint: 'posts_author_id_fkey',
        inner: false,
        spread: false,
        select: [{ kind: 'field', field: col('name'), alias: undefined, cast: undefined }],
      },
      {
        kind: 'embed',
        name: 'comments',
        alias: undefined,
        hint: undefined,
        inner: true,
        spread: false,
        select: [{ kind: 'star' }],
      },
      {
        kind: 'embed',
        name: 'users',
        alias: undefined,
        hint: 'editor_id',
        inner: false,
        spread: true,
        select: [{ kind: 'field', field: col('name'), alias: 'editor', cast: undefined }],
      },
      { kind: 'embed', name: 'tags', alias: undefined, hint: undefined, inner: false, spread: false, select: [] },
    ]);
    expect(parseSelect('users!fk!inner(id)')).toMatchObject([{ hint: 'fk', inner: true }]);
    expect(parseSelect('users!left(id)')).toMatchObject([{ hint: undefined, inner: false }]);
    expect(parseSelect('posts(comments(users(name)))')).toMatchObject([
      {
        kind: 'embed',
        name: 'posts',
        select: [{ kind: 'embed', name: 'comments', select: [{ kind: 'embed', name: 'users' }] }],
      },
    ]);
  });

  it('reads aggregates and count()', () => {
    expect(
      parseSelect('author_id,rating.sum(),top:rating.max()::int,rating::int.avg(),count(),n:count()::text'),
    ).toEqual([
      { kind: 'field', field: col('author_id'), alias: undefined, cast: undefined },
      {
        kind: 'field',
        field: col('rating'),
        alias: undefined,
        cast: undefined,
        aggregate: 'sum',
        aggregateCast: undefined,
      },
      { kind: 'field', field: col('rating'), alias: 'top', cast: undefined, aggregate: 'max', aggregateCast: 'int' },
      {
        kind: 'field',
        field: col('rating'),
        alias: undefined,
        cast: 'int',
        aggregate: 'avg',
        aggregateCast: undefined,
      },
      { kind: 'count', alias: undefined, cast: undefined },
      { kind: 'count', alias: 'n', cast: 'text' },
    ]);
  });
});

describe('filters', () => {
  it('are the operators the grammar of docs/rest.md names', () => {
    const grammar = section('docs/rest.md', '## The grammar');
    expect(OPERATOR_NAMES.filter((op) => !grammar.includes(`\`${op}\``))).toEqual([]);
  });

  it('reads every operator with a scalar value', () => {
    for (const op of SCALAR_OPERATORS) {
      expect(filter(`${op}.a.b`)).toEqual({
        field: col('x'),
        negate: false,
        op,
        quantifier: undefined,
        value: { kind: 'scalar', text: 'a.b' },
      });
    }
    // The value is everything after the operator's dot, dots, commas and parentheses included.
    expect(filter('eq.(1,2).3').value).toEqual({ kind: 'scalar', text: '(1,2).3' });
    expect(filter('eq.').value).toEqual({ kind: 'scalar', text: '' });
    expect(filter('cs.{a,b}').value).toEqual({ kind: 'scalar', text: '{a,b}' });
  });

  it('takes (any) and (all) after exactly the operators the table marks quantified: the grammar has no list of its own', () => {
    for (const op of SCALAR_OPERATORS) {
      if (isQuantified(op)) expect([op, filter(`${op}(any).{1,2}`).quantifier]).toEqual([op, 'any']);
      else expect(() => filter(`${op}(all).{1,2}`)).toThrow(ApiError);
    }
  });

  it('reads not. before any operator', () => {
    expect(filter('not.eq.1')).toMatchObject({ negate: true, op: 'eq', value: { kind: 'scalar', text: '1' } });
    expect(filter('not.in.(1,2)')).toMatchObject({
      negate: true,
      op: 'in',
      value: { kind: 'list', items: ['1', '2'] },
    });
    expect(filter('not.is.null')).toMatchObject({ negate: true, op: 'is', value: { kind: 'is', value: 'null' } });
  });

  it('reads in lists with quoted items, escapes and empty lists', () => {
    // Blanks around the parentheses are not the list's; blanks inside an element are its own.
    expect(filter('in.( 1, 2,3 )').value).toEqual({ kind: 'list', items: ['1', ' 2', '3 '] });
    expect(filter('in.("a,b","c)d","say \\"hi\\"",plain)').value).toEqual({
      kind: 'list',
      items: ['a,b', 'c)d', 'say "hi"', 'plain'],
    });
    expect(filter('in.()').value).toEqual({ kind: 'list', items: [] });
    // A double quote starts a quoted item only where its closing quote ends the item, as in
    // PostgREST; anywhere else it is a character of a bare item.
    expect(filter('in.(")').value).toEqual({ kind: 'list', items: ['"'] });
    expect(filter('in.(a"b",c)').value).toEqual({ kind: 'list', items: ['a"b"', 'c'] });
    expect(filter('in.("a,b)').value).toEqual({ kind: 'list', items: ['"a', 'b'] });
    expect(filter('in.( "a,b",c)').value).toEqual({ kind: 'list', items: ['a,b', 'c'] });
    expect(filter('in.( "a,b" ,c)').value).toEqual({ kind: 'list', items: ['"a', 'b" ', 'c'] });
    expect(filter('in.(   )').value).toEqual({ kind: 'list', items: [] });
  });

  it('reads any/all quantifiers with {…} lists', () => {
    expect(filter('like(any).{a*,*b}')).toEqual({
      field: col('x'),
      negate: false,
      op: 'like',
      quantifier: 'any',
      value: { kind: 'list', items: ['a*', '*b'] },
    });
    expect(filter('gt(all).{1,"2"}')).toMatchObject({
      op: 'gt',
      quantifier: 'all',
      value: { kind: 'list', items: ['1', '2'] },
    });
  });

  it('reads is with each of its values, case-insensitively', () => {
    for (const v of ['null', 'not_null', 'true', 'false', 'unknown'] as const)
      expect(filter(`is.${v}`).value).toEqual({ kind: 'is', value: v });
    expect(filter('is.NULL').value).toEqual({ kind: 'is', value: 'null' });
  });

  it('reads full-text search operators with and without a language', () => {
    expect(filter('fts.cat & dog').value).toEqual({ kind: 'fts', language: undefined, text: 'cat & dog' });
    expect(filter('plfts(english).fat cats')).toMatchObject({
      op: 'plfts',
      value: { kind: 'fts', language: 'english', text: 'fat cats' },
    });
    expect(filter('phfts(french).le chat').value).toEqual({ kind: 'fts', language: 'french', text: 'le chat' });
    expect(filter('not.wfts(simple)."a" -b')).toMatchObject({
      negate: true,
      op: 'wfts',
      value: { kind: 'fts', language: 'simple', text: '"a" -b' },
    });
  });

  it('puts filters on the node they name: root, embedded path, JSON path', () => {
    const api = parse('posts', {
      query:
        'select=id,comments(users(name))&id=gt.1&comments.users.name=eq.Ada&meta->>lang=eq.en&meta->"a.b"->>c=eq.1',
    });
    expect(api.nodes.get('')?.conditions).toEqual([
      {
        kind: 'filter',
        filter: {
          field: col('id'),
          negate: false,
          op: 'gt',
          quantifier: undefined,
          value: { kind: 'scalar', text: '1' },
        },
      },
      {
        kind: 'filter',
        filter: {
          field: { name: 'meta', json: [{ arrow: '->>', key: 'lang' }] },
          negate: false,
          op: 'eq',
          quantifier: undefined,
          value: { kind: 'scalar', text: 'en' },
        },
      },
      // a quoted JSON key keeps its dots (the key is not split into an embedded path)
      {
        kind: 'filter',
        filter: {
          field: {
            name: 'meta',
            json: [
              { arrow: '->', key: 'a.b' },
              { arrow: '->>', key: 'c' },
            ],
          },
          negate: false,
          op: 'eq',
          quantifier: undefined,
          value: { kind: 'scalar', text: '1' },
        },
      },
    ]);
    expect(api.nodes.get('comments.users')?.conditions).toEqual([
      {
        kind: 'filter',
        filter: {
          field: col('name'),
          negate: false,
          op: 'eq',
          quantifier: undefined,
          value: { kind: 'scalar', text: 'Ada' },
        },
      },
    ]);
  });

  it('skips reserved keys and apikey, and keeps repeated filters', () => {
    const api = parse('posts', { query: 'apikey=k&id=gt.1&id=lt.9&on_conflict=id&columns=id,title' });
    expect(api.nodes.get('')?.conditions.map((c) => c.kind === 'filter' && c.filter.op)).toEqual(['gt', 'lt']);
    expect(api.onConflict).toEqual(['id']);
    expect(api.columns).toEqual(['id', 'title']);
  });

  it('refuses an any/all value that is not a {…} list in its own words', () => {
    expect(failure(() => filter('eq(any).1'))).toMatchObject({
      code: 'PGRST100',
      message: '"failed to parse filter (eq(any).1)"',
      details: 'expecting a list in "{}"',
    });
  });
});

describe('logic trees', () => {
  it('reads or=, and=, nesting, not.or and quoted values', () => {
    expect(
      parseLogic('or', false, '(id.eq.1,and(rating.gt.2,title.like."a,b*"),not.or(body.is.null,id.in.(3,4)))'),
    ).toEqual({
      kind: 'logic',
      op: 'or',
      negate: false,
      children: [
        {
          kind: 'filter',
          filter: {
            field: col('id'),
            negate: false,
            op: 'eq',
            quantifier: undefined,
            value: { kind: 'scalar', text: '1' },
          },
        },
        {
          kind: 'logic',
          op: 'and',
          negate: false,
          children: [
            {
              kind: 'filter',
              filter: {
                field: col('rating'),
                negate: false,
                op: 'gt',
                quantifier: undefined,
                value: { kind: 'scalar', text: '2' },
              },
            },
            {
              kind: 'filter',
              filter: {
                field: col('title'),
                negate: false,
                op: 'like',
                quantifier: undefined,
                value: { kind: 'scalar', text: 'a,b*' },
              },
            },
          ],
        },
        {
          kind: 'logic',
          op: 'or',
          negate: true,
          children: [
            {
              kind: 'filter',
              filter: {
                field: col('body'),
                negate: false,
                op: 'is',
                quantifier: undefined,
                value: { kind: 'is', value: 'null' },
              },
            },
            {
              kind: 'filter',
              filter: {
                field: col('id'),
                negate: false,
                op: 'in',
                quantifier: undefined,
                value: { kind: 'list', items: ['3', '4'] },
              },
            },
          ],
        },
      ],
    });
  });

  it('reads not.or= and embedded and= from the query, and JSON paths inside', () => {
    const api = parse('posts', {
      query:
        'select=id,comments(id)&not.or=(id.eq.1,id.eq.2)&comments.and=(id.gt.1,body.not.is.null)&or=(meta->>lang.eq.en)',
    });
    expect(api.nodes.get('')?.conditions).toMatchObject([
      { kind: 'logic', op: 'or', negate: true, children: [{ filter: { op: 'eq' } }, { filter: { op: 'eq' } }] },
      {
        kind: 'logic',
        op: 'or',
        negate: false,
        children: [
          {
            filter: { field: { name: 'meta', json: [{ arrow: '->>', key: 'lang' }] }, op: 'eq', value: { text: 'en' } },
          },
        ],
      },
    ]);
    expect(api.nodes.get('comments')?.conditions).toMatchObject([
      {
        kind: 'logic',
        op: 'and',
        negate: false,
        children: [{ filter: { op: 'gt' } }, { filter: { op: 'is', negate: true } }],
      },
    ]);
  });

  it('reads a quoted column name', () => {
    expect(parseLogic('and', false, '("odd.name".eq.1)')).toMatchObject({
      children: [
        {
          kind: 'filter',
          filter: {
            field: col('odd.name'),
            negate: false,
            op: 'eq',
            quantifier: undefined,
            value: { kind: 'scalar', text: '1' },
          },
        },
      ],
    });
  });

  it('reads a parameter without parentheses as PostgREST does: a filter on the name joined to it', () => {
    expect(parseLogic('or', false, 'id.eq.1')).toMatchObject({ kind: 'filter', filter: { field: col('orid') } });
  });

  it('ignores closes past the tree, as PostgREST does', () => {
    expect(parseLogic('or', false, '(id.eq.1))')).toEqual(parseLogic('or', false, '(id.eq.1)'));
  });
});

describe('order', () => {
  it('reads directions, nulls first/last, JSON paths and related columns', () => {
    expect(parseOrder('id,title.desc,rating.asc.nullsfirst,body.nullslast,meta->>lang.desc,users(name).desc')).toEqual([
      { relation: undefined, field: col('id') },
      { relation: undefined, field: col('title'), direction: 'desc' },
      { relation: undefined, field: col('rating'), direction: 'asc', nulls: 'first' },
      { relation: undefined, field: col('body'), nulls: 'last' },
      { relation: undefined, field: { name: 'meta', json: [{ arrow: '->>', key: 'lang' }] }, direction: 'desc' },
      { relation: 'users', field: col('name'), direction: 'desc' },
    ]);
  });

  it('puts order, limit and offset on the embedded node they name', () => {
    const api = parse('posts', {
      query: 'select=id,comments(id)&comments.order=id.desc&comments.limit=2&comments.offset=1&order=id',
    });
    expect(api.nodes.get('comments')).toEqual({
      conditions: [],
      order: [{ relation: undefined, field: col('id'), direction: 'desc' }],
      limit: 2,
      offset: 1,
    });
    expect(api.nodes.get('')?.order).toEqual([{ relation: undefined, field: col('id') }]);
  });
});

describe('limit, offset and Range', () => {
  it('turns limit and offset into the root range', () => {
    expect(parse('posts').range).toEqual({ offset: 0 });
    expect(parse('posts', { query: 'limit=10' }).range).toEqual({ offset: 0, limit: 10 });
    expect(parse('posts', { query: 'limit=10&offset=20' }).range).toEqual({ offset: 20, limit: 10 });
    expect(parse('posts', { query: 'offset=5' }).range).toEqual({ offset: 5 });
    expect(parse('posts', { query: 'limit=0' }).range).toEqual({ offset: 0, limit: 0 });
  });

  it('reads the Range header, alone and combined with limit/offset', () => {
    expect(parseRange('0-9', undefined, undefined)).toEqual({ offset: 0, limit: 10 });
    expect(parseRange('items=5-9', undefined, undefined)).toEqual({ offset: 5, limit: 5 });
    expect(parseRange('10-', undefined, undefined)).toEqual({ offset: 10 });
    expect(parseRange('0-99', 5, undefined)).toEqual({ offset: 0, limit: 5 });
    expect(parseRange('0-3', 10, undefined)).toEqual({ offset: 0, limit: 4 });
    expect(parseRange('0-9', undefined, 4)).toEqual({ offset: 4, limit: 6 });
    expect(parseRange('bytes=oops', undefined, undefined)).toEqual({ offset: 0 }); // unreadable: ignored, as PostgREST does
    expect(parse('posts', { headers: { Range: '2-4' } }).range).toEqual({ offset: 2, limit: 3 });
  });

  it('answers 416 PGRST103 to a range that ends before it starts', () => {
    expect(failure(() => parseRange('9-2', undefined, undefined))).toEqual({
      status: 416,
      code: 'PGRST103',
      message: 'Requested range not satisfiable',
      details: 'The lower boundary must be lower than or equal to the upper boundary in the Range header.',
      hint: null,
    });
  });

  it('answers a negative limit 416 as PostgREST does, ignores a negative offset, refuses non-numbers', () => {
    expect(failure(() => parse('posts', { query: 'limit=-1' }))).toEqual({
      status: 416,
      code: 'PGRST103',
      message: 'Requested range not satisfiable',
      details: 'Limit should be greater than or equal to zero.',
      hint: null,
    });
    expect(parse('posts', { query: 'offset=-4' }).range).toEqual({ offset: 0 });
    expect(failure(() => parse('posts', { query: 'comments.offset=x' }))).toMatchObject({
      code: 'PGRST100',
      message: '"failed to parse comments.offset parameter (x)"',
    });
    expect(failure(() => parse('posts', { query: 'limit=1e3' }))).toMatchObject({ code: 'PGRST100' });
  });
});

describe('Prefer', () => {
  it('reads each preference it knows', () => {
    expect(
      parsePreferences(
        'return=representation, count=exact, resolution=merge-duplicates, missing=default, handling=lenient, max-affected=5, tx=rollback, params=single-object',
      ),
    ).toEqual({
      return: 'representation',
      count: 'exact',
      resolution: 'merge-duplicates',
      missing: 'default',
      handling: 'lenient',
      maxAffected: 5,
      tx: 'rollback',
      params: 'single-object',
      understood: [],
      invalid: [],
    });
    expect(
      parsePreferences('return=minimal,count=planned,resolution=ignore-duplicates,missing=null,tx=commit'),
    ).toMatchObject({
      return: 'minimal',
      count: 'planned',
      resolution: 'ignore-duplicates',
      missing: 'null',
      tx: 'commit',
    });
    expect(parsePreferences('return=headers-only,count=estimated')).toMatchObject({
      return: 'headers-only',
      count: 'estimated',
    });
    expect(parsePreferences(undefined)).toEqual({ understood: [], invalid: [] });
  });

  it('collects unknown and malformed preferences as invalid, leniently by default', () => {
    expect(parsePreferences('return=everything, count=exact, timezone=UTC, foo, max-affected=-1,,')).toEqual({
      count: 'exact',
      understood: [],
      invalid: ['return=everything', 'timezone=UTC', 'foo', 'max-affected=-1'],
    });
  });

  it('refuses invalid preferences under handling=strict with PGRST122', () => {
    expect(failure(() => parsePreferences('handling=strict, return=all, bogus=1'))).toEqual({
      status: 400,
      code: 'PGRST122',
      message: 'Invalid preferences given with handling=strict',
      details: 'Invalid preferences: return=all, bogus=1',
      hint: null,
    });
    expect(parsePreferences('handling=strict, max-affected=10')).toMatchObject({
      handling: 'strict',
      maxAffected: 10,
      invalid: [],
    });
    expect(failure(() => parse('posts', { headers: { Prefer: 'handling=strict,count=all' } }))).toMatchObject({
      status: 400,
      code: 'PGRST122',
    });
  });
});

describe('Accept', () => {
  it('chooses the best media type Tally can produce', () => {
    expect(parseAccept(undefined)).toEqual({ media: 'json' });
    expect(parseAccept('')).toEqual({ media: 'json' });
    expect(parseAccept('application/json')).toEqual({ media: 'json' });
    expect(parseAccept('*/*')).toEqual({ media: 'json' });
    expect(parseAccept('application/vnd.pgrst.object+json')).toEqual({ media: 'object' });
    expect(parseAccept('text/csv')).toEqual({ media: 'csv' });
    expect(parseAccept('text/html, text/csv;q=0.5, application/json;q=0.9')).toEqual({ media: 'json' });
    expect(parseAccept('application/json;q=0, TEXT/CSV')).toEqual({ media: 'csv' });
    expect(parse('posts', { headers: { Accept: 'application/vnd.pgrst.object' } }).accept).toBe('object');
  });

  it('reads plan media types with for= and options=', () => {
    expect(parseAccept('application/vnd.pgrst.plan')).toEqual({
      media: 'json',
      plan: { format: 'text', for: 'json', options: [] },
    });
    expect(parseAccept('application/vnd.pgrst.plan+json; for="text/csv"; options=analyze|buffers')).toEqual({
      media: 'csv',
      plan: { format: 'json', for: 'csv', options: ['analyze', 'buffers'] },
    });
    const api = parse('posts', {
      headers: { Accept: 'application/vnd.pgrst.plan+text; for="application/vnd.pgrst.object+json"' },
    });
    expect([api.accept, api.plan]).toEqual(['object', { format: 'text', for: 'object', options: [] }]);
  });

  it('answers 406 PGRST107 when nothing acceptable is asked for', () => {
    expect(failure(() => parseAccept('text/html, image/png'))).toEqual({
      status: 406,
      code: 'PGRST107',
      message: 'None of these media types are available: text/html, image/png',
      details: null,
      hint: 'Ask for application/json, application/vnd.pgrst.object+json, text/csv or application/geo+json',
    });
    expect(parseAccept('application/geo+json')).toEqual({ media: 'geojson' });
    expect(failure(() => parseAccept('application/vnd.pgrst.plan+json; options=destroy'))).toMatchObject({
      status: 406,
      code: 'PGRST107',
    });
    expect(failure(() => parseAccept('application/vnd.pgrst.plan; for="text/html"'))).toMatchObject({
      status: 406,
      code: 'PGRST107',
    });
    expect(failure(() => parseAccept('application/json;q=0'))).toMatchObject({ status: 406, code: 'PGRST107' });
  });
});

describe('the rest of the request', () => {
  it('reads on_conflict and columns lists, quoted names included', () => {
    const api = parse('posts', { method: 'POST', query: 'on_conflict=id,"odd, name"&columns=id, title' });
    expect(api.onConflict).toEqual(['id', 'odd, name']);
    expect(api.columns).toEqual(['id', 'title']);
  });

  it('tells a function call from a relation, and GET /rpc arguments from filters', () => {
    const api = parse('rpc/posts_by', { query: 'author=1&select=id,title&id=gt.2&order=id' });
    expect([api.relation, api.routine]).toEqual(['posts_by', 'posts_by']);
    expect(api.routineArgs).toEqual(new Map([['author', ['1']]]));
    expect(api.nodes.get('')?.conditions).toMatchObject([{ filter: { field: col('id'), op: 'gt' } }]);
    expect(parse('rpc/ids_of', { query: 'ids=1&ids=2' }).routineArgs).toEqual(new Map([['ids', ['1', '2']]]));
    expect(parse('posts').routine).toBeUndefined();
  });
});

describe("what does not parse: PostgREST's place and words", () => {
  /** A parameter, how it is read, and the line-and-column message and details PostgREST gives. */
  const cases: [string, () => unknown, string, string][] = [
    // select
    [
      'select=id,',
      () => parseSelect('id,'),
      '"failed to parse select parameter (id,)" (line 1, column 4)',
      'unexpected end of input expecting "...", field name (* or [a..z0..9_$]), "*" or "count()"',
    ],
    [
      'select=id,,title',
      () => parseSelect('id,,title'),
      '"failed to parse select parameter (id,,title)" (line 1, column 4)',
      'unexpected "," expecting "...", field name (* or [a..z0..9_$]), "*" or "count()"',
    ],
    [
      'select=users(id',
      () => parseSelect('users(id'),
      '"failed to parse select parameter (users(id)" (line 1, column 9)',
      'unexpected end of input expecting letter, digit, "-", "->>", "->", "::", ".", ")", "," or end of input',
    ],
    [
      'select=title!hint',
      () => parseSelect('title!hint'),
      '"failed to parse select parameter (title!hint)" (line 1, column 6)',
      `unexpected '!' expecting letter, digit, "-", "->>", "->", "::", ".", ")", "," or end of input`,
    ],
    [
      'select=users!a!b!c(id)',
      () => parseSelect('users!a!b!c(id)'),
      '"failed to parse select parameter (users!a!b!c(id))" (line 1, column 6)',
      `unexpected '!' expecting letter, digit, "-", "->>", "->", "::", ".", ")", "," or end of input`,
    ],
    [
      'select=...users',
      () => parseSelect('...users'),
      '"failed to parse select parameter (...users)" (line 1, column 9)',
      'unexpected end of input expecting letter, digit, "-", "!" or "("',
    ],
    [
      'select=rating.median()',
      () => parseSelect('rating.median()'),
      '"failed to parse select parameter (rating.median())" (line 1, column 8)',
      'unexpected "m" expecting "sum", "avg", "count", "max" or "min"',
    ],
    [
      'select=id::',
      () => parseSelect('id::'),
      '"failed to parse select parameter (id::)" (line 1, column 5)',
      'unexpected end of input expecting letter or digit',
    ],
    [
      'select=tags::text[]',
      () => parseSelect('tags::text[]'),
      '"failed to parse select parameter (tags::text[])" (line 1, column 11)',
      `unexpected '[' expecting letter, digit, ".", "::", ")", "," or end of input`,
    ],
    [
      'select=meta->>-x',
      () => parseSelect('meta->>-x'),
      '"failed to parse select parameter (meta->>-x)" (line 1, column 9)',
      'unexpected "x" expecting digit',
    ],
    [
      'select=meta->>-1y',
      () => parseSelect('meta->>-1y'),
      '"failed to parse select parameter (meta->>-1y)" (line 1, column 10)',
      `unexpected 'y' expecting digit, "->", "::", ".", "," or end of input`,
    ],
    [
      'select=meta->(a)',
      () => parseSelect('meta->(a)'),
      '"failed to parse select parameter (meta->(a))" (line 1, column 7)',
      'unexpected "(" expecting "-", digit or any non reserved character different from: .,>()',
    ],
    [
      'select="unclosed',
      () => parseSelect('"unclosed'),
      '"failed to parse select parameter ("unclosed)" (line 1, column 10)',
      'unexpected end of input expecting "\\\\" or "\\""',
    ],
    [
      'select=id)',
      () => parseSelect('id)'),
      '"failed to parse select parameter (id))" (line 1, column 3)',
      `unexpected ')' expecting letter, digit, "-", "->>", "->", "::", ".", "," or end of input`,
    ],
    // filters
    [
      'id=equals.1',
      () => filter('equals.1'),
      '"failed to parse filter (equals.1)" (line 1, column 3)',
      'unexpected "u" expecting operator (eq, gt, ...)',
    ],
    [
      'id=val',
      () => filter('val'),
      '"failed to parse filter (val)" (line 1, column 1)',
      'unexpected "v" expecting "not" or operator (eq, gt, ...)',
    ],
    [
      'id=not.1',
      () => filter('not.1'),
      '"failed to parse filter (not.1)" (line 1, column 5)',
      'unexpected "1" expecting operator (eq, gt, ...)',
    ],
    [
      'id=eq',
      () => filter('eq'),
      '"failed to parse filter (eq)" (line 1, column 3)',
      'unexpected end of input expecting operator (eq, gt, ...)',
    ],
    [
      'id=eq().1',
      () => filter('eq().1'),
      '"failed to parse filter (eq().1)" (line 1, column 4)',
      'unexpected ")" expecting operator (eq, gt, ...)',
    ],
    [
      'id=eq(some).{1}',
      () => filter('eq(some).{1}'),
      '"failed to parse filter (eq(some).{1})" (line 1, column 4)',
      'unexpected "s" expecting operator (eq, gt, ...)',
    ],
    [
      'id=in(any).{1}',
      () => filter('in(any).{1}'),
      '"failed to parse filter (in(any).{1})" (line 1, column 3)',
      'unexpected "(" expecting operator (eq, gt, ...)',
    ],
    [
      "body=fts(eng'lish).x",
      () => filter("fts(eng'lish).x"),
      `"failed to parse filter (fts(eng'lish).x)" (line 1, column 8)`,
      `unexpected "'" expecting operator (eq, gt, ...)`,
    ],
    [
      'id=in.1,2',
      () => filter('in.1,2'),
      '"failed to parse filter (in.1,2)" (line 1, column 4)',
      'unexpected "1" expecting "("',
    ],
    [
      'id=in.(1,2',
      () => filter('in.(1,2'),
      '"failed to parse filter (in.(1,2)" (line 1, column 8)',
      'unexpected end of input expecting "," or ")"',
    ],
    [
      'id=in.(1,2)x',
      () => filter('in.(1,2)x'),
      '"failed to parse filter (in.(1,2)x)" (line 1, column 9)',
      `unexpected 'x' expecting end of input`,
    ],
    [
      'body=is.maybe',
      () => filter('is.maybe'),
      '"failed to parse filter (is.maybe)" (line 1, column 4)',
      'unexpected "m" expecting isVal: (null, not_null, true, false, unknown)',
    ],
    [
      'body=is.nul',
      () => filter('is.nul'),
      '"failed to parse filter (is.nul)" (line 1, column 7)',
      'unexpected end of input expecting isVal: (null, not_null, true, false, unknown)',
    ],
    // filter keys
    [
      '=eq.1',
      () => parse('posts', { query: '=eq.1' }),
      '"failed to parse tree path ()" (line 1, column 1)',
      'unexpected end of input expecting field name (* or [a..z0..9_$])',
    ],
    [
      'a(b=eq.1',
      () => parse('posts', { query: 'a(b=eq.1' }),
      '"failed to parse tree path (a(b)" (line 1, column 2)',
      `unexpected '(' expecting letter, digit, "-", delimiter (.), "->>", "->" or end of input`,
    ],
    [
      'comments..id=eq.1',
      () => parse('posts', { query: 'comments..id=eq.1' }),
      '"failed to parse tree path (comments..id)" (line 1, column 10)',
      'unexpected "." expecting field name (* or [a..z0..9_$])',
    ],
    // logic trees
    [
      'or=()',
      () => parseLogic('or', false, '()'),
      '"failed to parse logic tree (())" (line 1, column 4)',
      'unexpected ")" expecting field name (* or [a..z0..9_$]), negation operator (not) or logic operator (and, or)',
    ],
    [
      'not.and=(id.eq.1, or(  ))',
      () => parseLogic('and', true, '(id.eq.1, or(  ))'),
      '"failed to parse logic tree ((id.eq.1, or(  )))" (line 1, column 23)',
      'unexpected ")" expecting field name (* or [a..z0..9_$]), negation operator (not) or logic operator (and, or)',
    ],
    [
      'and=(idonly)',
      () => parseLogic('and', false, '(idonly)'),
      '"failed to parse logic tree ((idonly))" (line 1, column 11)',
      'unexpected ")" expecting letter, digit, "-", "->>", "->" or delimiter (.)',
    ],
    [
      'or=(id.zz.1)',
      () => parseLogic('or', false, '(id.zz.1)'),
      '"failed to parse logic tree ((id.zz.1))" (line 1, column 7)',
      'unexpected "z" expecting "not" or operator (eq, gt, ...)',
    ],
    [
      'or=(id.in.1,2)',
      () => parseLogic('or', false, '(id.in.1,2)'),
      '"failed to parse logic tree ((id.in.1,2))" (line 1, column 10)',
      'unexpected "1" expecting "("',
    ],
    [
      'or=(id.eq.1,not.xand(id.eq.2))',
      () => parseLogic('or', false, '(id.eq.1,not.xand(id.eq.2))'),
      '"failed to parse logic tree ((id.eq.1,not.xand(id.eq.2)))" (line 1, column 16)',
      'unexpected "x" expecting logic operator (and, or)',
    ],
    [
      'or=(a.eq.1',
      () => rootConditions('or=(a.eq.1'),
      '"failed to parse logic tree ((a.eq.1)" (line 1, column 10)',
      'unexpected end of input expecting "," or ")"',
    ],
    [
      'or=(id.eq.1))x',
      () => parseLogic('or', false, '(id.eq.1))x'),
      '"failed to parse logic tree ((id.eq.1))x)" (line 1, column 13)',
      `unexpected 'x' expecting end of input`,
    ],
    // order
    [
      'order=title.dsc',
      () => parseOrder('title.dsc'),
      '"failed to parse order (title.dsc)" (line 1, column 7)',
      'unexpected "d" expecting "asc", "desc", "nullsfirst" or "nullslast"',
    ],
    [
      'order=title.descc',
      () => parseOrder('title.descc'),
      '"failed to parse order (title.descc)" (line 1, column 11)',
      `unexpected 'c' expecting delimiter (.), "," or end of input`,
    ],
    [
      'order=title.asc.desc',
      () => parseOrder('title.asc.desc'),
      '"failed to parse order (title.asc.desc)" (line 1, column 11)',
      'unexpected "d" expecting "nullsfirst" or "nullslast"',
    ],
    [
      'order=id.nullsfirst.nullslast',
      () => parseOrder('id.nullsfirst.nullslast'),
      '"failed to parse order (id.nullsfirst.nullslast)" (line 1, column 14)',
      `unexpected '.' expecting "," or end of input`,
    ],
    [
      'order=users(name',
      () => parseOrder('users(name'),
      '"failed to parse order (users(name)" (line 1, column 6)',
      `unexpected '(' expecting letter, digit, "-", "->>", "->", delimiter (.), "," or end of input`,
    ],
    [
      'order=title.desc (a blank after)',
      () => parseOrder('title.desc '),
      '"failed to parse order (title.desc )" (line 1, column 11)',
      `unexpected ' ' expecting delimiter (.), "," or end of input`,
    ],
    // column lists
    [
      'columns=id,,title',
      () => parse('posts', { method: 'POST', query: 'columns=id,,title' }),
      '"failed to parse columns parameter (id,,title)" (line 1, column 4)',
      'unexpected "," expecting field name (* or [a..z0..9_$])',
    ],
    [
      'on_conflict=',
      () => parse('posts', { method: 'POST', query: 'on_conflict=' }),
      '"failed to parse on_conflict parameter ()" (line 1, column 1)',
      'unexpected end of input expecting field name (* or [a..z0..9_$])',
    ],
  ];

  it.each(cases)('%s', (_, read, message, details) => {
    expect(failure(read)).toEqual({ status: 400, code: 'PGRST100', message, details, hint: null });
  });

  it('counts columns as Parsec does: a tab moves to the next multiple of eight, a new line (inside a value) starts line 2', () => {
    expect(failure(() => parseOrder('id,\ttitle.up'))).toMatchObject({
      message: '"failed to parse order (id,\ttitle.up)" (line 1, column 15)',
    });
    expect(failure(() => parseLogic('or', false, '(id.eq.a\n,id.zz.2)'))).toMatchObject({
      message: '"failed to parse logic tree ((id.eq.a\n,id.zz.2))" (line 2, column 5)',
      details: 'unexpected "z" expecting "not" or operator (eq, gt, ...)',
    });
  });

  it('follows a select as deep as the deepest embedding TALLY_DB_MAX_EMBED_DEPTH allows (100)', () => {
    // The configured limit is the one that answers, with its own words (plan/action.ts), not the parser's.
    const deep = (n: number) => 'a('.repeat(n) + 'id' + ')'.repeat(n);
    expect(parseSelect(deep(100))).toHaveLength(1);
    expect(parseLogic('or', false, `(${'and('.repeat(99)}id.eq.1${')'.repeat(99)})`)).toMatchObject({ kind: 'logic' });
  });

  it('refuses parentheses nested past what the parser follows, in its own words', () => {
    const deep = (n: number) => 'a('.repeat(n) + 'id' + ')'.repeat(n);
    expect(parseSelect(deep(40))).toHaveLength(1);
    expect(failure(() => parseSelect(deep(5000)))).toMatchObject({
      code: 'PGRST100',
      message: 'A query parameter nests parentheses too deeply',
    });
    expect(failure(() => parseLogic('or', false, `(${'and('.repeat(5000)}id.eq.1${')'.repeat(5000)})`))).toMatchObject({
      message: 'A query parameter nests parentheses too deeply',
    });
  });
});

describe('any text', () => {
  // Of the grammar's own characters, mostly: every parameter either reads or is a 400 in the one
  // shape, never an internal error (both readings of a failed parameter agree: parsec.ts).
  const text = fc.string({
    unit: fc.constantFrom(
      ...'abc01 ._-:!*()",>{}\\\t'.split(''),
      'in',
      'eq',
      'not',
      'or',
      'and',
      '->',
      '::',
      'asc',
      'count()',
    ),
    maxLength: 40,
  });
  const readers: [string, (s: string) => unknown][] = [
    ['select', parseSelect],
    ['order', parseOrder],
    ['a filter', (s) => filter(s)],
    ['a logic tree', (s) => parseLogic('or', false, s)],
    ['a filter key', (s) => parse('posts', { query: new URLSearchParams([[s, 'eq.1']]).toString() })],
  ];
  it.each(readers)('as %s: read, or refused with a 400', (_, read) => {
    fc.assert(
      fc.property(text, (s) => {
        try {
          read(s);
        } catch (e) {
          expect(e).toBeInstanceOf(ApiError);
          expect((e as ApiError).status).toBe(400);
        }
      }),
      { numRuns: 1000 },
    );
  });
});
