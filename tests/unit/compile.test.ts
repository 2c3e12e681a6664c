// SQL compilation (query/read.ts, write.ts, routine.ts, sql.ts): for each grammar feature, the
// exact statement text and parameter list the request compiles to. Parameters are numbered by
// compile() in order of first appearance in the text (a parameter used twice keeps its number).
// When a test here fails after a change, compare the two statements, and update the expectation
// only for a difference that is meant.

import { compileRead, compileRoutine, compileWrite } from './helpers/pipeline.js';
import { OPERATOR_NAMES, OPERATORS, type OperatorShape } from '../../gateway/engine/operators.js';
import { compile } from '../../gateway/engine/sql.js';

/** A read statement around the root's row query: the envelope every plain JSON read shares. */
const rows = (inner: string) =>
  `WITH pgrst_rows AS (${inner}) SELECT NULL::text AS total_result_set, pg_catalog.count(*)::int AS page_total, '[' || coalesce(pg_catalog.string_agg("pgrst_j", E', \\n '), '') || ']' AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT pg_catalog.row_to_json("_postgrest_t")::text AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`;

describe('select', () => {
  it('a plain read: every column, the body written by Postgres', () => {
    expect(compileRead('tags')).toEqual({
      main: {
        text: rows(`SELECT "pgrst_0".* FROM "blog"."tags" AS "pgrst_0"`),
        params: [],
      },
    });
  });

  it('columns, aliases, computed fields, JSON paths (keys as parameters) and casts', () => {
    expect(
      compileRead('posts', { query: 'select=id,headline:title,title_upper,lang:meta->>lang,meta->a->0,rating::text' }),
    ).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0"."id" AS "id", "pgrst_0"."title" AS "headline", "blog"."title_upper"(ROW("pgrst_0"."id", "pgrst_0"."author_id", "pgrst_0"."editor_id", "pgrst_0"."title", "pgrst_0"."body", "pgrst_0"."meta", "pgrst_0"."search", "pgrst_0"."active", "pgrst_0"."tags", "pgrst_0"."rating", "pgrst_0"."published")::"blog"."posts") AS "title_upper", ("pgrst_0"."meta"->>$1::text) AS "lang", (("pgrst_0"."meta"->$2::text)->$3::text::int4) AS "a", CAST("pgrst_0"."rating" AS pg_catalog.text) AS "rating" FROM "blog"."posts" AS "pgrst_0"`,
        ),
        params: ['lang', 'a', '0'],
      },
    });
  });

  it('aggregates group by the other columns, and the exact count counts groups', () => {
    expect(
      compileRead('posts', {
        query: 'select=author_id,total:rating.sum()::int,count()',
        aggregates: true,
        headers: { Prefer: 'count=exact' },
      }),
    ).toEqual({
      main: {
        text: `WITH pgrst_rows AS (SELECT "pgrst_0"."author_id" AS "author_id", CAST(pg_catalog.sum("pgrst_0"."rating") AS pg_catalog.int4) AS "total", pg_catalog.count(*) AS "count" FROM "blog"."posts" AS "pgrst_0" GROUP BY "pgrst_0"."author_id") SELECT (SELECT pg_catalog.count(*) FROM (SELECT 1 FROM "blog"."posts" AS "pgrst_0" GROUP BY "pgrst_0"."author_id") AS "pgrst_g")::text AS total_result_set, pg_catalog.count(*)::int AS page_total, '[' || coalesce(pg_catalog.string_agg("pgrst_j", E', \\n '), '') || ']' AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT pg_catalog.row_to_json("_postgrest_t")::text AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
        params: [],
      },
    });
  });
});

describe('filters', () => {
  it('every operator of the table compiles to its own SQL, its value a parameter', () => {
    const example: Record<OperatorShape, string> = {
      compare: 'v1',
      pattern: 'v1',
      binary: 'v1',
      list: '(v1,v2)',
      keyword: 'null',
      search: 'v1',
    };
    const texts = new Set<string>();
    for (const op of OPERATOR_NAMES) {
      const rule = OPERATORS[op];
      const { main } = compileRead('posts', { query: [['title', `${op}.${example[rule.shape]}`]] });
      const own = 'sql' in rule ? rule.sql : rule.shape === 'keyword' ? rule.values.null : undefined;
      if (own) expect(main.text).toMatch(new RegExp(`[ .]${compile(own).text.replace(/[^\w ]/g, '\\$&')}[ (),]`));
      expect(main.text).not.toContain('v1');
      if (rule.shape !== 'keyword') expect(main.params.join(',')).toContain('v1');
      texts.add(main.text);
    }
    // No two operators compile to the same statement.
    expect(texts.size).toBe(OPERATOR_NAMES.length);
  });

  it('comparisons cast the value to the column type', () => {
    expect(
      compileRead('posts', { query: 'id=eq.1&rating=gt.2.5&title=neq.x&author_id=lte.3&author_id=gte.1&id=lt.9' }),
    ).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0".* FROM "blog"."posts" AS "pgrst_0" WHERE "pgrst_0"."id" = $1::text::pg_catalog.int4 AND "pgrst_0"."rating" > $2::text::pg_catalog.numeric AND "pgrst_0"."title" <> $3::text::pg_catalog.text AND "pgrst_0"."author_id" <= $4::text::pg_catalog.int4 AND "pgrst_0"."author_id" >= $5::text::pg_catalog.int4 AND "pgrst_0"."id" < $6::text::pg_catalog.int4`,
        ),
        params: ['1', '2.5', 'x', '3', '1', '9'],
      },
    });
  });

  it('like/ilike turn * into %, match/imatch are regular expressions', () => {
    expect(compileRead('posts', { query: 'title=like.*a*&body=ilike.B*&title=match.^H&body=imatch.x$' })).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0".* FROM "blog"."posts" AS "pgrst_0" WHERE ("pgrst_0"."title")::text LIKE $1::text AND ("pgrst_0"."body")::text ILIKE $2::text AND ("pgrst_0"."title")::text ~ $3::text AND ("pgrst_0"."body")::text ~* $4::text`,
        ),
        params: ['%a%', 'B%', '^H', 'x$'],
      },
    });
  });

  it('any/all quantifiers take one array parameter', () => {
    expect(compileRead('posts', { query: 'id=gt(all).{1,2}&title=like(any).{a*,*b}' })).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0".* FROM "blog"."posts" AS "pgrst_0" WHERE "pgrst_0"."id" > ALL($1::text::pg_catalog.int4[]) AND ("pgrst_0"."title")::text LIKE ANY($2::text::pg_catalog.text[])`,
        ),
        params: ['{"1","2"}', '{"a%","%b"}'],
      },
    });
  });

  it('in is = ANY of one array parameter; on an array column, one parameter per item', () => {
    expect(compileRead('posts', { query: 'id=in.(1,2,3)&title=not.in.("a,b",c)&tags=in.({a},{b})' })).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0".* FROM "blog"."posts" AS "pgrst_0" WHERE "pgrst_0"."id" = ANY($1::text::pg_catalog.int4[]) AND NOT ("pgrst_0"."title" = ANY($2::text::pg_catalog.text[])) AND "pgrst_0"."tags" IN ($3::text::pg_catalog.text[], $4::text::pg_catalog.text[])`,
        ),
        params: ['{"1","2","3"}', '{"a,b","c"}', '{a}', '{b}'],
      },
    });
  });

  it('is and isdistinct', () => {
    expect(
      compileRead('posts', {
        query:
          'body=is.null&published=is.true&rating=not.is.null&editor_id=isdistinct.2&published=is.unknown&published=is.false&body=is.not_null',
      }),
    ).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0".* FROM "blog"."posts" AS "pgrst_0" WHERE "pgrst_0"."body" IS NULL AND "pgrst_0"."published" IS TRUE AND NOT ("pgrst_0"."rating" IS NULL) AND "pgrst_0"."editor_id" IS DISTINCT FROM $1::text::pg_catalog.int4 AND "pgrst_0"."published" IS UNKNOWN AND "pgrst_0"."published" IS FALSE AND "pgrst_0"."body" IS NOT NULL`,
        ),
        params: ['2'],
      },
    });
  });

  it('full-text search, with the language as a regconfig parameter', () => {
    expect(
      compileRead('posts', {
        query: 'search=fts.cat&body=plfts(english).fat cats&title=not.wfts(simple).a -b&search=phfts(french).le chat',
      }),
    ).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0".* FROM "blog"."posts" AS "pgrst_0" WHERE "pgrst_0"."search" @@ pg_catalog.to_tsquery($1::text) AND pg_catalog.to_tsvector($2::text::regconfig, ("pgrst_0"."body")::text) @@ pg_catalog.plainto_tsquery($2::text::regconfig, $3::text) AND NOT (pg_catalog.to_tsvector($4::text::regconfig, ("pgrst_0"."title")::text) @@ pg_catalog.websearch_to_tsquery($4::text::regconfig, $5::text)) AND "pgrst_0"."search" @@ pg_catalog.phraseto_tsquery($6::text::regconfig, $7::text)`,
        ),
        params: ['cat', 'english', 'fat cats', 'simple', 'a -b', 'french', 'le chat'],
      },
    });
  });

  it('array and range operators', () => {
    expect(
      compileRead('posts', {
        query:
          'tags=cs.{a,b}&tags=cd.{a}&tags=ov.{c}&active=sl.[2024-01-01,2024-02-01)&active=sr.[2020-01-01,2020-02-01)&active=nxr.[2024-01-01,2024-02-01)&active=nxl.[2024-01-01,2024-02-01)&active=adj.[2024-01-01,2024-02-01)',
      }),
    ).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0".* FROM "blog"."posts" AS "pgrst_0" WHERE "pgrst_0"."tags" @> $1::text::pg_catalog.text[] AND "pgrst_0"."tags" <@ $2::text::pg_catalog.text[] AND "pgrst_0"."tags" && $3::text::pg_catalog.text[] AND "pgrst_0"."active" << $4::text::pg_catalog.daterange AND "pgrst_0"."active" >> $5::text::pg_catalog.daterange AND "pgrst_0"."active" &< $6::text::pg_catalog.daterange AND "pgrst_0"."active" &> $7::text::pg_catalog.daterange AND "pgrst_0"."active" -|- $8::text::pg_catalog.daterange`,
        ),
        params: [
          '{a,b}',
          '{a}',
          '{c}',
          '[2024-01-01,2024-02-01)',
          '[2020-01-01,2020-02-01)',
          '[2024-01-01,2024-02-01)',
          '[2024-01-01,2024-02-01)',
          '[2024-01-01,2024-02-01)',
        ],
      },
    });
  });

  it('logic trees: nested and/or, not.and', () => {
    expect(
      compileRead('posts', {
        query:
          'or=(id.eq.1,and(rating.gt.2,title.like.*x*))&not.and=(body.is.null,id.lt.0)&or=(id.eq.7,not.or(id.eq.8))',
      }),
    ).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0".* FROM "blog"."posts" AS "pgrst_0" WHERE ("pgrst_0"."id" = $1::text::pg_catalog.int4 OR ("pgrst_0"."rating" > $2::text::pg_catalog.numeric AND ("pgrst_0"."title")::text LIKE $3::text)) AND NOT ("pgrst_0"."body" IS NULL AND "pgrst_0"."id" < $4::text::pg_catalog.int4) AND ("pgrst_0"."id" = $5::text::pg_catalog.int4 OR NOT ("pgrst_0"."id" = $6::text::pg_catalog.int4))`,
        ),
        params: ['1', '2', '%x%', '0', '7', '8'],
      },
    });
  });

  it('filters on JSON paths and computed fields', () => {
    expect(compileRead('posts', { query: 'meta->>lang=eq.en&meta->views=gt.5&title_upper=eq.HI' })).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0".* FROM "blog"."posts" AS "pgrst_0" WHERE ("pgrst_0"."meta"->>$1::text) = $2::text::pg_catalog.text AND ("pgrst_0"."meta"->$3::text) > $4::text::pg_catalog.jsonb AND "blog"."title_upper"(ROW("pgrst_0"."id", "pgrst_0"."author_id", "pgrst_0"."editor_id", "pgrst_0"."title", "pgrst_0"."body", "pgrst_0"."meta", "pgrst_0"."search", "pgrst_0"."active", "pgrst_0"."tags", "pgrst_0"."rating", "pgrst_0"."published")::"blog"."posts") = $5::text::pg_catalog.text`,
        ),
        params: ['lang', 'en', 'views', '5', 'HI'],
      },
    });
  });

  it('reads bare digits in a JSON path as an array index and quoted ones as an object key, as PostgREST does', () => {
    const { main } = compileRead('posts', { query: 'select=meta->"5",meta->tags->0&meta->>"-1"=eq.x' });
    expect(main.text).toContain(`("pgrst_0"."meta"->$1::text) AS "5"`);
    expect(main.text).toContain(`(("pgrst_0"."meta"->$2::text)->$3::text::int4) AS "tags"`);
    expect(main.text).toContain(`("pgrst_0"."meta"->>$4::text) = `);
    expect(main.params.slice(0, 4)).toEqual(['5', 'tags', '0', '-1']);
  });
});

