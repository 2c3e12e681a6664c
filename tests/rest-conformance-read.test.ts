import { setUpBlog, tearDown, type BlogSuite } from './harness/suite.js';
import { caseRunner, JSON_TYPE, type Case } from './harness/cases.js';
import { OPERATOR_NAMES } from '../gateway/engine/operators.js';

// The read path as PostgREST answers it: the behaviours of PostgREST's own read cases (logic
// trees, lists, operators, filters on embedded resources), ported onto a fixture of ours
// (tests/fixtures/conformance-read.sql) and written as a table: each case is a request and what
// PostgREST answers to it. Tally's deliberate differences are cases too, with the answer Tally
// gives (docs/rest.md: "Differences from PostgREST").

let s: BlogSuite;
const { check } = caseRunner(() => s);

/** A GET answered 200 with `json`. */
const get = (name: string, path: string, json: unknown): Case => ({ name, method: 'GET', path, status: 200, json });
/** `[{id: 1}, {id: 2}]` */
const ids = (...n: number[]) => n.map((id) => ({ id }));
const names = (...n: string[]) => n.map((name) => ({ name }));
const FIFTEEN = Array.from({ length: 15 }, (_, i) => i + 1);
/** 416 for an offset past the rows a count found. */
const outOfBounds = (offset: number, rows: number) => ({
  code: 'PGRST103',
  message: 'Requested range not satisfiable',
  details: `An offset of ${offset} was requested, but there are only ${rows} rows.`,
  hint: null,
});
/** A partition is not embedded, as PostgREST answers it: its parent is the relationship's target. */
const PARTITION_NOT_A_TARGET = {
  code: 'PGRST200',
  message: "Could not find a relationship between 'car_models' and 'car_model_sales_202101' in the schema cache",
  details:
    "Searched for a foreign key relationship between 'car_models' and 'car_model_sales_202101' in the schema 'rd', but no matches were found.",
  hint: "Perhaps you meant 'car_model_sales' instead of 'car_model_sales_202101'.",
};

const notEmbedded = (resource: string) => ({
  code: 'PGRST108',
  message: `'${resource}' is not an embedded resource in this request`,
  details: null,
  hint: `Verify that '${resource}' is included in the 'select' query parameter.`,
});

/** A 400 PGRST100 in PostgREST's words: where (line, column) and what was unexpected and expected there. */
const malformed = (path: string, message: string, details: string): Case => ({
  name: path,
  method: 'GET',
  path,
  status: 400,
  json: { code: 'PGRST100', message, details, hint: null },
});

