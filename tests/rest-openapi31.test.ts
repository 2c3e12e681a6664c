import SwaggerParser from '@apidevtools/swagger-parser';
import openapiTS, { astToString } from 'openapi-typescript';
import request from 'supertest';
import type { TestDatabase } from './harness/db.js';
import { startTestApp, type TestApp } from './harness/app.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { blogEnv, setUpBlog, setUpFinance, tearDown } from './harness/suite.js';

// GET /rest/v1/ with Accept: application/vnd.oai.openapi+json answers OpenAPI 3.1, with the
// writes and rpc/* the caller's role may make: openapi-typescript refused the Swagger 2.0 one
// (still the default, as PostgREST serves), and generated types are what a read returns.

const OPENAPI_31 = 'application/vnd.oai.openapi+json';

type Doc = {
  openapi: string;
  paths: Record<string, Record<string, unknown>>;
  components: { schemas: Record<string, { required?: string[]; properties: Record<string, { type?: unknown }> }> };
};

/** Each operation's id, by `METHOD path`: every operation has one, and no two the same. */
function operationIds(doc: Doc): Record<string, string | undefined> {
  const ids: Record<string, string | undefined> = {};
  for (const [path, item] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(item))
      ids[`${method.toUpperCase()} ${path}`] = (op as { operationId?: string }).operationId;
  expect(Object.entries(ids).filter(([, id]) => typeof id !== 'string' || id === '')).toEqual([]);
  expect(new Set(Object.values(ids)).size).toBe(Object.keys(ids).length);
  return ids;
}