describe('embeds', () => {
  it('many-to-one: a row_to_json lateral join on the foreign key', () => {
    expect(compileRead('posts', { query: 'select=id,author:users!author_id(name)' })).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0"."id" AS "id", "pgrst_2"."author" AS "author" FROM "blog"."posts" AS "pgrst_0" LEFT JOIN LATERAL (SELECT "pgrst_j" AS "author" FROM (SELECT pg_catalog.row_to_json("pgrst_t") AS "pgrst_j" FROM (SELECT "pgrst_1"."name" AS "name" FROM "blog"."users" AS "pgrst_1" WHERE "pgrst_1"."id" = "pgrst_0"."author_id") AS "pgrst_t") AS "pgrst_t") AS "pgrst_2" ON TRUE`,
        ),
        params: [],
      },
    });
  });

  it('one-to-many with its own filter, order and limit', () => {
    expect(
      compileRead('users', {
        query: 'select=id,posts!author_id(id,title)&posts.order=id.desc&posts.limit=2&posts.offset=1&posts.id=gt.1',
      }),
    ).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0"."id" AS "id", coalesce("pgrst_2"."posts", '[]'::json) AS "posts" FROM "blog"."users" AS "pgrst_0" LEFT JOIN LATERAL (SELECT pg_catalog.json_agg("pgrst_j") AS "posts" FROM (SELECT pg_catalog.row_to_json("pgrst_t") AS "pgrst_j" FROM (SELECT "pgrst_1"."id" AS "id", "pgrst_1"."title" AS "title" FROM "blog"."posts" AS "pgrst_1" WHERE "pgrst_1"."author_id" = "pgrst_0"."id" AND "pgrst_1"."id" > $1::text::pg_catalog.int4 ORDER BY "pgrst_1"."id" DESC LIMIT 2 OFFSET $2::text::int8) AS "pgrst_t") AS "pgrst_t") AS "pgrst_2" ON TRUE`,
        ),
        params: ['1', '1'],
      },
    });
  });

  it('many-to-many through the junction table', () => {
    expect(compileRead('posts', { query: 'select=id,tags(name)' })).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0"."id" AS "id", coalesce("pgrst_2"."tags", '[]'::json) AS "tags" FROM "blog"."posts" AS "pgrst_0" LEFT JOIN LATERAL (SELECT pg_catalog.json_agg("pgrst_j") AS "tags" FROM (SELECT pg_catalog.row_to_json("pgrst_t") AS "pgrst_j" FROM (SELECT "pgrst_1"."name" AS "name" FROM "blog"."tags" AS "pgrst_1" JOIN "blog"."post_tags" AS "pgrst_3" ON "pgrst_3"."tag_id" = "pgrst_1"."id" WHERE "pgrst_3"."post_id" = "pgrst_0"."id") AS "pgrst_t") AS "pgrst_t") AS "pgrst_2" ON TRUE`,
        ),
        params: [],
      },
    });
  });

  it('!inner on a to-many embed keeps only parents with a match', () => {
    expect(compileRead('posts', { query: 'select=id,comments!inner(id)&comments.body=eq.x' })).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0"."id" AS "id", coalesce("pgrst_2"."comments", '[]'::json) AS "comments" FROM "blog"."posts" AS "pgrst_0" JOIN LATERAL (SELECT pg_catalog.json_agg("pgrst_j") AS "comments" FROM (SELECT pg_catalog.row_to_json("pgrst_t") AS "pgrst_j" FROM (SELECT "pgrst_1"."id" AS "id" FROM "blog"."comments" AS "pgrst_1" WHERE "pgrst_1"."post_id" = "pgrst_0"."id" AND "pgrst_1"."body" = $1::text::pg_catalog.text) AS "pgrst_t") AS "pgrst_t") AS "pgrst_2" ON "pgrst_2"."comments" IS NOT NULL`,
        ),
        params: ['x'],
      },
    });
  });

  it('!inner on a to-one embed is a plain JOIN', () => {
    expect(compileRead('posts', { query: 'select=id,users!editor_id!inner(name)' })).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0"."id" AS "id", "pgrst_2"."users" AS "users" FROM "blog"."posts" AS "pgrst_0" JOIN LATERAL (SELECT "pgrst_j" AS "users" FROM (SELECT pg_catalog.row_to_json("pgrst_t") AS "pgrst_j" FROM (SELECT "pgrst_1"."name" AS "name" FROM "blog"."users" AS "pgrst_1" WHERE "pgrst_1"."id" = "pgrst_0"."editor_id") AS "pgrst_t") AS "pgrst_t") AS "pgrst_2" ON TRUE`,
        ),
        params: [],
      },
    });
  });

  it('a to-one spread lifts the columns into the parent', () => {
    expect(compileRead('posts', { query: 'select=id,...users!author_id(author:name)' })).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0"."id" AS "id", "pgrst_2"."author" AS "author" FROM "blog"."posts" AS "pgrst_0" LEFT JOIN LATERAL (SELECT "pgrst_1"."name" AS "author" FROM "blog"."users" AS "pgrst_1" WHERE "pgrst_1"."id" = "pgrst_0"."author_id") AS "pgrst_2" ON TRUE`,
        ),
        params: [],
      },
    });
  });

  it('a to-many spread gives one array per column', () => {
    expect(compileRead('users', { query: 'select=id,...comments(body)' })).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0"."id" AS "id", coalesce("pgrst_2"."body", '[]'::json) AS "body" FROM "blog"."users" AS "pgrst_0" LEFT JOIN LATERAL (SELECT pg_catalog.json_agg("pgrst_t"."body") AS "body", pg_catalog.count(*) AS "pgrst_n" FROM (SELECT "pgrst_1"."body" AS "body" FROM "blog"."comments" AS "pgrst_1" WHERE "pgrst_1"."user_id" = "pgrst_0"."id") AS "pgrst_t") AS "pgrst_2" ON TRUE`,
        ),
        params: [],
      },
    });
  });

  it('embed=not.is.null filters the parent on the embed', () => {
    expect(compileRead('posts', { query: 'select=id,comments(id)&comments=not.is.null' })).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0"."id" AS "id", coalesce("pgrst_2"."comments", '[]'::json) AS "comments" FROM "blog"."posts" AS "pgrst_0" LEFT JOIN LATERAL (SELECT pg_catalog.json_agg("pgrst_j") AS "comments" FROM (SELECT pg_catalog.row_to_json("pgrst_t") AS "pgrst_j" FROM (SELECT "pgrst_1"."id" AS "id" FROM "blog"."comments" AS "pgrst_1" WHERE "pgrst_1"."post_id" = "pgrst_0"."id") AS "pgrst_t") AS "pgrst_t") AS "pgrst_2" ON TRUE WHERE "pgrst_2"."comments" IS NOT NULL`,
        ),
        params: [],
      },
    });
  });

  it('nested embeds number their aliases depth-first', () => {
    expect(compileRead('users', { query: 'select=name,posts!author_id(title,comments(body))' })).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0"."name" AS "name", coalesce("pgrst_4"."posts", '[]'::json) AS "posts" FROM "blog"."users" AS "pgrst_0" LEFT JOIN LATERAL (SELECT pg_catalog.json_agg("pgrst_j") AS "posts" FROM (SELECT pg_catalog.row_to_json("pgrst_t") AS "pgrst_j" FROM (SELECT "pgrst_1"."title" AS "title", coalesce("pgrst_3"."comments", '[]'::json) AS "comments" FROM "blog"."posts" AS "pgrst_1" LEFT JOIN LATERAL (SELECT pg_catalog.json_agg("pgrst_j") AS "comments" FROM (SELECT pg_catalog.row_to_json("pgrst_t") AS "pgrst_j" FROM (SELECT "pgrst_2"."body" AS "body" FROM "blog"."comments" AS "pgrst_2" WHERE "pgrst_2"."post_id" = "pgrst_1"."id") AS "pgrst_t") AS "pgrst_t") AS "pgrst_3" ON TRUE WHERE "pgrst_1"."author_id" = "pgrst_0"."id") AS "pgrst_t") AS "pgrst_t") AS "pgrst_4" ON TRUE`,
        ),
        params: [],
      },
    });
  });
});

