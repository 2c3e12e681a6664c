import request from 'supertest';
import { startTestApp } from './harness/app.js';
import { generateTypes } from '../gateway/typescript-types.js';
import { first } from './harness/present.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown, type FinanceSuite } from './harness/suite.js';
import { waitFor } from './harness/wait.js';

// Deny by default: a table with the tenant column (TALLY_DB_TENANT_COLUMN) that an API role may
// touch is served only while row-level security is enabled and forced on it with a policy. A
// table granted before its policy (a migration in the wrong order, or a DBA's) was served by the
// next live reload at once: A posted a row into B with B's workspace_id (201), and read B's rows.
// Now it is refused on every surface until its policy exists, then served, isolated, from the
// reload after that.

let s: FinanceSuite;
beforeAll(async () => {
  s = await setUpFinance(restEnv());
});
afterAll(() => tearDown(s.db, s.t));

const rest = (method: 'get' | 'post' | 'patch' | 'delete', path: string, jwt = s.jwtA) =>
  request(s.t.app)[method](path).set('apikey', TEST_API_KEY).set('authorization', `Bearer ${jwt}`);

/** Every way a client could reach the new table, and what each answers. */
async function surfaces() {
  const openapi = await rest('get', '/rest/v1/');
  const openapi31 = await rest('get', '/rest/v1/').set('accept', 'application/vnd.oai.openapi+json');
  const types = await generateTypes(s.db.admin, ['public'], 'api_write', 'workspace_id');
  return {
    read: await rest('get', '/rest/v1/receipts'),
    readB: await rest('get', '/rest/v1/receipts', s.jwtB),
    write: await rest('post', '/rest/v1/receipts').send({
      workspace_id: s.b.id,
      expense_id: s.b.expenseId,
      note: 'planted',
    }),
    update: await rest('patch', '/rest/v1/receipts?note=eq.of-b').send({ note: 'changed by a' }),
    remove: await rest('delete', '/rest/v1/receipts?note=eq.of-b'),
    embed: await rest('get', '/rest/v1/personal_transactions?select=id,receipts(note)'),
    rpc: await rest('get', '/rest/v1/rpc/all_receipts'),
    view: await rest('get', '/rest/v1/receipt_notes'),
    documents: [JSON.stringify(openapi.body), JSON.stringify(openapi31.body), types].map((d) => ({
      table: d.includes('receipts'),
      rpc: d.includes('all_receipts'),
      view: d.includes('receipt_notes'),
    })),
  };
}