describe('the OpenAPI 3.1 description of /rest/v1', () => {
  let db: TestDatabase, t: TestApp, jwtA: string, readA: string;

  beforeAll(async () => {
    ({ db, t, jwtA, readA } = await setUpFinance(restEnv()));
  });
  afterAll(() => tearDown(db, t));

  const describeFor = async (jwt: string | null, accept = OPENAPI_31) => {
    const res = await request(t.app)
      .get('/rest/v1/')
      .set({ apikey: TEST_API_KEY, accept, ...(jwt ? { Authorization: `Bearer ${jwt}` } : {}) });
    expect(res.status).toBe(200);
    return { res, doc: JSON.parse(res.text) as Doc };
  };

  it('is asked for by its media type; Swagger 2.0 stays the answer to any other', async () => {
    const { res, doc } = await describeFor(jwtA);
    expect(res.headers['content-type']).toBe('application/vnd.oai.openapi+json; version=3.1');
    expect(res.headers['vary']).toMatch(/\bAccept\b/);
    expect(doc.openapi).toBe('3.1.0');
    await SwaggerParser.validate(structuredClone(doc) as never);
    for (const accept of ['application/openapi+json', 'application/json', '*/*']) {
      const old = await describeFor(jwtA, accept);
      expect(old.res.headers['content-type']).toBe('application/openapi+json; charset=utf-8');
      expect(old.res.headers['vary']).toMatch(/\bAccept\b/);
      expect(JSON.parse(old.res.text).swagger).toBe('2.0');
    }
  });

  it("describes the writes and functions the caller's role may use, and nothing of the others", async () => {
    const write = (await describeFor(jwtA)).doc;
    expect(Object.keys(write.paths['/personal_transactions']!).sort()).toEqual(['delete', 'get', 'patch', 'post']);
    // Functions: GET too for one that changes nothing; a computed field's, which takes a row, POST only.
    expect(Object.keys(write.paths['/rpc/fund_summary']!).sort()).toEqual(['get', 'post']);
    expect(Object.keys(write.paths['/rpc/balance']!)).toEqual(['post']);
    // What a function answers: its scalar type (or null), any JSON for json.
    const answer = (path: string) =>
      (write.paths[path]!.post as { responses: { 200: { content: { 'application/json': { schema: unknown } } } } })
        .responses[200].content['application/json'].schema;
    expect(answer('/rpc/balance')).toEqual({ type: ['number', 'null'] });
    expect(answer('/rpc/spending_summary')).toEqual({});
    expect(Object.keys(write.paths)).not.toContain('/api_tokens');

    const read = (await describeFor(readA)).doc;
    expect(Object.keys(read.paths['/personal_transactions']!)).toEqual(['get']);
    expect(read.components.schemas['personal_transactions.insert']).toBeUndefined();

    const anonymous = (await describeFor(null)).doc;
    expect(Object.keys(anonymous.paths).filter((p) => !p.startsWith('/rpc/'))).toEqual([]);
  });

  it('names every operation with an id of its own, for the code generators that name methods by it', async () => {
    const ids = operationIds((await describeFor(jwtA)).doc);
    expect(ids).toMatchObject({
      'GET /personal_transactions': 'get.personal_transactions',
      'POST /personal_transactions': 'post.personal_transactions',
      'PATCH /personal_transactions': 'patch.personal_transactions',
      'DELETE /personal_transactions': 'delete.personal_transactions',
    });
    expect(Object.keys(ids).length).toBeGreaterThanOrEqual(35);
  });

  it('says a returned row has every column, null where it may be, and what an insert needs', async () => {
    const { doc } = await describeFor(jwtA);
    const row = doc.components.schemas.personal_transactions!;
    expect(row.required).toEqual(Object.keys(row.properties));
    expect(row.properties.amount!.type).toBe('number');
    expect(row.properties.note!.type).toEqual(['string', 'null']);
    const insert = doc.components.schemas['personal_transactions.insert']!;
    expect(insert.required).toEqual(expect.arrayContaining(['name', 'amount']));
    expect(insert.required).not.toContain('id'); // it has a default
    expect(insert.required).not.toContain('note'); // it may be null
  });

  it('is accepted by openapi-typescript, whose types say so', async () => {
    const { doc } = await describeFor(jwtA);
    const types = astToString(await openapiTS(doc as never));
    // A schema's type, from its key in components.schemas to its closing brace.
    const schemas = types.slice(types.indexOf('\n    schemas: {'));
    const block = (key: string) => {
      const start = schemas.indexOf(`\n        ${key}: {\n`);
      expect(start).toBeGreaterThan(-1);
      return schemas.slice(start, schemas.indexOf('\n        };', start));
    };
    const row = block('personal_transactions');
    expect(row).toContain('amount: number;');
    expect(row).toContain('note: string | null;');
    const insert = block('"personal_transactions.insert"');
    expect(insert).toContain('amount: number;');
    expect(insert).toContain('note?: string | null;');
    expect(types).toMatch(/"\/personal_transactions": \{/);
  });
});

describe('the OpenAPI 3.1 description of schemas that are not Tally’s', () => {
  // The fixtures of the conformance suites: overloads, unnamed and row arguments, void and
  // set-returning functions, views, arrays, enums; and names OpenAPI does not allow as
  // component names, which are escaped there and kept as they are in the paths.
  const cases: [string[], string][] = [
    [['blog.sql', 'blog-functions.sql'], 'blog'],
    [['conformance.sql'], 'conf'],
    [['conformance-read.sql'], 'rd'],
    [['conformance-write.sql'], 'wr'],
  ];
  it.each(cases)('%j: valid, and accepted by openapi-typescript', async (fixtures, schema) => {
    const s = await setUpBlog(fixtures, { TALLY_DB_SCHEMAS: schema });
    let odd: TestApp | undefined;
    try {
      await s.db.admin.unsafe(`
        CREATE TABLE ${schema}."odd name.x-y/{z}" (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "tags[]" text[], data jsonb);
        GRANT SELECT, INSERT, UPDATE, DELETE ON ${schema}."odd name.x-y/{z}" TO blog_user;
        CREATE FUNCTION ${schema}."odd fn"(a int, b text DEFAULT 'x') RETURNS SETOF ${schema}."odd name.x-y/{z}"
          LANGUAGE sql STABLE AS $$ SELECT * FROM ${schema}."odd name.x-y/{z}" $$;
        CREATE FUNCTION ${schema}."odd fn"(c date) RETURNS void LANGUAGE sql AS $$ SELECT $$;`);
      odd = startTestApp(s.db.url, blogEnv({ TALLY_DB_SCHEMAS: schema }));
      const res = await request(odd.app)
        .get('/rest/v1/')
        .set({ apikey: TEST_API_KEY, accept: OPENAPI_31, Authorization: `Bearer ${s.userJwt}` });
      expect(res.status).toBe(200);
      const doc = JSON.parse(res.text) as Doc;
      await SwaggerParser.validate(structuredClone(doc) as never);
      const types = astToString(await openapiTS(doc as never));
      expect(Object.keys(doc.paths)).toEqual(
        expect.arrayContaining([`/${encodeURIComponent('odd name.x-y/{z}')}`, `/rpc/${encodeURIComponent('odd fn')}`]),
      );
      expect(operationIds(doc)).toMatchObject({
        [`GET /${encodeURIComponent('odd name.x-y/{z}')}`]: 'get.odd-20-name-2e-x-2d-y-2f--7b-z-7d-',
        [`POST /rpc/${encodeURIComponent('odd fn')}`]: 'post.rpc.odd-20-fn',
      });
      const oddRow = doc.components.schemas['odd-20-name-2e-x-2d-y-2f--7b-z-7d-']!;
      expect(oddRow.required).toEqual(['id', 'tags[]', 'data']);
      expect(types).toContain('"odd-20-name-2e-x-2d-y-2f--7b-z-7d-.insert": {');
    } finally {
      await odd?.close();
      await tearDown(s.db, s.t);
    }
  });
});