describe('order and ranges', () => {
  it('order with directions and nulls, a limit in the text (its plan is reused) and the offset as a parameter', () => {
    expect(
      compileRead('posts', { query: 'order=rating.desc.nullslast,title.asc,id.nullsfirst&limit=10&offset=20' }),
    ).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0".* FROM "blog"."posts" AS "pgrst_0" ORDER BY "pgrst_0"."rating" DESC NULLS LAST, "pgrst_0"."title" ASC, "pgrst_0"."id" NULLS FIRST LIMIT 10 OFFSET $1::text::int8`,
        ),
        params: ['20'],
      },
    });
  });

  it('order by a column of a to-one embed is a scalar sub-select', () => {
    expect(compileRead('posts', { query: 'select=id,author:users!author_id(name)&order=author(name).desc' })).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0"."id" AS "id", "pgrst_2"."author" AS "author" FROM "blog"."posts" AS "pgrst_0" LEFT JOIN LATERAL (SELECT "pgrst_j" AS "author" FROM (SELECT pg_catalog.row_to_json("pgrst_t") AS "pgrst_j" FROM (SELECT "pgrst_1"."name" AS "name" FROM "blog"."users" AS "pgrst_1" WHERE "pgrst_1"."id" = "pgrst_0"."author_id") AS "pgrst_t") AS "pgrst_t") AS "pgrst_2" ON TRUE ORDER BY (SELECT "pgrst_1_o"."name" FROM "blog"."users" AS "pgrst_1_o" WHERE "pgrst_1_o"."id" = "pgrst_0"."author_id" LIMIT 1) DESC`,
        ),
        params: [],
      },
    });
  });

  it('the Range header becomes a limit', () => {
    expect(compileRead('posts', { query: 'select=id', headers: { Range: '5-9' } })).toEqual({
      main: {
        text: rows(`SELECT "pgrst_0"."id" AS "id" FROM "blog"."posts" AS "pgrst_0" LIMIT 5 OFFSET $1::text::int8`),
        params: ['5'],
      },
    });
  });
});