test('a tenant table granted before its policy is refused everywhere until the policy exists, then served isolated', async () => {
  // The table, its grants, a function and a view of it, before any policy: one transaction,
  // so that the marker function proves the reload that saw them.
  await s.db.admin.begin(async (tx) => {
    await tx`CREATE TABLE public.receipts (
      workspace_id uuid NOT NULL DEFAULT tally.current_workspace_id() REFERENCES public.workspaces,
      id uuid NOT NULL DEFAULT gen_random_uuid(),
      expense_id uuid NOT NULL,
      note text,
      PRIMARY KEY (workspace_id, id),
      FOREIGN KEY (workspace_id, expense_id) REFERENCES public.personal_transactions (workspace_id, id))`;
    await tx`GRANT SELECT ON public.receipts TO api_read`;
    await tx`GRANT SELECT, INSERT, UPDATE, DELETE ON public.receipts TO api_write`;
    await tx`INSERT INTO public.receipts (workspace_id, expense_id, note) VALUES (${s.b.id}, ${s.b.expenseId}, 'of-b')`;
    await tx`CREATE FUNCTION public.all_receipts() RETURNS SETOF public.receipts LANGUAGE sql STABLE AS 'SELECT * FROM public.receipts'`;
    await tx`GRANT EXECUTE ON FUNCTION public.all_receipts() TO api_read`;
    await tx`CREATE VIEW public.receipt_notes AS SELECT workspace_id, id, note FROM public.receipts`;
    await tx`GRANT SELECT ON public.receipt_notes TO api_read`;
    await tx`CREATE FUNCTION public.new_table_marker() RETURNS int LANGUAGE sql STABLE AS 'SELECT 1'`;
    await tx`GRANT EXECUTE ON FUNCTION public.new_table_marker() TO api_read`;
  });
  await waitFor(
    async () => (await rest('get', '/rest/v1/rpc/new_table_marker')).status === 200,
    'the reload that sees the new table',
  );

  const before = await surfaces();
  const refused = { code: 'TLY005' };
  for (const res of [before.read, before.readB, before.write, before.update, before.remove, before.rpc, before.view]) {
    expect([res.status, res.body]).toEqual([403, expect.objectContaining(refused)]);
  }
  expect(before.read.body).toEqual({
    code: 'TLY005',
    message: "The table 'public.receipts' is not served: it is not isolated by row-level security",
    details: 'public.receipts has the tenant column workspace_id but row-level security is not enabled on it',
    hint: expect.stringMatching(/^An operator must isolate it/),
  });
  expect(before.rpc.body.details).toBe(`public.all_receipts returns its rows: ${before.read.body.details}`);
  expect(before.view.body.details).toBe(`public.receipt_notes reads public.receipts: ${before.read.body.details}`);
  expect([before.embed.status, before.embed.body.code]).toEqual([403, 'TLY005']);
  expect(before.documents).toEqual(Array(3).fill({ table: false, rpc: false, view: false }));
  const rows = await s.db.admin`SELECT workspace_id, note FROM public.receipts ORDER BY note`;
  expect(rows).toEqual([{ workspace_id: s.b.id, note: 'of-b' }]);

  // A server started now loads the schema with the table in it: the same, and the rest served.
  const started = startTestApp(s.db.url, restEnv());
  try {
    const get = (path: string) =>
      request(started.app).get(path).set('apikey', TEST_API_KEY).set('authorization', `Bearer ${s.jwtA}`);
    expect([(await get('/rest/v1/receipts')).body.code, (await get('/rest/v1/personal_transactions')).status]).toEqual([
      'TLY005',
      200,
    ]);
  } finally {
    await started.close();
  }

  // The policy, as policies/ gives one; the next reload serves the table, isolated.
  await s.db.admin`SELECT tally.workspace_isolation('public.receipts')`;
  await waitFor(async () => (await rest('get', '/rest/v1/receipts')).status === 200, 'the reload that sees the policy');
  const after = await surfaces();
  expect([after.read.status, after.read.body]).toEqual([200, []]);
  expect([after.readB.status, after.readB.body]).toEqual([200, [expect.objectContaining({ note: 'of-b' })]]);
  expect([after.write.status, after.write.body.code]).toEqual([403, '42501']); // B's workspace_id: the policy's WITH CHECK
  expect([after.update.status, after.update.text]).toEqual([204, '']);
  expect([after.remove.status, after.remove.text]).toEqual([204, '']);
  expect([after.embed.status, after.embed.body]).toEqual([200, [{ id: s.a.expenseId, receipts: [] }]]);
  expect([after.rpc.status, after.rpc.body]).toEqual([200, []]);
  expect(after.documents).toEqual(Array(3).fill({ table: true, rpc: true, view: false }));
  // The view still reads every workspace's rows: as its owner, a superuser, whom row-level
  // security does not hold. It is served once it reads as the caller.
  expect([after.view.status, after.view.body.details]).toEqual([
    403,
    expect.stringMatching(/^public\.receipt_notes reads the tenant rows of public\.receipts as its owner/),
  ]);
  await s.db.admin`ALTER VIEW public.receipt_notes SET (security_invoker = on)`;
  await waitFor(
    async () => (await rest('get', '/rest/v1/receipt_notes')).status === 200,
    'the reload that sees the view',
  );
  expect((await rest('get', '/rest/v1/receipt_notes', s.jwtB)).body).toEqual([
    expect.objectContaining({ note: 'of-b' }),
  ]);
  const mine = await rest('post', '/rest/v1/receipts').send({ expense_id: s.a.expenseId, note: 'of-a' });
  expect(mine.status).toBe(201);
  expect(await s.db.admin`SELECT workspace_id, note FROM public.receipts ORDER BY note`).toEqual([
    { workspace_id: s.a.id, note: 'of-a' },
    { workspace_id: s.b.id, note: 'of-b' },
  ]);
  expect(first(await s.db.admin`SELECT count(*)::int AS n FROM public.receipts WHERE note = 'planted'`).n).toBe(0);
});

test("a function that returns a tenant table's rows as a superuser owner (SECURITY DEFINER) is refused until it runs as its caller", async () => {
  // Row-level security does not hold the owner a SECURITY DEFINER function runs as when that
  // owner is a superuser or BYPASSRLS: it returned every workspace's rows to A, as a view owned
  // so does (the test database's owner is a superuser).
  await s.db.admin.begin(async (tx) => {
    await tx`CREATE FUNCTION public.every_expense() RETURNS SETOF public.personal_transactions
               LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp
               AS 'SELECT * FROM public.personal_transactions'`;
    await tx`GRANT EXECUTE ON FUNCTION public.every_expense() TO api_read`;
    await tx`CREATE FUNCTION public.definer_marker() RETURNS int LANGUAGE sql STABLE AS 'SELECT 2'`;
    await tx`GRANT EXECUTE ON FUNCTION public.definer_marker() TO api_read`;
  });
  await waitFor(
    async () => (await rest('get', '/rest/v1/rpc/definer_marker')).status === 200,
    'the reload that sees the function',
  );
  const refused = await rest('get', '/rest/v1/rpc/every_expense?select=workspace_id');
  expect([refused.status, refused.body.code, refused.body.details]).toEqual([
    403,
    'TLY005',
    expect.stringMatching(
      /^public\.every_expense returns the tenant rows of public\.personal_transactions as its owner, whom row-level security does not hold/,
    ),
  ]);
  const openapi = await rest('get', '/rest/v1/').set('accept', 'application/vnd.oai.openapi+json');
  expect(JSON.stringify(openapi.body)).not.toContain('every_expense');

  await s.db.admin`ALTER FUNCTION public.every_expense() SECURITY INVOKER`;
  await waitFor(
    async () => (await rest('get', '/rest/v1/rpc/every_expense?select=workspace_id')).status === 200,
    'the reload that sees it run as its caller',
  );
  const served = await rest('get', '/rest/v1/rpc/every_expense?select=workspace_id');
  expect(served.body.length).toBeGreaterThan(0);
  expect(new Set(served.body.map((r: { workspace_id: string }) => r.workspace_id))).toEqual(new Set([s.a.id]));
});
