import SwaggerParser from '@apidevtools/swagger-parser';
import request from 'supertest';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import { setUpFinance, tearDown } from './harness/suite.js';
import { present } from './harness/present.js';
import { waitFor } from './harness/wait.js';

// The live OpenAPI description of /api/v1, its reference page, and the rate limit of the
// surface.

type Doc = {
  openapi: string;
  info: { version: string };
  servers: { url: string }[];
  security: unknown[];
  paths: Record<
    string,
    Record<string, { responses: Record<string, unknown>; requestBody?: unknown; security?: unknown[] }>
  >;
  components: {
    securitySchemes: Record<string, { type: string; scheme?: string }>;
    schemas: Record<string, { properties: Record<string, { enum?: string[] }> }>;
  };
};

/** The operation `method` of `path`, which the test expects the document to have. */
const operation = (doc: Doc, path: string, method: string) =>
  present(doc.paths[path]?.[method], `the operation ${method} ${path}`);

/** The enum of a field of a component schema, undefined when the document has none. */
const enumOf = (doc: Doc, schema: string, field: string): string[] | undefined =>
  doc.components.schemas[schema]?.properties[field]?.enum;

describe('/api/v1 OpenAPI description and docs', () => {
  let db: TestDatabase, t: TestApp, jwt: string;

  beforeAll(async () => {
    ({ db, t, jwtA: jwt } = await setUpFinance({ TALLY_RATE_LIMIT_PER_MINUTE: '10000' }, ['docs', 'other']));
  });
  afterAll(() => tearDown(db, t));

  const fetchDoc = async (path = '/api/v1/openapi.json'): Promise<Doc> => {
    const res = await request(t.app).get(path).set('Host', 'tally.example:3000');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    return res.body as Doc;
  };

  it('is a valid OpenAPI 3.1 document (swagger-parser), version 1.0.0, with the server as a path', async () => {
    const doc = await fetchDoc();
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('1.0.0');
    // Not the Host header's tally.example: a client's Host never reaches the document.
    expect(doc.servers).toEqual([{ url: '/api/v1' }]);
    await expect(SwaggerParser.validate(structuredClone(doc) as never)).resolves.toBeDefined();
  });

  it('requires every field of each record it answers, so that generated client types are not all optional', async () => {
    const doc = (await fetchDoc()) as unknown as {
      components: { schemas: Record<string, { properties: Record<string, unknown>; required?: string[] }> };
    };
    const records = ['Expense', 'FundTransaction', 'Fund', 'FundWithTransactions', 'FundDetail', 'Contact'];
    for (const name of [...records, 'Participant', 'Activity', 'Category', 'PaymentMethod']) {
      const schema = present(doc.components.schemas[name], `the schema ${name}`);
      expect([name, [...(schema.required ?? [])].sort()]).toEqual([name, Object.keys(schema.properties).sort()]);
    }
  });

  it('reads right: "an expense", "a fund" in the summaries', async () => {
    const doc = (await fetchDoc()) as unknown as { paths: Record<string, Record<string, { summary: string }>> };
    const summaries = Object.values(doc.paths).flatMap((p) => Object.values(p).map((op) => op.summary));
    expect(summaries).toEqual(
      expect.arrayContaining([
        'Create an expense',
        'Delete an expense permanently',
        'Create a fund',
        'Change fields of an expense',
      ]),
    );
    expect(summaries.filter((s) => /\ba (?!one)[aeiou]/i.test(s))).toEqual([]); // "a one-hour token" is right
  });

  it('is published at /openapi.json too, without a token', async () => {
    expect(await fetchDoc('/openapi.json')).toEqual(await fetchDoc());
  });

  it('has the HTTP bearer security scheme on every operation but the token exchange and itself', async () => {
    const doc = await fetchDoc();
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'JWT',
    });
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
    expect(operation(doc, '/token', 'post').security).not.toContainEqual({ bearerAuth: [] });
    expect(operation(doc, '/openapi.json', 'get').security).toEqual([]);
  });

  it('describes every route with request and response schemas and the 401/403/429 responses', async () => {
    const doc = await fetchDoc();
    const operations = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([m]) => ['get', 'post', 'patch', 'delete'].includes(m))
        .map(([m, op]) => [`${m.toUpperCase()} ${path}`, op] as const),
    );
    expect(operations.map(([name]) => name).sort()).toEqual([
      'DELETE /contacts/{id}',
      'DELETE /fund_transactions/{id}',
      'DELETE /personal_transactions/{id}',
      'GET /activity',
      'GET /activity/{id}',
      'GET /categories',
      'GET /contacts',
      'GET /contacts/{id}',
      'GET /fund_transactions',
      'GET /fund_transactions/{id}',
      'GET /funds',
      'GET /funds/{id}',
      'GET /openapi.json',
      'GET /payment_methods',
      'GET /personal_transactions',
      'GET /personal_transactions/{id}',
      'PATCH /contacts/{id}',
      'PATCH /fund_transactions/{id}',
      'PATCH /funds/{id}',
      'PATCH /personal_transactions/{id}',
      'POST /activity/undo',
      'POST /activity/{id}/undo',
      'POST /contacts',
      'POST /fund_transactions',
      'POST /funds',
      'POST /personal_transactions',
      'POST /token',
    ]);
    for (const [name, op] of operations) {
      const success = op.responses['200'] ?? op.responses['201'];
      expect([name, success]).toEqual([name, expect.objectContaining({ content: expect.anything() })]);
      // An undo of one change names it in the path and takes no body.
      if ((name.startsWith('POST') && !name.endsWith('{id}/undo')) || name.startsWith('PATCH'))
        expect([name, op.requestBody]).toEqual([name, expect.objectContaining({ content: expect.anything() })]);
      if (name !== 'GET /openapi.json')
        for (const code of ['401', '403', '429'])
          expect([name, code, op.responses[code]]).toEqual([name, code, expect.anything()]);
    }
    expect(operation(doc, '/personal_transactions', 'post').responses['201']).toMatchObject({
      headers: { Location: expect.anything() },
    });
    expect(doc.components.schemas.Error).toMatchObject({ required: ['code', 'message', 'details', 'hint'] });
    const resolved = (await SwaggerParser.dereference(structuredClone(doc) as never)) as unknown as Doc;
    const tooMany = operation(resolved, '/contacts', 'get').responses['429'] as {
      headers: Record<string, unknown>;
      content: unknown;
    };
    expect(tooMany.headers['Retry-After']).toBeDefined();
    expect(tooMany.content).toMatchObject({
      'application/json': { schema: { required: ['code', 'message', 'details', 'hint'] } },
    });
  });

  it('publishes the list defaults of each resource', async () => {
    const doc = await fetchDoc();
    const params = (path: string) =>
      (operation(doc, path, 'get') as unknown as { parameters: { name: string; schema: { default?: unknown } }[] })
        .parameters;
    const defaults = (path: string) =>
      Object.fromEntries(
        params(path)
          .filter((p) => p.schema.default !== undefined)
          .map((p) => [p.name, p.schema.default]),
      );
    expect(defaults('/personal_transactions')).toEqual({ select: '*', order: 'occurred_at.desc', limit: 20 });
    expect(defaults('/funds')).toEqual({ select: '*,fund_transactions(*)' });
    expect(defaults('/fund_transactions')).toMatchObject({ order: 'occurred_at.desc' });
  });

  it('lists the live enums, and a new category or method shows up within seconds', async () => {
    const doc = await fetchDoc();
    expect(enumOf(doc, 'ExpenseCreate', 'category_id')).toHaveLength(15);
    expect(enumOf(doc, 'ExpenseCreate', 'method_id')).toEqual([
      'bank-transfer',
      'cash',
      'credit-card',
      'installment',
      'mobile-wallet',
    ]);
    expect(enumOf(doc, 'FundTransactionCreate', 'category_id')).toContain('fund-income');
    expect(enumOf(doc, 'FundCreate', 'kind')).toEqual(['Badminton', 'Travel']);

    await db.admin`INSERT INTO public.categories (id, name, for_funds) VALUES ('visa-fees', 'Visa fees', true)`;
    await db.admin`INSERT INTO public.payment_methods (id, name) VALUES ('voucher', 'Voucher')`;
    // Waited for as a condition: how soon is bounded by the 5 s of docs/deployment.md, which
    // tests/processes.test.ts measures; here only that it comes without a restart.
    let live = doc;
    await waitFor(
      async () => {
        live = await fetchDoc();
        return Boolean(
          live.components.schemas.PaymentMethod &&
          enumOf(live, 'ExpenseCreate', 'method_id')?.includes('voucher') &&
          enumOf(live, 'FundTransactionCreate', 'category_id')?.includes('visa-fees'),
        );
      },
      'the new category and payment method in the OpenAPI document',
      30_000,
    );
    expect(enumOf(live, 'FundTransactionCreate', 'category_id')).toContain('visa-fees');
    expect(enumOf(live, 'ExpenseCreate', 'category_id')).not.toContain('visa-fees'); // offered to funds only
    expect(enumOf(live, 'ExpenseCreate', 'method_id')).toContain('voucher');
    await expect(SwaggerParser.validate(structuredClone(live) as never)).resolves.toBeDefined();
    // The published enum is the enforced one: the new method is accepted.
    const res = await request(t.app)
      .post('/api/v1/personal_transactions')
      .set('Authorization', `Bearer ${jwt}`)
      .send({ name: 'Gift', amount: 10, category_id: 'other', method_id: 'voucher' });
    expect(res.status).toBe(201);
  });

  it('serves a human-readable reference at /api/v1/docs from local assets', async () => {
    const redirect = await request(t.app).get('/api/v1/docs');
    expect(redirect.status).toBe(301);
    expect(redirect.headers.location).toBe('/api/v1/docs/');
    const page = await request(t.app).get('/api/v1/docs/');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.text).toContain('Tally API v1');
    expect(page.text).not.toMatch(/(src|href)=['"]https?:/); // no CDN
    const scripts = [...page.text.matchAll(/src=['"]\.\/([^'"]+)['"]/g)].map((m) => m[1]);
    expect(scripts).toEqual(expect.arrayContaining(['swagger-ui-bundle.js', 'swagger-ui-init.js']));
    for (const script of scripts) {
      const asset = await request(t.app).get(`/api/v1/docs/${script}`);
      expect([script, asset.status]).toEqual([script, 200]);
    }
    const init = await request(t.app).get('/api/v1/docs/swagger-ui-init.js');
    expect(init.text).toContain('"swaggerUrl": "../openapi.json"');
  });
});

describe('/api/v1 rate limit', () => {
  let db: TestDatabase, t: TestApp, jwt: string;

  beforeAll(async () => {
    ({ db, t, jwtA: jwt } = await setUpFinance({ TALLY_RATE_LIMIT_PER_MINUTE: '3' }, ['limited', 'other']));
  });
  afterAll(() => tearDown(db, t));

  it('answers 429 with Retry-After in the error shape once a token is over its limit, writes included', async () => {
    for (let i = 0; i < 3; i++)
      expect((await request(t.app).get('/api/v1/contacts').set('Authorization', `Bearer ${jwt}`)).status).toBe(200);
    const before = await db.admin`SELECT count(*)::int AS n FROM contacts`;
    const res = await request(t.app)
      .post('/api/v1/contacts')
      .set('Authorization', `Bearer ${jwt}`)
      .send({ name: 'Over the limit' });
    expect(res.status).toBe(429);
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(res.body).toMatchObject({
      code: 'PT429',
      message: expect.stringContaining('Rate limit exceeded'),
      details: null,
    });
    expect(await db.admin`SELECT count(*)::int AS n FROM contacts`).toEqual(before);
  });
});