describe('counts and media types', () => {
  it('count=exact counts the filtered rows without the limit, reusing the parameters', () => {
    expect(compileRead('tags', { headers: { Prefer: 'count=exact' }, query: 'id=gt.1&limit=5' })).toEqual({
      main: {
        text: `WITH pgrst_rows AS (SELECT "pgrst_0".* FROM "blog"."tags" AS "pgrst_0" WHERE "pgrst_0"."id" > $1::text::pg_catalog.int4 LIMIT 5) SELECT (SELECT pg_catalog.count(*) FROM "blog"."tags" AS "pgrst_0" WHERE "pgrst_0"."id" > $1::text::pg_catalog.int4)::text AS total_result_set, pg_catalog.count(*)::int AS page_total, '[' || coalesce(pg_catalog.string_agg("pgrst_j", E', \\n '), '') || ']' AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT pg_catalog.row_to_json("_postgrest_t")::text AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
        params: ['1'],
      },
    });
  });

  it('count=planned adds an EXPLAIN of the count', () => {
    // The EXPLAIN is compiled on its own: it gets only the parameters it refers to (no limit).
    expect(compileRead('tags', { headers: { Prefer: 'count=planned' }, query: 'id=gt.1&limit=5' })).toEqual({
      main: {
        text: rows(
          `SELECT "pgrst_0".* FROM "blog"."tags" AS "pgrst_0" WHERE "pgrst_0"."id" > $1::text::pg_catalog.int4 LIMIT 5`,
        ),
        params: ['1'],
      },
      explain: {
        text: `EXPLAIN (FORMAT JSON) SELECT 1 FROM "blog"."tags" AS "pgrst_0" WHERE "pgrst_0"."id" > $1::text::pg_catalog.int4`,
        params: ['1'],
      },
    });
  });

  it('count=estimated counts up to the threshold and adds an EXPLAIN', () => {
    expect(compileRead('tags', { headers: { Prefer: 'count=estimated' } })).toEqual({
      main: {
        text: `WITH pgrst_rows AS (SELECT "pgrst_0".* FROM "blog"."tags" AS "pgrst_0") SELECT (SELECT pg_catalog.count(*) FROM (SELECT 1 FROM "blog"."tags" AS "pgrst_0" LIMIT 10001) AS "pgrst_e")::text AS total_result_set, pg_catalog.count(*)::int AS page_total, '[' || coalesce(pg_catalog.string_agg("pgrst_j", E', \\n '), '') || ']' AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT pg_catalog.row_to_json("_postgrest_t")::text AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
        params: [],
      },
      explain: {
        text: `EXPLAIN (FORMAT JSON) SELECT 1 FROM "blog"."tags" AS "pgrst_0"`,
        params: [],
      },
    });
  });

  it('the singular object media type takes the first element', () => {
    expect(compileRead('tags', { headers: { Accept: 'application/vnd.pgrst.object+json' } })).toEqual({
      main: {
        text: `WITH pgrst_rows AS (SELECT "pgrst_0".* FROM "blog"."tags" AS "pgrst_0") SELECT NULL::text AS total_result_set, pg_catalog.count(*)::int AS page_total, coalesce((pg_catalog.array_agg("pgrst_j"))[1], 'null') AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT pg_catalog.row_to_json("_postgrest_t")::text AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
        params: [],
      },
    });
  });

  it('CSV is written by Postgres, header first', () => {
    expect(compileRead('tags', { headers: { Accept: 'text/csv' } })).toEqual({
      main: {
        text: `WITH pgrst_rows AS (SELECT "pgrst_0".* FROM "blog"."tags" AS "pgrst_0") SELECT NULL::text AS total_result_set, pg_catalog.count(*)::int AS page_total, (SELECT coalesce(pg_catalog.string_agg(a.k, ','), '') FROM (SELECT pg_catalog.json_object_keys(r)::text AS k FROM (SELECT pg_catalog.row_to_json(hh) AS r FROM pgrst_rows AS hh LIMIT 1) s) a) || E'\\n' || coalesce(pg_catalog.string_agg("pgrst_j", E'\\n'), '') AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT substring("_postgrest_t"::text, 2, length("_postgrest_t"::text) - 2) AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
        params: [],
      },
    });
  });
});

