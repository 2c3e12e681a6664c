import { createConfig, lintFromString } from '@redocly/openapi-core';
import SwaggerParser from '@apidevtools/swagger-parser';
import request from 'supertest';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import { TEST_API_KEY, restEnv } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';

// Both descriptions of /rest/v1, the default Swagger 2.0 and OpenAPI 3.1, say what the caller's
// role may do (writes and rpc/* included for a write token), and pass Redocly's recommended
// rules, as a linter in a client's pipeline would check them.

let db: TestDatabase, t: TestApp, jwtA: string, readA: string;

beforeAll(async () => {
  ({ db, t, jwtA, readA } = await setUpFinance(restEnv()));
});
afterAll(() => tearDown(db, t));

const describeFor = async (jwt: string | null, accept?: string) => {
  const res = await request(t.app)
    .get('/rest/v1/')
    .set({
      apikey: TEST_API_KEY,
      ...(jwt ? { Authorization: `Bearer ${jwt}` } : {}),
      ...(accept ? { Accept: accept } : {}),
    });
  expect(res.status).toBe(200);
  return res.text;
};

/**
 * Redocly's recommended rules' errors and warnings, one line each; but for the want of a
 * license, which Tally (unlicensed) does not name.
 */
async function lint(text: string): Promise<string[]> {
  const problems = await lintFromString({
    source: text,
    absoluteRef: 'openapi.json',
    config: await createConfig({ extends: ['recommended'] }),
  });
  return problems
    .filter((p) => p.ruleId !== 'info-license')
    .map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location[0]?.pointer ?? ''}`);
}

/** `METHOD path` of every operation. */
const operations = (doc: { paths: Record<string, Record<string, unknown>> }) =>
  Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${path}`));

it('the default Swagger 2.0 description lists the writes and functions a write token may use, and only reads for a read token', async () => {
  const write = JSON.parse(await describeFor(jwtA));
  expect(write.swagger).toBe('2.0');
  await SwaggerParser.validate(structuredClone(write));
  expect(operations(write)).toEqual(
    expect.arrayContaining([
      'GET /personal_transactions',
      'POST /personal_transactions',
      'PATCH /personal_transactions',
      'DELETE /personal_transactions',
      'POST /rpc/fund_summary',
    ]),
  );
  const v31 = JSON.parse(await describeFor(jwtA, 'application/vnd.oai.openapi+json'));
  expect(operations(write).sort()).toEqual(operations(v31).sort());
  const read = JSON.parse(await describeFor(readA));
  expect(operations(read).filter((o) => /^(POST|PATCH|DELETE) \/(?!rpc\/)/.test(o))).toEqual([]);
});

it.each([
  ['Swagger 2.0', undefined],
  ['OpenAPI 3.1', 'application/vnd.oai.openapi+json'],
])("the %s description passes Redocly's recommended rules", async (_, accept) => {
  for (const jwt of [jwtA, readA, null]) expect(await lint(await describeFor(jwt, accept))).toEqual([]);
});