const AREAS: Record<string, Case[]> = {
  'parameters that do not parse': [
    malformed(
      'items?order=id.dsc',
      '"failed to parse order (id.dsc)" (line 1, column 4)',
      'unexpected "d" expecting "asc", "desc", "nullsfirst" or "nullslast"',
    ),
    malformed(
      'items?order=id.descending',
      '"failed to parse order (id.descending)" (line 1, column 8)',
      `unexpected 'e' expecting delimiter (.), "," or end of input`,
    ),
    malformed(
      'items?order=id.nullsfirst.asc',
      '"failed to parse order (id.nullsfirst.asc)" (line 1, column 14)',
      `unexpected '.' expecting "," or end of input`,
    ),
    malformed(
      'entities?order=child_entities(id.desc',
      '"failed to parse order (child_entities(id.desc)" (line 1, column 15)',
      `unexpected '(' expecting letter, digit, "-", "->>", "->", delimiter (.), "," or end of input`,
    ),
    malformed(
      'json_arr?select=data->>-x',
      '"failed to parse select parameter (data->>-x)" (line 1, column 9)',
      'unexpected "x" expecting digit',
    ),
    malformed(
      'json_arr?select=id,data->0->>a::int.sum',
      '"failed to parse select parameter (id,data->0->>a::int.sum)" (line 1, column 24)',
      'unexpected end of input expecting "()"',
    ),
    malformed(
      'entities?select=id,child_entities!inner!left!x(id)',
      '"failed to parse select parameter (id,child_entities!inner!left!x(id))" (line 1, column 18)',
      `unexpected '!' expecting letter, digit, "-", "->>", "->", "::", ".", ")", "," or end of input`,
    ),
    malformed(
      'entities?or=(id.eq.1,name.like)',
      '"failed to parse logic tree ((id.eq.1,name.like))" (line 1, column 21)',
      'unexpected ")" expecting operator (eq, gt, ...)',
    ),
    malformed(
      'entities?and=(id.eq.1,nor(id.eq.2))',
      '"failed to parse logic tree ((id.eq.1,nor(id.eq.2)))" (line 1, column 16)',
      'unexpected "(" expecting letter, digit, "-", "->>", "->" or delimiter (.)',
    ),
    malformed(
      'items?id=in.1,2',
      '"failed to parse filter (in.1,2)" (line 1, column 4)',
      'unexpected "1" expecting "("',
    ),
    malformed(
      'items?id=is.nothing',
      '"failed to parse filter (is.nothing)" (line 1, column 7)',
      'unexpected "h" expecting isVal: (null, not_null, true, false, unknown)',
    ),
    malformed(
      'items?id=not.equals.1',
      '"failed to parse filter (not.equals.1)" (line 1, column 7)',
      'unexpected "u" expecting operator (eq, gt, ...)',
    ),
  ],
  'logic trees': [
    {
      name: 'no conditions',
      method: 'GET',
      path: 'entities?or=()',
      status: 400,
      json: {
        code: 'PGRST100',
        message: '"failed to parse logic tree (())" (line 1, column 4)',
        details:
          'unexpected ")" expecting field name (* or [a..z0..9_$]), negation operator (not) or logic operator (and, or)',
        hint: null,
      },
    },
    get('or', 'entities?or=(id.eq.1,id.eq.2)&select=id', ids(1, 2)),
    get('negated or', 'entities?not.or=(id.eq.1,id.eq.2)&select=id', ids(3, 4)),
    get('or with a plain filter', 'entities?or=(id.eq.1,id.eq.2)&name=eq.entity 1&select=id', ids(1)),
    get(
      'or on the second level',
      'entities?child_entities.or=(id.eq.1,name.eq.child entity 2)&select=id,child_entities(id)',
      [
        { id: 1, child_entities: ids(1, 2) },
        { id: 2, child_entities: [] },
        { id: 3, child_entities: [] },
        { id: 4, child_entities: [] },
      ],
    ),
    get(
      'or on the third level',
      'entities?child_entities.grandchild_entities.or=(id.eq.1,id.eq.2)&select=id,child_entities(id,grandchild_entities(id))',
      [
        {
          id: 1,
          child_entities: [
            { id: 1, grandchild_entities: ids(1, 2) },
            { id: 2, grandchild_entities: [] },
            { id: 4, grandchild_entities: [] },
            { id: 5, grandchild_entities: [] },
          ],
        },
        {
          id: 2,
          child_entities: [
            { id: 3, grandchild_entities: [] },
            { id: 6, grandchild_entities: [] },
          ],
        },
        { id: 3, child_entities: [] },
        { id: 4, child_entities: [] },
      ],
    ),
    get(
      'and nested in or',
      'entities?or=(and(name.eq.entity 2,id.eq.2),and(name.eq.entity 1,id.eq.1))&select=id',
      ids(1, 2),
    ),
    get(
      'negated and nested in or',
      'entities?or=(not.and(name.eq.entity 2,id.eq.2),not.and(name.eq.entity 1,id.eq.1))&select=id',
      ids(1, 2, 3, 4),
    ),
    get('and and or side by side', 'entities?and=(id.eq.1,name.eq.entity 1)&or=(id.eq.1,id.eq.2)&select=id', ids(1)),
    get('eq and neq', 'entities?and=(id.eq.1,id.neq.2))&select=id', ids(1)),
    get('lt and gt', 'entities?or=(id.lt.2,id.gt.3)&select=id', ids(1, 4)),
    get('lte and gte', 'entities?or=(id.lte.2,id.gte.3)&select=id', ids(1, 2, 3, 4)),
    get('like and ilike', 'entities?or=(name.like.*1,name.ilike.*ENTITY 2)&select=id', ids(1, 2)),
    get('in', 'entities?or=(id.in.(1,2),id.in.(3,4))&select=id', ids(1, 2, 3, 4)),
    get('is', 'entities?and=(name.is.null,arr.is.null)&select=id', ids(4)),
    get('fts on tsvector', 'entities?or=(text_search_vector.fts.bar,text_search_vector.fts.baz)&select=id', ids(1, 2)),
    get('match and imatch', 'entities?or=(name.match.^entity [12]$,name.imatch.^ENTITY 3)&select=id', ids(1, 2, 3)),
    get('plfts', 'entities?text_search_vector=plfts.foo bar&select=id', ids(1)),
    get('phfts with a language', 'entities?text_search_vector=phfts(english).bar baz&select=id', ids(2)),
    get('wfts', 'entities?text_search_vector=wfts.bar -foo&select=id', ids(2)),
    get('isdistinct', 'entities?and=(id.gte.2,arr.isdistinct.{1,2})&select=id', ids(3, 4)),
    get('cs and cd', 'entities?or=(arr.cs.{1,2,3},arr.cd.{1})&select=id', ids(1, 3)),
    get(
      'eq, cs, like negated',
      'entities?and=(arr.not.cs.{1,2,3},and(id.not.eq.2,name.not.like.*3))&select=id',
      ids(1),
    ),
    get(
      'in, is, fts negated',
      'entities?and=(id.not.in.(1,3),and(name.not.is.null,text_search_vector.not.fts.foo))&select=id',
      ids(2),
    ),
    get('lt, gte, cd negated', 'entities?and=(arr.not.cd.{1},or(id.not.lt.1,id.not.gte.3))&select=id', ids(2, 3)),
    get(
      'gt, lte, ilike negated',
      'entities?and=(name.not.ilike.*ITY2,or(id.not.gt.4,id.not.lte.1))&select=id',
      ids(1, 2, 3),
    ),
    get('isdistinct negated', 'entities?and=(id.not.eq.2,arr.not.isdistinct.{1,2,3})&select=id', ids(3)),
    get(
      'eq with quoted values',
      'grandchild_entities?or=(name.eq."(grandchild,entity,4)",name.eq."(grandchild,entity,5)")&select=id',
      ids(4, 5),
    ),
    get(
      'like and ilike with quoted values',
      'grandchild_entities?or=(name.like."*ity,4*",name.ilike."*ITY,5)")&select=id',
      ids(4, 5),
    ),
    get('in with quoted values', 'grandchild_entities?or=(id.in.("1","2"),id.in.("3","4"))&select=id', ids(1, 2, 3, 4)),
    get(
      'whitespace around nested trees and lists',
      'entities?and=( and ( id.in.( 1, 2, 3 ) , id.eq.3 ) , or ( id.eq.2 , id.eq.3 ) )&select=id',
      ids(3),
    ),
    get('one condition in or', 'entities?or=(id.eq.1)&select=id', ids(1)),
    get('one condition in and', 'entities?and=(id.eq.1)&select=id', ids(1)),
    get('three conditions', 'grandchild_entities?or=(id.eq.1, id.eq.2, id.eq.3)&select=id', ids(1, 2, 3)),
    get('three in lists', 'grandchild_entities?and=(id.in.(1,2), id.in.(3,1), id.in.(1,4))&select=id', ids(1)),
    get(
      'four conditions, and inside or',
      'grandchild_entities?or=( id.eq.1, id.eq.2, and(id.in.(1,3), id.in.(2,3)), id.eq.4 )&select=id',
      ids(1, 2, 3, 4),
    ),
    get(
      'four conditions, or inside and',
      'grandchild_entities?and=( id.eq.1, not.or(id.eq.2, id.eq.3), id.in.(1,4), or(id.eq.1, id.eq.4) )&select=id',
      ids(1),
    ),
    get('fts on jsonb', 'grandchild_entities?or=(jsonb_col.fts.bar,jsonb_col.fts.foo)&select=jsonb_col', [
      { jsonb_col: { a: { b: 'foo' } } },
      { jsonb_col: { b: 'bar' } },
    ]),
  ],
  'range operators': [
    get('eq', 'ranges?range=eq.[1,3]&select=id', ids(1)),
    get('neq', 'ranges?range=neq.[1,3]&select=id', ids(2, 3, 4)),
    get('lt', 'ranges?range=lt.[1,10]&select=id', ids(1)),
    get('gt', 'ranges?range=gt.[8,11]&select=id', ids(4)),
    get('lte', 'ranges?range=lte.[1,3]&select=id', ids(1)),
    get('gte', 'ranges?range=gte.[2,3]&select=id', ids(2, 3, 4)),
    get('cs', 'ranges?range=cs.[1,2]&select=id', ids(1)),
    get('cd', 'ranges?range=cd.[1,6]&select=id', ids(1, 2)),
    get('ov', 'ranges?range=ov.[0,4]&select=id', ids(1, 2)),
    get('sl', 'ranges?range=sl.[9,10]&select=id', ids(1, 2)),
    get('sr', 'ranges?range=sr.[3,4]&select=id', ids(3, 4)),
    get('nxr', 'ranges?range=nxr.[4,7]&select=id', ids(1, 2)),
    get('nxl', 'ranges?range=nxl.[4,7]&select=id', ids(3, 4)),
    get('adj', 'ranges?range=adj.(3,10]&select=id', ids(1)),
    get('isdistinct', 'ranges?range=isdistinct.[1,3]&select=id', ids(2, 3, 4, 5)),
  ],
  'array operators': [
    get('eq', 'entities?arr=eq.{1,2,3}&select=id', ids(3)),
    get('neq', 'entities?arr=neq.{1,2}&select=id', ids(1, 3)),
    get('lt', 'entities?arr=lt.{2,3}&select=id', ids(1, 2, 3)),
    get('lt, a smaller second element', 'entities?arr=lt.{2,0}&select=id', ids(1, 2, 3)),
    get('gt', 'entities?arr=gt.{1,1}&select=id', ids(2, 3)),
    get('gt, none', 'entities?arr=gt.{3}&select=id', []),
    get('lte', 'entities?arr=lte.{2,1}&select=id', ids(1, 2, 3)),
    get('lte, equal', 'entities?arr=lte.{1,2}&select=id', ids(1, 2)),
    get('cs', 'entities?arr=cs.{1,2}&select=id', ids(2, 3)),
    get('cd', 'entities?arr=cd.{1,2,6}&select=id', ids(1, 2)),
    get('ov', 'entities?arr=ov.{2,3}&select=id', ids(2, 3)),
    get('isdistinct', 'entities?arr=isdistinct.{1,2}&select=id', ids(1, 3, 4)),
  ],
  lists: [
    get('in', 'items?id=in.(1,3,5)', ids(1, 3, 5)),
    get('not in', 'items?id=not.in.(2,4,6,7,8,9,10,11,12,13,14,15)', ids(1, 3, 5)),
    get('an empty list matches nothing', 'items?id=in.()', []),
    get('a list of blanks is empty', 'items?id=in.(   )', []),
    get('not in an empty list matches everything', 'items?id=not.in.()&limit=2', ids(1, 2)),
    get('a quoted value holding a comma', 'w_or_wo_comma_names?name=in.("Hebdon, John")', names('Hebdon, John')),
    get(
      'quoted values holding commas',
      'w_or_wo_comma_names?name=in.("Hebdon, John","Williams, Mary","Smith, Joseph")',
      names('Hebdon, John', 'Williams, Mary', 'Smith, Joseph'),
    ),
    get(
      'not in quoted values',
      'w_or_wo_comma_names?name=not.in.("Hebdon, John","Williams, Mary","Smith, Joseph")&limit=2',
      names('David White', 'Larry Thompson'),
    ),
    get(
      'unquoted values with spaces',
      'w_or_wo_comma_names?name=in.(David White,Larry Thompson)',
      names('David White', 'Larry Thompson'),
    ),
    get(
      'escaped double quotes in a quoted value',
      'w_or_wo_comma_names?name=in.("Double\\"Quote\\"McGraw\\"")',
      names('Double"Quote"McGraw"'),
    ),
    get('a value that is one escaped double quote', 'w_or_wo_comma_names?name=in.("\\"")', names('"')),
    get('a quoted value holding parentheses', 'w_or_wo_comma_names?name=in.("Parens (a)")', names('Parens (a)')),
    get('a lone double quote is a value of its own', 'w_or_wo_comma_names?name=in.(")', names('"')),
    get(
      'double quotes inside an unquoted value are characters of it',
      'w_or_wo_comma_names?name=in.(Double"Quote"McGraw",David White)',
      names('David White', 'Double"Quote"McGraw"'),
    ),
  ],
  'computed relationships': [
    get('a function named like a table replaces the foreign keys to it', 'shelves?select=id,boxes(id)&order=id', [
      { id: 1, boxes: ids(2) },
      { id: 2, boxes: ids(3) },
    ]),
    {
      name: 'the other way the foreign keys remain, candidates listed as PostgREST sorts them',
      method: 'GET',
      path: 'boxes?select=id,shelves(id)',
      status: 300,
      json: {
        code: 'PGRST201',
        message: "Could not embed because more than one relationship was found for 'boxes' and 'shelves'",
        details: [
          {
            cardinality: 'one-to-many',
            embedding: 'boxes with shelves',
            relationship: 'shelves_featured_box_id_fkey using boxes(id) and shelves(featured_box_id)',
          },
          {
            cardinality: 'many-to-one',
            embedding: 'boxes with shelves',
            relationship: 'boxes_shelf_id_fkey using boxes(shelf_id) and shelves(id)',
          },
          {
            cardinality: 'many-to-one',
            embedding: 'boxes with shelves',
            relationship: 'boxes_spare_shelf_id_fkey using boxes(spare_shelf_id) and shelves(id)',
          },
        ],
        hint: "Try changing 'shelves' to one of the following: 'shelves!shelves_featured_box_id_fkey', 'shelves!boxes_shelf_id_fkey', 'shelves!boxes_spare_shelf_id_fkey'. Find the desired relationship in the 'details' key.",
      },
    },
  ],
  'JSON paths': [
    get('a text field cast to json', 'complex_items?id=eq.1&select=settings->>foo::json', [
      { foo: { int: 1, bar: 'baz' } },
    ]),
    get('renamed, cast to json', 'complex_items?id=eq.1&select=myFoo:settings->>foo::json', [
      { myFoo: { int: 1, bar: 'baz' } },
    ]),
    {
      name: 'a cast the data does not fit',
      method: 'GET',
      path: 'complex_items?select=settings->foo->>bar::integer',
      status: 400,
      json: { code: '22P02', message: 'invalid input syntax for type integer: "baz"', details: null, hint: null },
    },
    get('two levels, text', 'complex_items?id=eq.1&select=settings->foo->>bar', [{ bar: 'baz' }]),
    {
      name: 'a key starting with "-" is a negative index: digits must follow',
      method: 'GET',
      path: 'json_arr?select=data->>--34',
      status: 400,
      json: {
        code: 'PGRST100',
        message: '"failed to parse select parameter (data->>--34)" (line 1, column 9)',
        details: 'unexpected "-" expecting digit',
        hint: null,
      },
    },
    get('two levels, renamed', 'complex_items?id=eq.1&select=myBar:settings->foo->>bar', [{ myBar: 'baz' }]),
    get('two levels, cast to integer', 'complex_items?id=eq.1&select=settings->foo->>int::integer', [{ int: 1 }]),
    get('two levels, renamed and cast', 'complex_items?id=eq.1&select=myInt:settings->foo->>int::integer', [
      { myInt: 1 },
    ]),
    get('special characters in keys', 'json_arr?id=eq.10&select=data->!@%23$%25^%26*_d->>!@%23$%25^%26*_e::integer', [
      { '!@#$%^&*_e': 3 },
    ]),
    get('array indexes, cast', 'json_arr?select=data->>0::int&id=in.(1,2)', [{ data: 1 }, { data: 4 }]),
    get('array indexes, renamed', 'json_arr?select=idx0:data->>0::int,idx1:data->>1::int&id=in.(1,2)', [
      { idx0: 1, idx1: 2 },
      { idx0: 4, idx1: 5 },
    ]),
    get('nested arrays', 'json_arr?select=data->0->>1::int&id=in.(3,4)', [{ data: 8 }, { data: 7 }]),
    get('nested arrays, three levels', 'json_arr?select=data->0->0->>1::int&id=in.(3,4)', [
      { data: null },
      { data: 6 },
    ]),
    get('arrays of objects', 'json_arr?select=data->0->>a&id=in.(5,6)', [{ a: 'A' }, { a: '[1, 2, 3]' }]),
    get('arrays of objects, an index after a key', 'json_arr?select=data->0->a->>2&id=in.(5,6)', [
      { a: null },
      { a: '3' },
    ]),
    get('arrays in objects', 'json_arr?select=data->c->>0::json&id=in.(7,8)', [
      { c: 1 },
      { c: { d: [4, 5, 6, 7, 8] } },
    ]),
    get('arrays in objects, deeper', 'json_arr?select=data->c->0->d->>4::int&id=in.(7,8)', [{ d: null }, { d: 8 }]),
    get(
      'only well-formed numbers are indexes',
      'json_arr?select=data->0->0xy1->1->23-xy-45->1->xy-6->>0::int&id=eq.9',
      [{ 'xy-6': 3 }],
    ),
    get('ending with -> on a key', 'json_arr?select=data->c&id=in.(7,8)', [
      { c: [1, 2, 3] },
      { c: [{ d: [4, 5, 6, 7, 8] }] },
    ]),
    get('ending with -> on an index', 'json_arr?select=data->0->a&id=in.(5,6)', [{ a: 'A' }, { a: [1, 2, 3] }]),
    get('ending with -> after an index', 'json_arr?select=data->c->0->d&id=eq.8', [{ d: [4, 5, 6, 7, 8] }]),
    get('a composite field', 'fav_numbers?select=num->i', [{ i: 0.5 }, { i: 0.6 }]),
    get('a composite field as text', 'fav_numbers?select=num->>i', [{ i: '0.5' }, { i: '0.6' }]),
    get('array items', 'arrays?select=a:numbers->0,b:numbers->1,c:numbers_mult->0->0,d:numbers_mult->1->2', [
      { a: 1, b: 2, c: 1, d: 6 },
      { a: 11, b: 12, c: 11, d: 16 },
    ]),
    get(
      'array items as text',
      'arrays?select=a:numbers->>0,b:numbers->>1,c:numbers_mult->0->>0,d:numbers_mult->1->>2',
      [
        { a: '1', b: '2', c: '1', d: '6' },
        { a: '11', b: '12', c: '11', d: '16' },
      ],
    ),
    get('a filter inside a json column', 'json_table?data->foo->>bar=eq.baz', [
      { data: { id: 1, foo: { bar: 'baz' } } },
    ]),
    get('a filter inside a json column, no match', 'json_table?data->foo->>bar=eq.fake', []),
    get('a negated filter inside a json column', 'json_table?data->foo->>bar=not.eq.baz', []),
    get('a filter with ->>', 'json_table?data->>id=eq.1', [{ data: { id: 1, foo: { bar: 'baz' } } }]),
    get(
      'paths in a logic tree',
      'grandchild_entities?or=(jsonb_col->a->>b.eq.foo, jsonb_col->>b.eq.bar)&select=id',
      ids(1, 2),
    ),
    get(
      'a filter on keys with special characters',
      'json_arr?select=data->!@%23$%25^%26*_d&data->!@%23$%25^%26*_d->>!@%23$%25^%26*_e=eq.3',
      [{ '!@#$%^&*_d': { '!@#$%^&*_e': 3 } }],
    ),
    get('a filter on an index', 'json_arr?select=data&data->>0=eq.1', [{ data: [1, 2, 3] }]),
    get('a filter on nested indexes', 'json_arr?select=data&data->1->>2=eq.13', [
      {
        data: [
          [9, 8, 7],
          [11, 12, 13],
        ],
      },
    ]),
    get('a filter on a key after an index', 'json_arr?select=data&data->1->>b=eq.B', [
      { data: [{ a: 'A' }, { b: 'B' }] },
    ]),
    get('a filter on an index after a key', 'json_arr?select=data&data->1->b->>1=eq.5', [
      { data: [{ a: [1, 2, 3] }, { b: [4, 5] }] },
    ]),
    get('a jsonb column equal to an object', 'jsonb_test?data=eq.{"e":1}', [{ id: 4, data: { e: 1 } }]),
    get('a jsonb path equal to an object', 'jsonb_test?data->a=eq.{"b":2}', [{ id: 1, data: { a: { b: 2 } } }]),
    get('a jsonb path equal to an array', 'jsonb_test?data->c=eq.[1,2,3]', [{ id: 2, data: { c: [1, 2, 3] } }]),
    get('a jsonb index equal to an object', 'jsonb_test?data->0=eq.{"d":"test"}', [{ id: 3, data: [{ d: 'test' }] }]),
    get('a filter on a composite field', 'fav_numbers?num->>i=gt.0.5', [{ num: { r: 0.6, i: 0.6 }, person: 'B' }]),
    get('a filter on an array item', 'arrays?select=id&numbers->0=eq.1', [{ id: 0 }]),
    get('a filter on an array item as text', 'arrays?select=id&numbers->>0=eq.11', [{ id: 1 }]),
    get('a filter on a nested array item', 'arrays?select=id&numbers_mult->1->1=eq.5', [{ id: 0 }]),
    get('a filter on a nested array item as text', 'arrays?select=id&numbers_mult->2->>2=eq.19', [{ id: 1 }]),
    get('an order on a json field', 'json_table?order=data->>id.asc', [
      { data: { id: 0 } },
      { data: { id: 1, foo: { bar: 'baz' } } },
      { data: { id: 3 } },
    ]),
    get('an order on a json path, nulls first', 'json_table?order=data->foo->>bar.nullsfirst', [
      { data: { id: 3 } },
      { data: { id: 0 } },
      { data: { id: 1, foo: { bar: 'baz' } } },
    ]),
    get('an order on a composite field', 'fav_numbers?order=num->i.asc', [
      { num: { r: 0.5, i: 0.5 }, person: 'A' },
      { num: { r: 0.6, i: 0.6 }, person: 'B' },
    ]),
    get('an order on a composite field as text', 'fav_numbers?order=num->>i.desc', [
      { num: { r: 0.6, i: 0.6 }, person: 'B' },
      { num: { r: 0.5, i: 0.5 }, person: 'A' },
    ]),
    get('an order on an array item', 'arrays?select=id&order=numbers->0.desc', [{ id: 1 }, { id: 0 }]),
    get('an order on another array item', 'arrays?select=id&order=numbers->1.asc', [{ id: 0 }, { id: 1 }]),
    get('an order on a nested array item', 'arrays?select=id&order=numbers_mult->0->0.desc', [{ id: 1 }, { id: 0 }]),
    get('an order on another nested array item', 'arrays?select=id&order=numbers_mult->2->2.asc', [
      { id: 0 },
      { id: 1 },
    ]),
    get('negative indexes, cast', 'json_arr?select=data->>-1::int&id=in.(1,2)', [{ data: 3 }, { data: 6 }]),
    get('negative nested indexes', 'json_arr?select=data->0->>-2::int&id=in.(3,4)', [{ data: 8 }, { data: 7 }]),
    get('a negative index then a key', 'json_arr?select=data->-2->>a&id=in.(5,6)', [{ a: 'A' }, { a: '[1, 2, 3]' }]),
    get('a filter on a negative index', 'json_arr?select=data&data->>-3=eq.1', [{ data: [1, 2, 3] }]),
    get('a filter on negative nested indexes', 'json_arr?select=data&data->-1->>-3=eq.11', [
      {
        data: [
          [9, 8, 7],
          [11, 12, 13],
        ],
      },
    ]),
    get('a filter on a key after a negative index', 'json_arr?select=data&data->-1->>b=eq.B', [
      { data: [{ a: 'A' }, { b: 'B' }] },
    ]),
    get('a filter on a negative index after a key', 'json_arr?select=data&data->-1->b->>-1=eq.5', [
      { data: [{ a: [1, 2, 3] }, { b: [4, 5] }] },
    ]),
    get(
      "paths into a function's composite column: select, filter and order",
      'rpc/returns_complex?select=val->r&val->i=gt.0.5&order=val->>i.desc',
      [{ r: 0.3 }, { r: 0.2 }],
    ),
  ],
  ranges: [
    get('a function, whole', 'rpc/getitemrange?min=0&max=15&order=id', ids(...FIFTEEN)),
    {
      name: 'a function, nothing: */*',
      method: 'GET',
      path: 'rpc/getitemrange?min=2&max=2',
      status: 200,
      json: [],
      out: { 'Content-Range': '*/*' },
    },
    {
      name: 'a function, its range',
      method: 'GET',
      path: 'rpc/getitemrange?order=id&min=0&max=15',
      status: 200,
      json: ids(...FIFTEEN),
      out: { 'Content-Range': '0-14/*' },
    },
    {
      name: 'a function, an offset past no rows',
      method: 'GET',
      path: 'rpc/getitemrange?offset=1&min=2&max=2',
      prefer: 'count=exact',
      status: 416,
      json: outOfBounds(1, 0),
      out: { 'Content-Range': '*/0' },
    },
    {
      name: 'a function, an offset past the last row',
      method: 'GET',
      path: 'rpc/getitemrange?offset=100&min=0&max=15',
      prefer: 'count=exact',
      status: 416,
      json: outOfBounds(100, 15),
      out: { 'Content-Range': '*/15' },
    },
    {
      name: 'a function, a Range header',
      method: 'GET',
      path: 'rpc/getitemrange?min=0&max=15&order=id',
      headers: { Range: '0-1' },
      status: 200,
      json: ids(1, 2),
      out: { 'Content-Range': '0-1/*' },
    },
    {
      name: 'a function, an open-ended Range',
      method: 'GET',
      path: 'rpc/getitemrange?min=0&max=15&order=id',
      headers: { Range: '0-' },
      status: 200,
      json: ids(...FIFTEEN),
    },
    {
      name: 'a function, a Range over nothing',
      method: 'GET',
      path: 'rpc/getitemrange?min=2&max=2',
      headers: { Range: '0-1' },
      status: 200,
      json: [],
      out: { 'Content-Range': '*/*' },
    },
    {
      name: 'a function, a Range of one row',
      method: 'GET',
      path: 'rpc/getitemrange?min=0&max=15&order=id',
      headers: { Range: '0-0' },
      status: 200,
      json: ids(1),
      out: { 'Content-Range': '0-0/*' },
    },
    {
      name: 'a function, a Range past the end is cut',
      method: 'GET',
      path: 'rpc/getitemrange?min=0&max=15&order=id',
      headers: { Range: '10-100' },
      status: 200,
      json: ids(11, 12, 13, 14, 15),
      out: { 'Content-Range': '10-14/*' },
    },
    {
      name: 'a function, a reversed Range',
      method: 'GET',
      path: 'rpc/getitemrange?min=2&max=2',
      headers: { Range: '1-0' },
      status: 416,
      json: {
        code: 'PGRST103',
        message: 'Requested range not satisfiable',
        details: 'The lower boundary must be lower than or equal to the upper boundary in the Range header.',
        hint: null,
      },
    },
    {
      name: 'a function, a counted Range past no rows',
      method: 'GET',
      path: 'rpc/getitemrange?min=2&max=2',
      prefer: 'count=exact',
      headers: { Range: '1-2' },
      status: 416,
      json: outOfBounds(1, 0),
      out: { 'Content-Range': '*/0' },
    },
    {
      name: 'a function, a counted Range past the last row',
      method: 'GET',
      path: 'rpc/getitemrange?min=0&max=15',
      prefer: 'count=exact',
      headers: { Range: '100-199' },
      status: 416,
      json: outOfBounds(100, 15),
      out: { 'Content-Range': '*/15' },
    },
    {
      name: 'a count of nothing: */0',
      method: 'GET',
      path: 'items?id=eq.0',
      prefer: 'count=exact',
      status: 200,
      json: [],
      out: { 'Content-Range': '*/0' },
    },
    {
      name: 'an empty table without a count: */*',
      method: 'GET',
      path: 'empty_items',
      prefer: 'count=none',
      status: 200,
      json: [],
      out: { 'Content-Range': '*/*' },
    },
    {
      name: 'count=none: the range only',
      method: 'GET',
      path: 'items?order=id',
      prefer: 'count=none',
      status: 200,
      json: ids(...FIFTEEN),
      out: { 'Content-Range': '0-14/*' },
    },
    {
      name: 'count=none with a filter',
      method: 'GET',
      path: 'items?id=eq.1&order=id',
      prefer: 'count=none',
      status: 200,
      json: ids(1),
      out: { 'Content-Range': '0-0/*' },
    },
    {
      name: 'a limit',
      method: 'GET',
      path: 'items?select=id&order=id.asc&limit=3',
      status: 200,
      json: ids(1, 2, 3),
      out: { 'Content-Range': '0-2/*' },
    },
    {
      name: 'a Range header wins over limit',
      method: 'GET',
      path: 'items?select=id&order=id.asc&limit=3',
      headers: { Range: '0-1' },
      status: 200,
      json: ids(1, 2),
      out: { 'Content-Range': '0-1/*' },
    },
    {
      name: 'limits on every level',
      method: 'GET',
      path: 'clients?select=id,projects(id,tasks(id))&order=id.asc&limit=1&projects.order=id.asc&projects.limit=2&projects.tasks.order=id.asc&projects.tasks.limit=1',
      status: 200,
      json: [
        {
          id: 1,
          projects: [
            { id: 1, tasks: ids(1) },
            { id: 2, tasks: ids(3) },
          ],
        },
      ],
      out: { 'Content-Range': '0-0/*' },
    },
    {
      name: 'limit and offset',
      method: 'GET',
      path: 'items?select=id&order=id.asc&limit=3&offset=2',
      status: 200,
      json: ids(3, 4, 5),
      out: { 'Content-Range': '2-4/*' },
    },
    {
      name: 'limit and offset, HEAD',
      method: 'HEAD',
      path: 'items?select=id&order=id.asc&limit=3&offset=2',
      status: 200,
      out: { 'Content-Range': '2-4/*', 'Content-Type': JSON_TYPE },
    },
    {
      name: 'offset=0 over nothing',
      method: 'GET',
      path: 'items?offset=0&id=eq.0',
      status: 200,
      json: [],
      out: { 'Content-Range': '*/*' },
    },
    {
      name: 'offset=0 over nothing, counted',
      method: 'GET',
      path: 'items?offset=0&id=eq.0',
      prefer: 'count=exact',
      status: 200,
      json: [],
      out: { 'Content-Range': '*/0' },
    },
    {
      name: 'offset=0',
      method: 'GET',
      path: 'items?select=id&offset=0&order=id',
      status: 200,
      json: ids(...FIFTEEN),
      out: { 'Content-Range': '0-14/*' },
    },
    {
      name: 'a negative offset skips nothing',
      method: 'GET',
      path: 'items?select=id&offset=-4&order=id',
      status: 200,
      json: ids(...FIFTEEN),
      out: { 'Content-Range': '0-14/*' },
    },
    {
      name: 'limit=0',
      method: 'GET',
      path: 'items?select=id&limit=0',
      status: 200,
      json: [],
      out: { 'Content-Range': '*/*' },
    },
    {
      name: 'a negative limit',
      method: 'GET',
      path: 'items?select=id&limit=-1',
      status: 416,
      json: {
        code: 'PGRST103',
        message: 'Requested range not satisfiable',
        details: 'Limit should be greater than or equal to zero.',
        hint: null,
      },
    },
    {
      name: 'an offset into an empty table, counted',
      method: 'GET',
      path: 'empty_items?offset=1',
      prefer: 'count=exact',
      status: 416,
      json: outOfBounds(1, 0),
      out: { 'Content-Range': '*/0' },
    },
    {
      name: 'an offset past the last row, counted',
      method: 'GET',
      path: 'items?offset=100',
      prefer: 'count=exact',
      status: 416,
      json: outOfBounds(100, 15),
      out: { 'Content-Range': '*/15' },
    },
  ],
  'partitioned tables': [
    get(
      'a table as parent of a partitioned table',
      'car_models?name=in.(DeLorean,Murcielago)&select=name,year,car_brands(name)&order=name.asc',
      [
        { name: 'DeLorean', year: 1981, car_brands: { name: 'DMC' } },
        { name: 'Murcielago', year: 2001, car_brands: { name: 'Lamborghini' } },
      ],
    ),
    get(
      'a partitioned table as children of a table',
      'car_brands?select=name,car_models(name,year)&order=name.asc&car_models.order=name.asc',
      [
        { name: 'DMC', car_models: [{ name: 'DeLorean', year: 1981 }] },
        { name: 'Ferrari', car_models: [{ name: 'F310-B', year: 1997 }] },
        {
          name: 'Lamborghini',
          car_models: [
            { name: 'Murcielago', year: 2001 },
            { name: 'Veneno', year: 2013 },
          ],
        },
      ],
    ),
    get(
      'a table as children of a partitioned table',
      'car_models?name=in.(DeLorean,F310-B)&select=name,year,car_racers(name)&order=name.asc',
      [
        { name: 'DeLorean', year: 1981, car_racers: [] },
        { name: 'F310-B', year: 1997, car_racers: [{ name: 'Michael Schumacher' }] },
      ],
    ),
    get('a partitioned table as parent of a table', 'car_racers?select=name,car_models(name,year)&order=name.asc', [
      { name: 'Alain Prost', car_models: null },
      { name: 'Michael Schumacher', car_models: { name: 'F310-B', year: 1997 } },
    ]),
    get(
      'a partitioned table as children of a partitioned table',
      'car_models?name=in.(DeLorean,Murcielago,Veneno)&select=name,year,car_model_sales(date,quantity)&order=name.asc',
      [
        {
          name: 'DeLorean',
          year: 1981,
          car_model_sales: [
            { date: '2021-01-14', quantity: 7 },
            { date: '2021-01-15', quantity: 9 },
          ],
        },
        {
          name: 'Murcielago',
          year: 2001,
          car_model_sales: [
            { date: '2021-02-11', quantity: 1 },
            { date: '2021-02-12', quantity: 3 },
          ],
        },
        { name: 'Veneno', year: 2013, car_model_sales: [] },
      ],
    ),
    get(
      'a partitioned table as parent of a partitioned table',
      'car_model_sales?date=in.(2021-01-15,2021-02-11)&select=date,quantity,car_models(name,year)&order=date.asc',
      [
        { date: '2021-01-15', quantity: 9, car_models: { name: 'DeLorean', year: 1981 } },
        { date: '2021-02-11', quantity: 1, car_models: { name: 'Murcielago', year: 2001 } },
      ],
    ),
    get(
      'many-to-many between partitioned tables, partitions of the junction ignored',
      'car_models?select=name,year,car_dealers(name,city)&order=name.asc&limit=4',
      [
        { name: 'DeLorean', year: 1981, car_dealers: [{ name: 'Springfield Cars S.A.', city: 'Springfield' }] },
        { name: 'F310-B', year: 1997, car_dealers: [] },
        { name: 'Murcielago', year: 2001, car_dealers: [{ name: 'The Best Deals S.A.', city: 'Franklin' }] },
        { name: 'Veneno', year: 2013, car_dealers: [] },
      ],
    ),
    {
      name: 'the relationship is looked up before the columns: a missing column beside it is not the error',
      method: 'GET',
      path: 'car_models?select=id,name,car_model_sales_202101(id)',
      status: 400,
      json: PARTITION_NOT_A_TARGET,
    },
    {
      name: 'a partition is not a relationship target',
      method: 'GET',
      path: 'car_models?select=name,car_model_sales_202101(quantity)',
      status: 400,
      json: PARTITION_NOT_A_TARGET,
    },
    {
      name: 'a partition is not a parent either',
      method: 'GET',
      path: 'car_model_sales?select=date,car_models_default(name)',
      status: 400,
      json: {
        code: 'PGRST200',
        message: "Could not find a relationship between 'car_model_sales' and 'car_models_default' in the schema cache",
        details:
          "Searched for a foreign key relationship between 'car_model_sales' and 'car_models_default' in the schema 'rd', but no matches were found.",
        hint: "Perhaps you meant 'car_models' instead of 'car_models_default'.",
      },
    },
    {
      name: 'a partition is not exposed',
      method: 'GET',
      path: 'car_model_sales_202101?select=date,car_models(name)',
      status: 404,
      json: {
        code: 'PGRST205',
        message: "Could not find the table 'rd.car_model_sales_202101' in the schema cache",
        details: null,
        hint: "Perhaps you meant the table 'rd.car_model_sales'",
      },
    },
  ],
  errors: [
    // Tally's deliberate difference (docs/rest.md): PostgREST answers these two 500.
    {
      name: 'a cardinality violation is 400 with its message',
      method: 'GET',
      path: 'bad_subquery',
      status: 400,
      json: {
        code: '21000',
        message: 'more than one row returned by a subquery used as an expression',
        details: null,
        hint: null,
      },
    },
    {
      name: 'a limit of the database (54001) is 400 with its message',
      method: 'GET',
      path: 'rpc/bottomless?n=1',
      status: 400,
      json: { code: '54001', message: 'stack depth limit exceeded', details: null, hint: null },
    },
    {
      name: 'a recursion in a policy keeps its message',
      method: 'GET',
      path: 'recursive_policy',
      status: 500,
      json: {
        code: '42P17',
        message: 'infinite recursion detected in policy for relation "recursive_policy"',
        details: null,
        hint: null,
      },
    },
  ],
  'function arguments and filters': [
    get('a value with an operator is a filter on the rows', 'rpc/items_below?id=5&id=gt.2&order=id', ids(3, 4)),
    get('so is a negated one', 'rpc/items_below?id=5&id=not.in.(1,3)&order=id', ids(2, 4)),
    get('one OUT parameter is an object of that column', 'rpc/plus_one?num=5', { num_plus_one: 6 }),
    get('a one-column TABLE is rows of that column', 'rpc/letters', [{ a: 'A' }]),
    get('a repeated argument takes its last value', 'rpc/getitemrange?min=9&min=2&max=4&order=id', ids(3, 4)),
    {
      name: 'any other key is an argument, and a function without it is not found',
      method: 'GET',
      path: 'rpc/getitemrange?min=2&max=4&other=value',
      status: 404,
      json: {
        code: 'PGRST202',
        message: 'Could not find the function rd.getitemrange(max, min, other) in the schema cache',
        details:
          'Searched for the function rd.getitemrange with parameters max, min, other, but no matches were found in the schema cache.',
        hint: 'Perhaps you meant to call the function rd.getitemrange(max, min)',
      },
    },
  ],
  'response settings': [
    {
      name: "a function's response.status and response.headers make the answer's",
      method: 'GET',
      path: 'rpc/teapot',
      status: 418,
      json: { short: 'stout' },
      out: { 'X-Brew': 'green; strong', 'Cache-Control': 'no-store' },
    },
    {
      name: 'a RAISE of a PT code without a status in it is a 500',
      method: 'GET',
      path: 'rpc/raise_bad_pt',
      status: 500,
      json: { code: 'PT40A', message: 'Wrong', details: null, hint: null },
    },
    {
      name: 'headers that are not a JSON array of one-key objects are a 500 PGRST111',
      method: 'GET',
      path: 'rpc/bad_headers',
      status: 500,
      json: {
        code: 'PGRST111',
        message: 'response.headers guc must be a JSON array composed of objects with a single key and a string value',
        details: null,
        hint: null,
      },
    },
    {
      name: 'a status that is not one is a 500 PGRST112',
      method: 'GET',
      path: 'rpc/bad_status',
      status: 500,
      json: { code: 'PGRST112', message: 'response.status guc must be a valid status code', details: null, hint: null },
    },
  ],
  'data representations': [
    get(
      'a domain of a schema that is not exposed is shown through its cast to json',
      'labels?select=id,color&order=id',
      [
        { id: 1, color: '#000000' },
        { id: 2, color: '#000100' },
        { id: 3, color: '#01E240' },
      ],
    ),
    get('renamed', 'labels?select=id,clr:color&id=lt.3&order=id', [
      { id: 1, clr: '#000000' },
      { id: 2, clr: '#000100' },
    ]),
    get('a cast applies to the represented value', 'labels?select=id,clr:color::text&id=eq.3', [
      { id: 3, clr: '"#01E240"' },
    ]),
    get('a filter value is read through the cast from text', 'labels?select=id&color=eq.000100', ids(2)),
    get('so are the values of a list', 'labels?select=id&color=in.(000100,01E240)&order=id', ids(2, 3)),
    get('and of a negated list', 'labels?select=id&color=not.in.(000000,01E240)', ids(2)),
    get('inside an embed', 'labelled?select=id,labels(color)&order=id', [
      { id: 1, labels: { color: '#000100' } },
      { id: 2, labels: { color: '#000000' } },
    ]),
    get('a cast that is not implicit is no representation', 'labels?select=shade&id=eq.2', [{ shade: 256 }]),
  ],
  'filters on embedded resources': [
    get('a filter two levels down', 'clients?select=id,projects(id,tasks(id,name))&projects.tasks.name=like.Design*', [
      {
        id: 1,
        projects: [
          { id: 1, tasks: [{ id: 1, name: 'Design w7' }] },
          { id: 2, tasks: [{ id: 3, name: 'Design w10' }] },
        ],
      },
      {
        id: 2,
        projects: [
          { id: 3, tasks: [{ id: 5, name: 'Design IOS' }] },
          { id: 4, tasks: [{ id: 7, name: 'Design OSX' }] },
        ],
      },
    ]),
    {
      name: 'a filter on a resource that is not embedded',
      method: 'GET',
      path: 'clients?select=*&non_existent_projects.name=like.*NonExistent*',
      status: 400,
      json: notEmbedded('non_existent_projects'),
    },
    {
      name: 'a filter on a misspelt alias',
      method: 'GET',
      path: 'clients?select=*,amiga_projects:projects(*)&amiga_projectsss.name=ilike.*Amiga*',
      status: 400,
      json: notEmbedded('amiga_projectsss'),
    },
    {
      name: 'a filter two levels down on a resource that is not embedded names that resource',
      method: 'GET',
      path: 'clients?select=id,projects(id,tasks(id,name))&projects.tasks2.name=like.Design*',
      status: 400,
      json: notEmbedded('tasks2'),
    },
    {
      name: 'one exposed schema: no Content-Profile',
      method: 'GET',
      path: 'items?id=eq.1',
      status: 200,
      json: ids(1),
      out: { 'Content-Profile': null },
    },
    get(
      "an aliased embed's order and filter may name its relation instead of its alias",
      'projects?id=eq.1&select=id,name,the_tasks:tasks(id,name)&tasks.order=name.asc&tasks.name=like.*w7',
      [
        {
          id: 1,
          name: 'Windows 7',
          the_tasks: [
            { id: 2, name: 'Code w7' },
            { id: 1, name: 'Design w7' },
          ],
        },
      ],
    ),
    get(
      'its alias first: a sibling embedded under that name is the one a path names',
      'projects?id=eq.1&select=id,all:tasks(id),tasks:tasks(id)&tasks.id=eq.2',
      [{ id: 1, all: [{ id: 1 }, { id: 2 }], tasks: [{ id: 2 }] }],
    ),
    {
      name: 'an order on a resource that is not embedded',
      method: 'GET',
      path: 'projects?select=id,clients(name)&order=clientsx(name).nullsfirst',
      status: 400,
      json: notEmbedded('clientsx'),
    },
  ],
};

describe('the read path as PostgREST answers it', () => {
  beforeAll(async () => {
    s = await setUpBlog(['conformance-read.sql'], { TALLY_DB_SCHEMAS: 'rd' });
  });
  afterAll(() => tearDown(s.db, s.t));

  for (const [area, cases] of Object.entries(AREAS)) {
    describe(area, () => {
      for (const c of cases) it(c.name, () => check(c));
    });
  }

  it('has a case for every filter operator the grammar accepts', () => {
    const used = new Set(
      Object.values(AREAS)
        .flat()
        .flatMap((c) => [...c.path.matchAll(/[=.,(]([a-z]+)(?=(?:\([^)]*\))?\.)/g)].map((m) => m[1])),
    );
    expect(OPERATOR_NAMES.filter((op) => !used.has(op))).toEqual([]);
  });
});