describe('insert', () => {
  it('POST of one object: INSERT … VALUES from the one jsonb parameter; with return=minimal, the INSERT alone answers its row', () => {
    expect(compileWrite('tags', { method: 'POST', body: { id: 1, name: 'a' } })).toEqual({
      text: `INSERT INTO "blog"."tags" AS "pgrst_0" ("id", "name") VALUES ((pg_catalog.jsonb_populate_record(NULL::"blog"."tags", ($1::text::pg_catalog.jsonb -> 0)))."id", (pg_catalog.jsonb_populate_record(NULL::"blog"."tags", ($1::text::pg_catalog.jsonb -> 0)))."name") RETURNING '1'::text AS total_result_set, 1 AS page_total, NULL::text AS body, NULL::text AS location, NULL::int AS inserted`,
      params: ['[{"id":1,"name":"a"}]'],
    });
  });

  it('POST of an array: INSERT … SELECT over its elements, in order; return=representation shapes the rows by select', () => {
    expect(
      compileWrite('tags', {
        method: 'POST',
        body: [
          { id: 1, name: 'a' },
          { id: 2, name: 'b' },
        ],
        headers: { Prefer: 'return=representation' },
        query: 'select=id',
      }),
    ).toEqual({
      text: `WITH pgrst_source AS (INSERT INTO "blog"."tags" AS "pgrst_0" ("id", "name") SELECT "pgrst_rec"."id", "pgrst_rec"."name" FROM pg_catalog.jsonb_array_elements($1::text::pg_catalog.jsonb) WITH ORDINALITY AS "pgrst_body"("elem", "ord") CROSS JOIN LATERAL pg_catalog.jsonb_populate_record(NULL::"blog"."tags", "pgrst_body"."elem") AS "pgrst_rec" ORDER BY "pgrst_body"."ord" RETURNING "pgrst_0"."id"), pgrst_rows AS (SELECT "pgrst_src"."id" AS "id" FROM pgrst_source AS "pgrst_src") SELECT (SELECT pg_catalog.count(*) FROM pgrst_source)::text AS total_result_set, pg_catalog.count(*)::int AS page_total, '[' || coalesce(pg_catalog.string_agg("pgrst_j", E', \\n '), '') || ']' AS body, NULL::text AS location, NULL::int AS inserted FROM (SELECT pg_catalog.row_to_json("_postgrest_t")::text AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
      params: ['[{"id":1,"name":"a"},{"id":2,"name":"b"}]'],
    });
  });

  it('missing=default uses the column default for keys left out', () => {
    expect(
      compileWrite('comments', {
        method: 'POST',
        body: { post_id: 1, body: 'x' },
        headers: { Prefer: 'missing=default' },
      }),
    ).toEqual({
      text: `INSERT INTO "blog"."comments" AS "pgrst_0" ("post_id", "body") VALUES (CASE WHEN ($1::text::pg_catalog.jsonb -> 0) ? $2::text THEN (pg_catalog.jsonb_populate_record(NULL::"blog"."comments", ($1::text::pg_catalog.jsonb -> 0)))."post_id" ELSE NULL END, CASE WHEN ($1::text::pg_catalog.jsonb -> 0) ? $3::text THEN (pg_catalog.jsonb_populate_record(NULL::"blog"."comments", ($1::text::pg_catalog.jsonb -> 0)))."body" ELSE NULL END) RETURNING '1'::text AS total_result_set, 1 AS page_total, NULL::text AS body, NULL::text AS location, NULL::int AS inserted`,
      params: ['[{"post_id":1,"body":"x"}]', 'post_id', 'body'],
    });
  });

  it('an empty object inserts the first column default', () => {
    // The catalog's default expression is spliced into the text as Postgres printed it (catalog text, never client text).
    expect(compileWrite('comments', { method: 'POST', body: {} })).toEqual({
      text: `INSERT INTO "blog"."comments" AS "pgrst_0" ("id") VALUES (nextval('blog.comments_id_seq'::regclass)) RETURNING '1'::text AS total_result_set, 1 AS page_total, NULL::text AS body, NULL::text AS location, NULL::int AS inserted`,
      params: [],
    });
  });

  it('a table without a primary key has no Location', () => {
    expect(compileWrite('logs', { method: 'POST', body: { line: 'x' } })).toEqual({
      text: `INSERT INTO "blog"."logs" AS "pgrst_0" ("line") VALUES ((pg_catalog.jsonb_populate_record(NULL::"blog"."logs", ($1::text::pg_catalog.jsonb -> 0)))."line") RETURNING '1'::text AS total_result_set, 1 AS page_total, NULL::text AS body, NULL::text AS location, NULL::int AS inserted`,
      params: ['[{"line":"x"}]'],
    });
  });

  it('resolution=merge-duplicates: ON CONFLICT on the primary key DO UPDATE', () => {
    expect(
      compileWrite('tags', {
        method: 'POST',
        body: { id: 1, name: 'a' },
        headers: { Prefer: 'resolution=merge-duplicates' },
      }),
    ).toEqual({
      text: `INSERT INTO "blog"."tags" AS "pgrst_0" ("id", "name") VALUES ((pg_catalog.jsonb_populate_record(NULL::"blog"."tags", ($1::text::pg_catalog.jsonb -> 0)))."id", (pg_catalog.jsonb_populate_record(NULL::"blog"."tags", ($1::text::pg_catalog.jsonb -> 0)))."name") ON CONFLICT ("id") DO UPDATE SET "id" = EXCLUDED."id", "name" = EXCLUDED."name" RETURNING '1'::text AS total_result_set, 1 AS page_total, NULL::text AS body, NULL::text AS location, ("pgrst_0".xmax = 0)::int AS inserted`,
      params: ['[{"id":1,"name":"a"}]'],
    });
  });

  it('resolution=ignore-duplicates with on_conflict: DO NOTHING', () => {
    expect(
      compileWrite('tags', {
        method: 'POST',
        query: 'on_conflict=name',
        body: { id: 1, name: 'a' },
        headers: { Prefer: 'resolution=ignore-duplicates' },
      }),
    ).toEqual({
      text: `INSERT INTO "blog"."tags" AS "pgrst_0" ("id", "name") VALUES ((pg_catalog.jsonb_populate_record(NULL::"blog"."tags", ($1::text::pg_catalog.jsonb -> 0)))."id", (pg_catalog.jsonb_populate_record(NULL::"blog"."tags", ($1::text::pg_catalog.jsonb -> 0)))."name") ON CONFLICT ("name") DO NOTHING RETURNING '1'::text AS total_result_set, 1 AS page_total, NULL::text AS body, NULL::text AS location, ("pgrst_0".xmax = 0)::int AS inserted`,
      params: ['[{"id":1,"name":"a"}]'],
    });
  });

  it('PUT is an upsert on the primary key', () => {
    expect(compileWrite('tags', { method: 'PUT', query: 'id=eq.1', body: { id: 1, name: 'a' } })).toEqual({
      text: `INSERT INTO "blog"."tags" AS "pgrst_0" ("id", "name") VALUES ((pg_catalog.jsonb_populate_record(NULL::"blog"."tags", ($1::text::pg_catalog.jsonb -> 0)))."id", (pg_catalog.jsonb_populate_record(NULL::"blog"."tags", ($1::text::pg_catalog.jsonb -> 0)))."name") ON CONFLICT ("id") DO UPDATE SET "id" = EXCLUDED."id", "name" = EXCLUDED."name" RETURNING '1'::text AS total_result_set, 1 AS page_total, NULL::text AS body, NULL::text AS location, ("pgrst_0".xmax = 0)::int AS inserted`,
      params: ['[{"id":1,"name":"a"}]'],
    });
  });
});

describe('update and delete', () => {
  it('PATCH sets the body columns of the filtered rows', () => {
    expect(compileWrite('tags', { method: 'PATCH', query: 'id=eq.1&name=like.a*', body: { name: 'b' } })).toEqual({
      text: `WITH pgrst_source AS (UPDATE "blog"."tags" AS "pgrst_0" SET "name" = "pgrst_rec"."name" FROM pg_catalog.jsonb_populate_record(NULL::"blog"."tags", $1::text::pg_catalog.jsonb) AS "pgrst_rec" WHERE "pgrst_0"."id" = $2::text::pg_catalog.int4 AND ("pgrst_0"."name")::text LIKE $3::text RETURNING 1 AS "pgrst_one") SELECT pg_catalog.count(*)::text AS total_result_set, pg_catalog.count(*)::int AS page_total, NULL::text AS body, NULL::text AS location, NULL::int AS inserted FROM pgrst_source`,
      params: ['{"name":"b"}', '1', 'a%'],
    });
  });

  it('an empty PATCH changes nothing but still runs', () => {
    // Parameters are numbered from the text, so the filter the statement no longer refers to sends nothing.
    expect(compileWrite('tags', { method: 'PATCH', query: 'id=eq.1', body: {} })).toEqual({
      text: `WITH pgrst_source AS (SELECT 1 AS "pgrst_one" FROM "blog"."tags" AS "pgrst_0" WHERE false) SELECT pg_catalog.count(*)::text AS total_result_set, pg_catalog.count(*)::int AS page_total, NULL::text AS body, NULL::text AS location, NULL::int AS inserted FROM pgrst_source`,
      params: [],
    });
  });

  it('PATCH with return=representation embeds from the returned rows', () => {
    expect(
      compileWrite('posts', {
        method: 'PATCH',
        query: 'id=eq.1&select=id,author:users!author_id(name)',
        body: { title: 'x' },
        headers: { Prefer: 'return=representation' },
      }),
    ).toEqual({
      text: `WITH pgrst_source AS (UPDATE "blog"."posts" AS "pgrst_0" SET "title" = "pgrst_rec"."title" FROM pg_catalog.jsonb_populate_record(NULL::"blog"."posts", $1::text::pg_catalog.jsonb) AS "pgrst_rec" WHERE "pgrst_0"."id" = $2::text::pg_catalog.int4 RETURNING "pgrst_0"."id", "pgrst_0"."author_id"), pgrst_rows AS (SELECT "pgrst_src"."id" AS "id", "pgrst_2"."author" AS "author" FROM pgrst_source AS "pgrst_src" LEFT JOIN LATERAL (SELECT "pgrst_j" AS "author" FROM (SELECT pg_catalog.row_to_json("pgrst_t") AS "pgrst_j" FROM (SELECT "pgrst_1"."name" AS "name" FROM "blog"."users" AS "pgrst_1" WHERE "pgrst_1"."id" = "pgrst_src"."author_id") AS "pgrst_t") AS "pgrst_t") AS "pgrst_2" ON TRUE) SELECT (SELECT pg_catalog.count(*) FROM pgrst_source)::text AS total_result_set, pg_catalog.count(*)::int AS page_total, '[' || coalesce(pg_catalog.string_agg("pgrst_j", E', \\n '), '') || ']' AS body, NULL::text AS location, NULL::int AS inserted FROM (SELECT pg_catalog.row_to_json("_postgrest_t")::text AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
      params: ['{"title":"x"}', '1'],
    });
  });

  it('DELETE of the filtered rows', () => {
    expect(compileWrite('tags', { method: 'DELETE', query: 'id=in.(1,2)' })).toEqual({
      text: `WITH pgrst_source AS (DELETE FROM "blog"."tags" AS "pgrst_0" WHERE "pgrst_0"."id" = ANY($1::text::pg_catalog.int4[]) RETURNING 1 AS "pgrst_one") SELECT pg_catalog.count(*)::text AS total_result_set, pg_catalog.count(*)::int AS page_total, NULL::text AS body, NULL::text AS location, NULL::int AS inserted FROM pgrst_source`,
      params: ['{"1","2"}'],
    });
  });

  it('DELETE with return=representation as CSV', () => {
    expect(
      compileWrite('tags', {
        method: 'DELETE',
        query: 'id=eq.1',
        headers: { Prefer: 'return=representation', Accept: 'text/csv' },
      }),
    ).toEqual({
      text: `WITH pgrst_source AS (DELETE FROM "blog"."tags" AS "pgrst_0" WHERE "pgrst_0"."id" = $1::text::pg_catalog.int4 RETURNING "pgrst_0".*), pgrst_rows AS (SELECT "pgrst_src"."id", "pgrst_src"."name" FROM pgrst_source AS "pgrst_src") SELECT (SELECT pg_catalog.count(*) FROM pgrst_source)::text AS total_result_set, pg_catalog.count(*)::int AS page_total, (SELECT coalesce(pg_catalog.string_agg(a.k, ','), '') FROM (SELECT pg_catalog.json_object_keys(r)::text AS k FROM (SELECT pg_catalog.row_to_json(hh) AS r FROM pgrst_rows AS hh LIMIT 1) s) a) || E'\\n' || coalesce(pg_catalog.string_agg("pgrst_j", E'\\n'), '') AS body, NULL::text AS location, NULL::int AS inserted FROM (SELECT substring("_postgrest_t"::text, 2, length("_postgrest_t"::text) - 2) AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
      params: ['1'],
    });
  });
});

describe('rpc', () => {
  it('POST: named arguments from one jsonb parameter, typed by jsonb_to_record', () => {
    expect(compileRoutine('add_them', { method: 'POST', body: { a: 1, b: 2 } })).toEqual({
      main: {
        text: `WITH pgrst_rows AS (SELECT "blog"."add_them"("a" := "pgrst_args"."a", "b" := "pgrst_args"."b") AS "pgrst_scalar" FROM pg_catalog.jsonb_to_record($1::text::pg_catalog.jsonb) AS "pgrst_args"("a" pg_catalog.int4, "b" pg_catalog.int4)) SELECT NULL::text AS total_result_set, pg_catalog.count(*)::int AS page_total, coalesce((pg_catalog.array_agg("pgrst_j"))[1], 'null') AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT coalesce(pg_catalog.to_json("_postgrest_t"."pgrst_scalar")::text, 'null') AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
        params: ['{"a":1,"b":2}'],
      },
    });
  });

  it('GET: the arguments come from the query string as text', () => {
    expect(compileRoutine('add_them', { query: 'a=1&b=2' })).toEqual({
      main: {
        text: `WITH pgrst_rows AS (SELECT "blog"."add_them"("a" := "pgrst_args"."a", "b" := "pgrst_args"."b") AS "pgrst_scalar" FROM pg_catalog.jsonb_to_record($1::text::pg_catalog.jsonb) AS "pgrst_args"("a" pg_catalog.int4, "b" pg_catalog.int4)) SELECT NULL::text AS total_result_set, pg_catalog.count(*)::int AS page_total, coalesce((pg_catalog.array_agg("pgrst_j"))[1], 'null') AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT coalesce(pg_catalog.to_json("_postgrest_t"."pgrst_scalar")::text, 'null') AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
        params: ['{"a":"1","b":"2"}'],
      },
    });
  });

  it('a repeated GET argument is an array; a set of scalars is a JSON array', () => {
    expect(compileRoutine('ids_of', { query: 'ids=1&ids=2' })).toEqual({
      main: {
        text: `WITH pgrst_rows AS (SELECT "blog"."ids_of"("ids" := "pgrst_args"."ids") AS "pgrst_scalar" FROM pg_catalog.jsonb_to_record($1::text::pg_catalog.jsonb) AS "pgrst_args"("ids" pg_catalog.int4[])) SELECT NULL::text AS total_result_set, pg_catalog.count(*)::int AS page_total, '[' || coalesce(pg_catalog.string_agg("pgrst_j", ', '), '') || ']' AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT coalesce(pg_catalog.to_json("_postgrest_t"."pgrst_scalar")::text, 'null') AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
        params: ['{"ids":["1","2"]}'],
      },
    });
  });

  it('a void function has no body', () => {
    expect(compileRoutine('rename_user', { method: 'POST', body: { uid: 1, new_name: 'x' } })).toEqual({
      main: {
        text: `WITH pgrst_rows AS (SELECT "blog"."rename_user"("uid" := "pgrst_args"."uid", "new_name" := "pgrst_args"."new_name") AS "pgrst_scalar" FROM pg_catalog.jsonb_to_record($1::text::pg_catalog.jsonb) AS "pgrst_args"("uid" pg_catalog.int4, "new_name" pg_catalog.text)) SELECT NULL::text AS total_result_set, pg_catalog.count(*)::int AS page_total, NULL::text AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM pgrst_rows`,
        params: ['{"uid":1,"new_name":"x"}'],
      },
    });
  });

  it('one unnamed json parameter takes the whole body', () => {
    expect(compileRoutine('echo', { method: 'POST', body: [1, 2] })).toEqual({
      main: {
        text: `WITH pgrst_rows AS (SELECT "blog"."echo"($1::text::pg_catalog.json) AS "pgrst_scalar") SELECT NULL::text AS total_result_set, pg_catalog.count(*)::int AS page_total, coalesce((pg_catalog.array_agg("pgrst_j"))[1], 'null') AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT coalesce(pg_catalog.to_json("_postgrest_t"."pgrst_scalar")::text, 'null') AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
        params: ['[1,2]'],
      },
    });
  });

  it('a function without parameters', () => {
    expect(compileRoutine('post_count')).toEqual({
      main: {
        text: `WITH pgrst_rows AS (SELECT "blog"."post_count"() AS "pgrst_scalar") SELECT NULL::text AS total_result_set, pg_catalog.count(*)::int AS page_total, coalesce((pg_catalog.array_agg("pgrst_j"))[1], 'null') AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT coalesce(pg_catalog.to_json("_postgrest_t"."pgrst_scalar")::text, 'null') AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
        params: [],
      },
    });
  });

  it('a function returning rows is the FROM of a read: select, filters, order, limit, count', () => {
    expect(
      compileRoutine('posts_by', {
        query: 'author=1&select=id,title&id=gt.2&order=id&limit=5',
        headers: { Prefer: 'count=exact' },
      }),
    ).toEqual({
      main: {
        text: `WITH pgrst_rows AS (SELECT "pgrst_0"."id" AS "id", "pgrst_0"."title" AS "title" FROM pg_catalog.jsonb_to_record($1::text::pg_catalog.jsonb) AS "pgrst_args"("author" pg_catalog.int4) CROSS JOIN LATERAL "blog"."posts_by"("author" := "pgrst_args"."author") AS "pgrst_0" WHERE "pgrst_0"."id" > $2::text::pg_catalog.int4 ORDER BY "pgrst_0"."id" LIMIT 5) SELECT (SELECT pg_catalog.count(*) FROM pg_catalog.jsonb_to_record($1::text::pg_catalog.jsonb) AS "pgrst_args"("author" pg_catalog.int4) CROSS JOIN LATERAL "blog"."posts_by"("author" := "pgrst_args"."author") AS "pgrst_0" WHERE "pgrst_0"."id" > $2::text::pg_catalog.int4)::text AS total_result_set, pg_catalog.count(*)::int AS page_total, '[' || coalesce(pg_catalog.string_agg("pgrst_j", E', \\n '), '') || ']' AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT pg_catalog.row_to_json("_postgrest_t")::text AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
        params: ['{"author":"1"}', '2'],
      },
    });
  });

  it('a VOLATILE function returning one row runs once, in a materialised CTE', () => {
    expect(
      compileRoutine('new_post', { method: 'POST', body: { title: 'x' }, headers: { Prefer: 'count=exact' } }),
    ).toEqual({
      main: {
        text: `WITH pgrst_call AS MATERIALIZED (SELECT "pgrst_c".* FROM pg_catalog.jsonb_to_record($1::text::pg_catalog.jsonb) AS "pgrst_args"("title" pg_catalog.text) CROSS JOIN LATERAL "blog"."new_post"("title" := "pgrst_args"."title") AS "pgrst_c"), pgrst_rows AS (SELECT "pgrst_0".* FROM pgrst_call AS "pgrst_0") SELECT (SELECT pg_catalog.count(*) FROM pgrst_call AS "pgrst_0")::text AS total_result_set, pg_catalog.count(*)::int AS page_total, coalesce((pg_catalog.array_agg("pgrst_j"))[1], 'null') AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT pg_catalog.row_to_json("_postgrest_t")::text AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
        params: ['{"title":"x"}'],
      },
    });
  });
});

describe('edge cases', () => {
  it('an empty in list matches nothing; on an array column it is false', () => {
    expect(compileRead('posts', { query: 'id=in.()&tags=in.()' })).toEqual({
      main: {
        text: `WITH pgrst_rows AS (SELECT "pgrst_0".* FROM "blog"."posts" AS "pgrst_0" WHERE "pgrst_0"."id" = ANY($1::text::pg_catalog.int4[]) AND false) SELECT NULL::text AS total_result_set, pg_catalog.count(*)::int AS page_total, '[' || coalesce(pg_catalog.string_agg("pgrst_j", E', \\n '), '') || ']' AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT pg_catalog.row_to_json("_postgrest_t")::text AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
        params: ['{}'],
      },
    });
  });

  it('list items are written as one array literal, quotes and backslashes escaped', () => {
    expect(compileRead('posts', { query: 'title=in.("a\\"b","c\\\\d",e f)' })).toEqual({
      main: {
        text: `WITH pgrst_rows AS (SELECT "pgrst_0".* FROM "blog"."posts" AS "pgrst_0" WHERE "pgrst_0"."title" = ANY($1::text::pg_catalog.text[])) SELECT NULL::text AS total_result_set, pg_catalog.count(*)::int AS page_total, '[' || coalesce(pg_catalog.string_agg("pgrst_j", E', \\n '), '') || ']' AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT pg_catalog.row_to_json("_postgrest_t")::text AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
        params: ['{"a\\"b","c\\\\d","e f"}'],
      },
    });
  });

  it('a negative JSON array index is an int4 parameter too', () => {
    expect(compileRead('posts', { query: 'select=last:tags->-1,meta->>-2' })).toEqual({
      main: {
        text: `WITH pgrst_rows AS (SELECT (pg_catalog.to_jsonb("pgrst_0"."tags")->$1::text::int4) AS "last", ("pgrst_0"."meta"->>$2::text::int4) AS "meta" FROM "blog"."posts" AS "pgrst_0") SELECT NULL::text AS total_result_set, pg_catalog.count(*)::int AS page_total, '[' || coalesce(pg_catalog.string_agg("pgrst_j", E', \\n '), '') || ']' AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT pg_catalog.row_to_json("_postgrest_t")::text AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
        params: ['-1', '-2'],
      },
    });
  });

  it('logic trees on an embedded resource filter its rows', () => {
    expect(compileRead('posts', { query: 'select=id,comments(id)&comments.or=(id.eq.1,body.is.null)' })).toEqual({
      main: {
        text: `WITH pgrst_rows AS (SELECT "pgrst_0"."id" AS "id", coalesce("pgrst_2"."comments", '[]'::json) AS "comments" FROM "blog"."posts" AS "pgrst_0" LEFT JOIN LATERAL (SELECT pg_catalog.json_agg("pgrst_j") AS "comments" FROM (SELECT pg_catalog.row_to_json("pgrst_t") AS "pgrst_j" FROM (SELECT "pgrst_1"."id" AS "id" FROM "blog"."comments" AS "pgrst_1" WHERE "pgrst_1"."post_id" = "pgrst_0"."id" AND ("pgrst_1"."id" = $1::text::pg_catalog.int4 OR "pgrst_1"."body" IS NULL)) AS "pgrst_t") AS "pgrst_t") AS "pgrst_2" ON TRUE) SELECT NULL::text AS total_result_set, pg_catalog.count(*)::int AS page_total, '[' || coalesce(pg_catalog.string_agg("pgrst_j", E', \\n '), '') || ']' AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT pg_catalog.row_to_json("_postgrest_t")::text AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
        params: ['1'],
      },
    });
  });

  it('a to-one spread with an aggregate is aggregated by the parent', () => {
    expect(
      compileRead('posts', {
        query: 'select=published,...users!author_id(name.count()),rating.sum()',
        aggregates: true,
      }),
    ).toEqual({
      main: {
        text: `WITH pgrst_rows AS (SELECT "pgrst_0"."published" AS "published", pg_catalog.count("pgrst_2"."count") AS "count", pg_catalog.sum("pgrst_0"."rating") AS "sum" FROM "blog"."posts" AS "pgrst_0" LEFT JOIN LATERAL (SELECT "pgrst_1"."name" AS "count" FROM "blog"."users" AS "pgrst_1" WHERE "pgrst_1"."id" = "pgrst_0"."author_id") AS "pgrst_2" ON TRUE GROUP BY "pgrst_0"."published") SELECT NULL::text AS total_result_set, pg_catalog.count(*)::int AS page_total, '[' || coalesce(pg_catalog.string_agg("pgrst_j", E', \\n '), '') || ']' AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT pg_catalog.row_to_json("_postgrest_t")::text AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
        params: [],
      },
    });
  });

  it('a cast JSON path and a cast computed field', () => {
    expect(compileRead('posts', { query: 'select=v:meta->>views::int,title_upper::text&meta->>views=gt.5' })).toEqual({
      main: {
        text: `WITH pgrst_rows AS (SELECT CAST(("pgrst_0"."meta"->>$1::text) AS pg_catalog.int4) AS "v", CAST("blog"."title_upper"(ROW("pgrst_0"."id", "pgrst_0"."author_id", "pgrst_0"."editor_id", "pgrst_0"."title", "pgrst_0"."body", "pgrst_0"."meta", "pgrst_0"."search", "pgrst_0"."active", "pgrst_0"."tags", "pgrst_0"."rating", "pgrst_0"."published")::"blog"."posts") AS pg_catalog.text) AS "title_upper" FROM "blog"."posts" AS "pgrst_0" WHERE ("pgrst_0"."meta"->>$2::text) > $3::text::pg_catalog.text) SELECT NULL::text AS total_result_set, pg_catalog.count(*)::int AS page_total, '[' || coalesce(pg_catalog.string_agg("pgrst_j", E', \\n '), '') || ']' AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT pg_catalog.row_to_json("_postgrest_t")::text AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
        params: ['views', 'views', '5'],
      },
    });
  });

  it('count=planned on a VOLATILE function explains with its CTE', () => {
    expect(
      compileRoutine('new_post', { method: 'POST', body: { title: 'x' }, headers: { Prefer: 'count=planned' } }),
    ).toEqual({
      main: {
        text: `WITH pgrst_call AS MATERIALIZED (SELECT "pgrst_c".* FROM pg_catalog.jsonb_to_record($1::text::pg_catalog.jsonb) AS "pgrst_args"("title" pg_catalog.text) CROSS JOIN LATERAL "blog"."new_post"("title" := "pgrst_args"."title") AS "pgrst_c"), pgrst_rows AS (SELECT "pgrst_0".* FROM pgrst_call AS "pgrst_0") SELECT NULL::text AS total_result_set, pg_catalog.count(*)::int AS page_total, coalesce((pg_catalog.array_agg("pgrst_j"))[1], 'null') AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT pg_catalog.row_to_json("_postgrest_t")::text AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
        params: ['{"title":"x"}'],
      },
      explain: {
        text: `EXPLAIN (FORMAT JSON) WITH pgrst_call AS MATERIALIZED (SELECT "pgrst_c".* FROM pg_catalog.jsonb_to_record($1::text::pg_catalog.jsonb) AS "pgrst_args"("title" pg_catalog.text) CROSS JOIN LATERAL "blog"."new_post"("title" := "pgrst_args"."title") AS "pgrst_c") SELECT 1 FROM pgrst_call AS "pgrst_0"`,
        params: ['{"title":"x"}'],
      },
    });
  });

  it('a function returning rows, as a singular object, with an embed', () => {
    expect(
      compileRoutine('posts_by', {
        query: 'author=1&select=id,author:users!author_id(name)',
        headers: { Accept: 'application/vnd.pgrst.object+json' },
      }),
    ).toEqual({
      main: {
        text: `WITH pgrst_rows AS (SELECT "pgrst_0"."id" AS "id", "pgrst_2"."author" AS "author" FROM pg_catalog.jsonb_to_record($1::text::pg_catalog.jsonb) AS "pgrst_args"("author" pg_catalog.int4) CROSS JOIN LATERAL "blog"."posts_by"("author" := "pgrst_args"."author") AS "pgrst_0" LEFT JOIN LATERAL (SELECT "pgrst_j" AS "author" FROM (SELECT pg_catalog.row_to_json("pgrst_t") AS "pgrst_j" FROM (SELECT "pgrst_1"."name" AS "name" FROM "blog"."users" AS "pgrst_1" WHERE "pgrst_1"."id" = "pgrst_0"."author_id") AS "pgrst_t") AS "pgrst_t") AS "pgrst_2" ON TRUE) SELECT NULL::text AS total_result_set, pg_catalog.count(*)::int AS page_total, coalesce((pg_catalog.array_agg("pgrst_j"))[1], 'null') AS body, pg_catalog.current_setting('response.headers', true) AS response_headers, pg_catalog.current_setting('response.status', true) AS response_status FROM (SELECT pg_catalog.row_to_json("_postgrest_t")::text AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t") AS "pgrst_body"`,
        params: ['{"author":"1"}'],
      },
    });
  });

  it('PATCH with an or= filter and a JSON path filter', () => {
    expect(
      compileWrite('posts', {
        method: 'PATCH',
        query: 'or=(id.eq.1,id.eq.2)&meta->>lang=eq.en',
        body: { title: 'x', rating: 2 },
      }),
    ).toEqual({
      text: `WITH pgrst_source AS (UPDATE "blog"."posts" AS "pgrst_0" SET "title" = "pgrst_rec"."title", "rating" = "pgrst_rec"."rating" FROM pg_catalog.jsonb_populate_record(NULL::"blog"."posts", $1::text::pg_catalog.jsonb) AS "pgrst_rec" WHERE ("pgrst_0"."id" = $2::text::pg_catalog.int4 OR "pgrst_0"."id" = $3::text::pg_catalog.int4) AND ("pgrst_0"."meta"->>$4::text) = $5::text::pg_catalog.text RETURNING 1 AS "pgrst_one") SELECT pg_catalog.count(*)::text AS total_result_set, pg_catalog.count(*)::int AS page_total, NULL::text AS body, NULL::text AS location, NULL::int AS inserted FROM pgrst_source`,
      params: ['{"title":"x","rating":2}', '1', '2', 'lang', 'en'],
    });
  });

  it('POST with columns= writes only those columns', () => {
    expect(compileWrite('tags', { method: 'POST', query: 'columns=name', body: [{ name: 'a', id: 9 }] })).toEqual({
      text: `INSERT INTO "blog"."tags" AS "pgrst_0" ("name") VALUES ((pg_catalog.jsonb_populate_record(NULL::"blog"."tags", pg_catalog.jsonb_build_object($1::text, ($2::text::pg_catalog.jsonb -> 0) -> $3::text)))."name") RETURNING '1'::text AS total_result_set, 1 AS page_total, NULL::text AS body, NULL::text AS location, NULL::int AS inserted`,
      params: ['name', '[{"name":"a","id":9}]', 'name'],
    });
  });

  it('an upsert with missing=default', () => {
    expect(
      compileWrite('comments', {
        method: 'POST',
        body: { id: 1, body: 'x' },
        headers: { Prefer: 'resolution=merge-duplicates,missing=default,return=headers-only' },
      }),
    ).toEqual({
      text: `WITH pgrst_source AS (INSERT INTO "blog"."comments" AS "pgrst_0" ("id", "body") VALUES (CASE WHEN ($1::text::pg_catalog.jsonb -> 0) ? $2::text THEN CASE WHEN (nextval('blog.comments_id_seq'::regclass)) IS NULL THEN (pg_catalog.jsonb_populate_record(NULL::"blog"."comments", ($1::text::pg_catalog.jsonb -> 0)))."id" ELSE (pg_catalog.jsonb_populate_record(NULL::"blog"."comments", ($1::text::pg_catalog.jsonb -> 0)))."id" END ELSE nextval('blog.comments_id_seq'::regclass) END, CASE WHEN ($1::text::pg_catalog.jsonb -> 0) ? $3::text THEN (pg_catalog.jsonb_populate_record(NULL::"blog"."comments", ($1::text::pg_catalog.jsonb -> 0)))."body" ELSE NULL END) ON CONFLICT ("id") DO UPDATE SET "id" = EXCLUDED."id", "body" = EXCLUDED."body" RETURNING "pgrst_0"."id" AS "pgrst_k0", ("pgrst_0".xmax = 0) AS "pgrst_inserted") SELECT pg_catalog.count(*)::text AS total_result_set, pg_catalog.count(*)::int AS page_total, NULL::text AS body, (SELECT pg_catalog.json_agg(pg_catalog.json_build_array("pgrst_src"."pgrst_k0"::text))::text FROM pgrst_source AS "pgrst_src") AS location, (SELECT pg_catalog.count(*) FROM pgrst_source WHERE "pgrst_inserted")::int AS inserted FROM pgrst_source`,
      params: ['[{"id":1,"body":"x"}]', 'id', 'body'],
    });
  });
});

describe('tenant filter (EngineConfig.tenant)', () => {
  // post_id stands for a tenant column: comments and post_tags have it, posts and users do not.
  const tenant = { column: 'post_id', claim: 'post' };

  it('compares the tenant column of the root and of every embed with the claim, one parameter filled at run time', () => {
    const read = compileRead('comments', { query: 'select=id,post_tags:posts(post_tags(tag_id))&id=gt.1', tenant });
    expect(read.main.text).toContain(
      `WHERE "pgrst_0"."post_id" = $1::pg_catalog.int4 AND "pgrst_0"."id" > $2::text::pg_catalog.int4)`,
    );
    expect(read.main.text).toContain(
      `FROM "blog"."post_tags" AS "pgrst_2" WHERE "pgrst_2"."post_id" = $1::pg_catalog.int4 AND "pgrst_2"."post_id" = "pgrst_1"."id"`,
    );
    expect(read.main.params).toEqual([null, '1']);
    expect(read.main.claims).toEqual([{ index: 0, name: 'post' }]);
  });

  it('leaves a relation without the column, and a caller without the claim, as they were', () => {
    expect(compileRead('posts', { query: 'select=id', tenant }).main).toEqual(
      compileRead('posts', { query: 'select=id' }).main,
    );
  });

  it('filters the rows a PATCH or DELETE may touch; an insert takes the tenant from its row', () => {
    const patch = compileWrite('comments', { method: 'PATCH', query: 'id=eq.1', body: { body: 'x' }, tenant });
    expect(patch.text).toContain(
      `WHERE "pgrst_0"."post_id" = $2::pg_catalog.int4 AND "pgrst_0"."id" = $3::text::pg_catalog.int4`,
    );
    const del = compileWrite('comments', { method: 'DELETE', query: 'id=eq.1', tenant });
    expect(del.text).toContain(
      `WHERE "pgrst_0"."post_id" = $1::pg_catalog.int4 AND "pgrst_0"."id" = $2::text::pg_catalog.int4`,
    );
    const post = compileWrite('comments', { method: 'POST', body: { body: 'x', post_id: 1, user_id: 1 }, tenant });
    expect(post).toEqual(compileWrite('comments', { method: 'POST', body: { body: 'x', post_id: 1, user_id: 1 } }));
  });
});
