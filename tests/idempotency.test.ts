import request from 'supertest';
import { asRole, sqlState, type TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import type { WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';
import { waitFor } from './harness/wait.js';
import { dataText, toolCaller } from './harness/mcp-tools.js';
import { keepActivity } from '../gateway/activity.js';

// Idempotency keys: a create sent again with its Idempotency-Key answers what the first
// answered and writes nothing, on every surface; the database decides, so twenty copies sent at
// once make one record; a key is its workspace's, kept 24 hours, and no API role can read or
// write the keys' records.

let db: TestDatabase, t: TestApp, a: WorkspaceFixture, b: WorkspaceFixture, jwtA: string, jwtB: string;
let readA: string, tokenA: string;

// Twenty copies at once queue behind their workspace's share of the pool (2 of 4 slots), and the
// last waits for the eighteen before it: the burst took 2.9 s on a loaded machine, against the
// default 3 s deadline past which a wait is a 429 (slower on Citus). The key is what is proven
// here, not the deadline (limits-tenant-share.test.ts proves that).
const QUEUE_DEADLINE = { TALLY_DB_POOL_ACQUISITION_TIMEOUT_MS: '60000' };

beforeAll(async () => {
  ({ db, t, a, b, jwtA, jwtB, readA, tokenA } = await setUpFinance(restEnv(QUEUE_DEADLINE), ['Idem A', 'Idem B']));
});
afterAll(() => tearDown(db, t));

let n = 0;
/** A key no other test uses. */
const newKey = () => `key-${process.pid}-${++n}-${Date.now()}`;

const expense = (name: string, amount = 10) => ({ name, amount, category_id: 'other', method_id: 'cash' });

/** POST /rest/v1/{path} as A (or `jwt`), with the key when given. */
const restPost = (path: string, body: unknown, key?: string, jwt = jwtA, prefer = 'return=representation') => {
  const headers: Record<string, string> = { apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}`, Prefer: prefer };
  if (key !== undefined) headers['Idempotency-Key'] = key;
  return request(t.app)
    .post(`/rest/v1/${path}`)
    .set(headers)
    .send(body as object);
};

/** How many expenses of the workspace carry this name, as the database holds them. */
const expensesNamed = async (name: string, ws = a.id) =>
  Number(
    (
      await db.admin<{ n: string }[]>`
      SELECT count(*) AS n FROM public.personal_transactions WHERE workspace_id = ${ws} AND name = ${name}`
    )[0]!.n,
  );

/** How many key records the database holds for this key. */
const keyRecords = async (key: string) =>
  Number((await db.admin<{ n: string }[]>`SELECT count(*) AS n FROM tally.idempotency_keys WHERE key = ${key}`)[0]!.n);

/** The parts of a response a repeat must answer the same. */
const answer = (res: request.Response) => ({
  status: res.status,
  body: res.text,
  location: res.headers.location,
  contentRange: res.headers['content-range'],
  contentType: res.headers['content-type'],
  applied: res.headers['preference-applied'],
});

describe('/rest/v1: a repeated POST with its key', () => {
  it('answers what the first answered, ids and Location included, and writes nothing', async () => {
    const key = newKey();
    const first = await restPost('personal_transactions', expense('Keyed taxi', 23), key).expect(201);
    const again = await restPost('personal_transactions', expense('Keyed taxi', 23), key).expect(201);
    expect(answer(again)).toEqual(answer(first));
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    expect(await expensesNamed('Keyed taxi')).toBe(1);
    const id = first.body[0].id as string;
    // One change in the activity log: the repeat ran nothing.
    const log =
      await db.admin`SELECT 1 FROM public.activity WHERE table_name = 'personal_transactions' AND record_id = ${id}`;
    expect(log.length).toBe(1);
    expect(await keyRecords(key)).toBe(1);
  });

  it('keeps the Location of a return=headers-only create', async () => {
    const key = newKey();
    const first = await restPost('contacts', { name: 'Keyed contact' }, key, jwtA, 'return=headers-only').expect(201);
    expect(first.headers.location).toMatch(/^\/contacts\?workspace_id=eq\.[^&]+&id=eq\./);
    const again = await restPost('contacts', { name: 'Keyed contact' }, key, jwtA, 'return=headers-only').expect(201);
    expect(answer(again)).toEqual(answer(first));
    const rows = await db.admin`SELECT 1 FROM public.contacts WHERE workspace_id = ${a.id} AND name = 'Keyed contact'`;
    expect(rows.length).toBe(1);
  });

  it('without a key, a repeat is a second record (as before)', async () => {
    await restPost('personal_transactions', expense('Unkeyed taxi')).expect(201);
    await restPost('personal_transactions', expense('Unkeyed taxi')).expect(201);
    expect(await expensesNamed('Unkeyed taxi')).toBe(2);
  });

  it('a different request with the key is a 422 that says so, and writes nothing', async () => {
    const key = newKey();
    await restPost('personal_transactions', expense('Keyed lunch', 12), key).expect(201);
    const other = await restPost('personal_transactions', expense('Keyed lunch', 13), key).expect(422);
    expect(other.body).toMatchObject({
      code: 'TLY021',
      message: 'This Idempotency-Key was used with a different request',
    });
    expect(Object.keys(other.body).sort()).toEqual(['code', 'details', 'hint', 'message']);
    // Another table with the key is another request too.
    await restPost('contacts', { name: 'Keyed lunch' }, key).expect(422);
    expect(await expensesNamed('Keyed lunch')).toBe(1);
    const contacts = await db.admin`SELECT 1 FROM public.contacts WHERE name = 'Keyed lunch'`;
    expect(contacts.length).toBe(0);
  });

  it.each([
    ['empty', ''],
    ['longer than 255 characters', 'k'.repeat(256)],
    ['with a space', 'two words'],
    ['with a character beyond ASCII', 'caf\u00e9'],
  ])('a key %s is a 400 in the one error shape, and nothing is written', async (_what, key) => {
    const res = await restPost('personal_transactions', expense(`Bad key ${key.length}`), key).expect(400);
    expect(res.body).toMatchObject({ code: 'TLY020', message: 'Invalid Idempotency-Key header' });
    expect(await expensesNamed(`Bad key ${key.length}`)).toBe(0);
  });

  it('a key of 255 visible characters is taken', async () => {
    const key = '!'.repeat(200) + newKey().slice(0, 55).padEnd(55, '~');
    expect(key.length).toBe(255);
    await restPost('personal_transactions', expense('Long key'), key).expect(201);
    await restPost('personal_transactions', expense('Long key'), key).expect(201);
    expect(await expensesNamed('Long key')).toBe(1);
  });

  it('twenty identical requests sent at once make one record, and all twenty answer it', async () => {
    const key = newKey();
    const responses = await Promise.all(
      Array.from({ length: 20 }, () => restPost('personal_transactions', expense('Concurrent keyed', 7), key)),
    );
    expect(responses.map((r) => r.status)).toEqual(Array(20).fill(201));
    expect(new Set(responses.map((r) => r.body[0].id)).size).toBe(1);
    expect(responses.filter((r) => r.headers['idempotent-replayed'] === 'true').length).toBe(19);
    expect(await expensesNamed('Concurrent keyed')).toBe(1);
    expect(await keyRecords(key)).toBe(1);
  });

  it('a key is its workspace’s: the same key in A and in B makes two records', async () => {
    const key = newKey();
    const inA = await restPost('personal_transactions', expense('Shared key'), key, jwtA).expect(201);
    const inB = await restPost('personal_transactions', expense('Shared key'), key, jwtB).expect(201);
    expect(inB.headers['idempotent-replayed']).toBeUndefined();
    expect(inB.body[0].id).not.toBe(inA.body[0].id);
    expect(await expensesNamed('Shared key', a.id)).toBe(1);
    expect(await expensesNamed('Shared key', b.id)).toBe(1);
    // Each workspace's record of the key answers its own: a different request in B is B's 422.
    await restPost('personal_transactions', expense('Other in B'), key, jwtB).expect(422);
    expect(await keyRecords(key)).toBe(2);
  });

  it('a key expires after 24 hours: then it is a new request, and the sweep deletes the old record', async () => {
    const key = newKey();
    await restPost('personal_transactions', expense('Expiring key'), key).expect(201);
    await db.admin`UPDATE tally.idempotency_keys SET created_at = now() - interval '25 hours' WHERE key = ${key}`;
    const later = await restPost('personal_transactions', expense('Expiring key'), key).expect(201);
    expect(later.headers['idempotent-replayed']).toBeUndefined();
    expect(await expensesNamed('Expiring key')).toBe(2);
    expect(await keyRecords(key)).toBe(1);

    const old = newKey();
    await restPost('personal_transactions', expense('Swept key'), old).expect(201);
    await db.admin`UPDATE tally.idempotency_keys SET created_at = now() - interval '25 hours' WHERE key = ${old}`;
    // The server's hourly sweep (with the activity log's) deletes it; a live key stays.
    const stop = keepActivity(t.ctx.db, t.ctx.config);
    try {
      await waitFor(async () => (await keyRecords(old)) === 0, 'the expired key to be swept');
    } finally {
      stop();
    }
    expect(await keyRecords(key)).toBe(1);
  });

  it('a failed create keeps no key: its retry runs', async () => {
    const key = newKey();
    const bad = { ...expense('Failing keyed'), category_id: 'no-such-category' };
    const failed = await restPost('personal_transactions', bad, key);
    expect(failed.status).toBeGreaterThanOrEqual(400);
    expect(await keyRecords(key)).toBe(0);
    await restPost('personal_transactions', expense('Failing keyed'), key).expect(201);
    expect(await expensesNamed('Failing keyed')).toBe(1);
  });

  it('a function called over /rpc with its key runs once: undo_change repeated undoes once', async () => {
    const created = await restPost('personal_transactions', expense('Undo keyed')).expect(201);
    const id = created.body[0].id as string;
    const [change] = await db.admin<{ id: string }[]>`
      SELECT id FROM public.activity WHERE table_name = 'personal_transactions' AND record_id = ${id}`;
    const key = newKey();
    const first = await restPost('rpc/undo_change', { activity_id: change!.id }, key).expect(200);
    const again = await restPost('rpc/undo_change', { activity_id: change!.id }, key).expect(200);
    expect(answer(again)).toEqual(answer(first));
    expect(again.headers['idempotent-replayed']).toBe('true');
    const undos = await db.admin`SELECT 1 FROM public.activity WHERE undo_of = ${change!.id}`;
    expect(undos.length).toBe(1);
    // Without the key the second undo is refused: the record is gone.
    await restPost('rpc/undo_change', { activity_id: change!.id }).expect(409);
  });

  it('keeps no answer larger than TALLY_IDEMPOTENCY_MAX_ANSWER_BYTES (1 MiB): a 14.9 MB answer is refused, nothing written or stored', async () => {
    // A fund with 478 transactions, and a create of one more that embeds the fund's ledger 95
    // times: a body of about a hundred bytes whose answer is 14.9 MB (it was stored whole).
    const fund = (await restPost('funds', { name: 'Wide ledger' }).expect(201)).body[0].id as string;
    await db.admin`INSERT INTO public.fund_transactions (workspace_id, fund_id, name, amount, category_id, method_id)
      SELECT ${a.id}, ${fund}, 'Ledger line ' || g, 10 + g, 'other', 'cash' FROM generate_series(1, 478) g`;
    const select = `*,funds(${Array.from({ length: 95 }, (_, i) => `t${i}:fund_transactions(*)`).join(',')})`;
    const line = { fund_id: fund, name: 'Wide answer', amount: 1, category_id: 'other', method_id: 'cash' };
    const wide = await restPost(`fund_transactions?select=${encodeURIComponent(select)}`, line, 'wide-answer').expect(
      400,
    );
    expect(wide.body).toMatchObject({
      code: 'TLY022',
      message: expect.stringMatching(
        /^The answer of this request is too large to keep for its Idempotency-Key: 14\d{6} bytes$/,
      ),
      hint: 'Ask for a smaller answer (Prefer: return=minimal, or fewer columns and embeds in select), or send the request without Idempotency-Key',
    });
    expect(await keyRecords('wide-answer')).toBe(0);
    expect(
      await db.admin`SELECT 1 FROM public.fund_transactions WHERE fund_id = ${fund} AND name = 'Wide answer'`,
    ).toHaveLength(0);
    // The same create, answered with its record alone, is kept: what a retry needs.
    await restPost('fund_transactions', line, 'wide-answer').expect(201);
    const [kept] = await db.admin<
      { bytes: number }[]
    >`SELECT bytes FROM tally.idempotency_keys WHERE key = 'wide-answer'`;
    expect(kept!.bytes).toBeLessThan(1000);
  });

  it('a read token with a key is refused as a read-only write, and keeps no key', async () => {
    const key = newKey();
    const res = await restPost('personal_transactions', expense('Read keyed'), key, readA);
    expect([401, 403]).toContain(res.status);
    expect(await keyRecords(key)).toBe(0);
  });
});

describe('the keys’ records', () => {
  it('are reachable through no surface, and by the write role of a workspace only for its own keys', async () => {
    const keyA = newKey();
    const keyB = newKey();
    await restPost('personal_transactions', expense('Hidden key A'), keyA, jwtA).expect(201);
    await restPost('personal_transactions', expense('Hidden key B'), keyB, jwtB).expect(201);
    for (const path of ['idempotency_keys', 'tally.idempotency_keys']) {
      const res = await request(t.app)
        .get(`/rest/v1/${path}`)
        .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwtA}` });
      expect([path, res.status]).toEqual([path, 404]);
    }
    const asA = <T>(role: string, q: Parameters<typeof asRole<T>>[3]) =>
      asRole<T>(db.admin, role, { workspace_id: a.id }, q);
    // A read token's role has no privilege at all.
    expect(await sqlState(asA('api_read', (tx) => tx`SELECT key FROM tally.idempotency_keys`))).toBe('42501');
    // The write role sees A's keys only, cannot plant one in B, nor delete any.
    const seen = await asA('api_write', (tx) => tx`SELECT key, workspace_id FROM tally.idempotency_keys`);
    expect(seen.map((r) => r.key)).toContain(keyA);
    expect(seen.map((r) => r.key)).not.toContain(keyB);
    expect(new Set(seen.map((r) => r.workspace_id))).toEqual(new Set([a.id]));
    const planted = asA(
      'api_write',
      (tx) => tx`INSERT INTO tally.idempotency_keys (workspace_id, key, fingerprint) VALUES (${b.id}, 'forged', 'x')`,
    );
    expect(await sqlState(planted)).toBe('42501');
    expect(await sqlState(asA('api_write', (tx) => tx`DELETE FROM tally.idempotency_keys WHERE key = ${keyA}`))).toBe(
      '42501',
    );
    const taken = asA(
      'api_write',
      (tx) => tx`UPDATE tally.idempotency_keys SET body = 'forged' WHERE key = ${keyB} RETURNING key`,
    );
    expect(await taken).toEqual([]);
    const forced = await db.admin<{ forced: boolean }[]>`
      SELECT relforcerowsecurity AS forced FROM pg_class WHERE oid = 'tally.idempotency_keys'::regclass`;
    expect(forced[0]!.forced).toBe(true);
  });

  it('the claim of another workspace’s key through the function claims it for the caller’s own workspace', async () => {
    const key = newKey();
    await restPost('personal_transactions', expense('B owns this key'), key, jwtB).expect(201);
    // As A, the very same key is free: the function takes the workspace from A's claims.
    const rows = await asRole(
      db.admin,
      'api_write',
      { workspace_id: a.id },
      (tx) => tx`SELECT claimed FROM tally.idempotency_claim(${key}, 'anything')`,
    );
    expect(rows[0]!.claimed).toBe(true);
    const kept = await db.admin`SELECT workspace_id FROM tally.idempotency_keys WHERE key = ${key}`;
    expect(kept.map((r) => r.workspace_id)).toEqual([b.id]); // asRole rolled back A's claim
  });
});

/** POST /api/v1/{path} as A (or `jwt`), with the key when given. */
const apiPost = (path: string, body: unknown, key?: string, jwt = jwtA) => {
  const headers: Record<string, string> = { Authorization: `Bearer ${jwt}` };
  if (key !== undefined) headers['Idempotency-Key'] = key;
  return request(t.app)
    .post(`/api/v1/${path}`)
    .set(headers)
    .send(body as object);
};

describe('/api/v1: a repeated POST with its key', () => {
  it('answers what the first answered (status, body, Location) and writes nothing', async () => {
    const key = newKey();
    const first = await apiPost('personal_transactions', expense('Wrapper keyed', 31), key).expect(201);
    const again = await apiPost('personal_transactions', expense('Wrapper keyed', 31), key).expect(201);
    expect(answer(again)).toEqual(answer(first));
    expect(first.headers.location).toBe(`/api/v1/personal_transactions/${first.body.id}`);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(await expensesNamed('Wrapper keyed')).toBe(1);
  });

  it('on every create of the wrapper: contacts and fund transactions too', async () => {
    const key = newKey();
    const contact = await apiPost('contacts', { name: 'Wrapper keyed contact' }, key).expect(201);
    expect((await apiPost('contacts', { name: 'Wrapper keyed contact' }, key).expect(201)).body).toEqual(contact.body);
    const tx = { fund_id: a.fundId, name: 'Wrapper keyed payout', amount: -5, category_id: 'other', method_id: 'cash' };
    const txKey = newKey();
    const first = await apiPost('fund_transactions', tx, txKey).expect(201);
    expect((await apiPost('fund_transactions', tx, txKey).expect(201)).body).toEqual(first.body);
    expect((await db.admin`SELECT 1 FROM public.contacts WHERE name = 'Wrapper keyed contact'`).length).toBe(1);
    expect((await db.admin`SELECT 1 FROM public.fund_transactions WHERE name = 'Wrapper keyed payout'`).length).toBe(1);
  });

  it('twenty at once make one record', async () => {
    const key = newKey();
    const responses = await Promise.all(
      Array.from({ length: 20 }, () => apiPost('personal_transactions', expense('Wrapper concurrent', 8), key)),
    );
    expect(responses.map((r) => r.status)).toEqual(Array(20).fill(201));
    expect(new Set(responses.map((r) => r.body.id)).size).toBe(1);
    expect(await expensesNamed('Wrapper concurrent')).toBe(1);
  });

  it('a different request with the key is a 422, a bad key a 400, both in the one error shape', async () => {
    const key = newKey();
    await apiPost('personal_transactions', expense('Wrapper 422', 1), key).expect(201);
    const other = await apiPost('personal_transactions', expense('Wrapper 422', 2), key).expect(422);
    expect(other.body).toMatchObject({ code: 'TLY021' });
    expect(await expensesNamed('Wrapper 422')).toBe(1);
    const bad = await apiPost('personal_transactions', expense('Wrapper 400'), 'no spaces please').expect(400);
    expect(bad.body).toMatchObject({ code: 'TLY020', message: 'Invalid Idempotency-Key header' });
    expect(Object.keys(bad.body).sort()).toEqual(['code', 'details', 'hint', 'message']);
    expect(await expensesNamed('Wrapper 400')).toBe(0);
  });

  it('the same key in workspaces A and B makes a record in each', async () => {
    const key = newKey();
    const inA = await apiPost('personal_transactions', expense('Wrapper shared'), key, jwtA).expect(201);
    const inB = await apiPost('personal_transactions', expense('Wrapper shared'), key, jwtB).expect(201);
    expect(inB.body.id).not.toBe(inA.body.id);
    expect(await expensesNamed('Wrapper shared', a.id)).toBe(1);
    expect(await expensesNamed('Wrapper shared', b.id)).toBe(1);
  });
});

/** One MCP tools/call with workspace A's write token; its result. */
const callTool = toolCaller(
  () => t.app,
  () => tokenA,
);

describe('MCP: a create tool called again with its idempotency_key', () => {
  const CREATES = [
    'create_expense',
    'create_expenses',
    'create_fund',
    'create_fund_transaction',
    'create_contact',
    'add_fund_participant',
  ];

  it('is offered on every create tool, which says so and is not hinted idempotent, and on no other tool', async () => {
    const res = await request(t.app)
      .post(`/mcp?token=${tokenA}`)
      .set({ Accept: 'application/json, text/event-stream', 'Content-Type': 'application/json' })
      .send({ jsonrpc: '2.0', id: 1, method: 'tools/list' })
      .expect(200);
    const tools = res.body.result.tools as {
      name: string;
      inputSchema: { properties: Record<string, { pattern?: string; maxLength?: number }>; required?: string[] };
      description: string;
      annotations: { idempotentHint?: boolean };
    }[];
    const keyed = tools.filter((tl) => 'idempotency_key' in tl.inputSchema.properties).map((tl) => tl.name);
    expect(keyed.sort()).toEqual([...CREATES].sort());
    for (const tl of tools.filter((x) => CREATES.includes(x.name))) {
      // A host may repeat an idempotent tool on its own: a repeat without the key records again.
      // A contact takes part in a fund once, so add_fund_participant's repeat is refused instead.
      expect([tl.name, tl.annotations.idempotentHint ?? false]).toEqual([tl.name, tl.name === 'add_fund_participant']);
      expect(tl.description).toContain('A repeat records again unless it passes the same idempotency_key');
      expect(tl.inputSchema.properties.idempotency_key).toMatchObject({ maxLength: 255, pattern: '^[!-~]+$' });
      expect(tl.inputSchema.required ?? []).not.toContain('idempotency_key');
    }
  });

  it('answers the first call’s records and writes nothing, for each create tool', async () => {
    const contact = (await callTool('create_contact', { name: 'MCP participant' })).structuredContent.contact as {
      id: string;
    };
    const calls: [string, Record<string, unknown>, () => Promise<number>][] = [
      ['create_expense', expense('MCP keyed'), () => expensesNamed('MCP keyed')],
      [
        'create_expenses',
        { expenses: [expense('MCP batch keyed'), expense('MCP batch keyed', 2)] },
        () => expensesNamed('MCP batch keyed'),
      ],
      ['create_fund', { name: 'MCP keyed fund' }, () => countWhere('funds', 'name', 'MCP keyed fund')],
      [
        'create_fund_transaction',
        { fund_id: a.fundId, name: 'MCP keyed income', amount: 40, category_id: 'fund-income', method_id: 'cash' },
        () => countWhere('fund_transactions', 'name', 'MCP keyed income'),
      ],
      ['create_contact', { name: 'MCP keyed contact' }, () => countWhere('contacts', 'name', 'MCP keyed contact')],
      [
        'add_fund_participant',
        { fund_id: a.fundId, contact_id: contact.id },
        () => countWhere('fund_participants', 'contact_id', contact.id),
      ],
    ];
    expect(calls.map(([name]) => name)).toEqual(CREATES);
    for (const [name, args, count] of calls) {
      const key = newKey();
      const first = await callTool(name, { ...args, idempotency_key: key });
      const again = await callTool(name, { ...args, idempotency_key: key });
      expect([name, first.isError, again.isError]).toEqual([name, undefined, undefined]);
      // The replay says it is one, in the text an agent reads and in the structured result.
      expect(again.structuredContent).toEqual({ ...first.structuredContent, replayed: true });
      expect(dataText(first.content[0]!.text)).not.toMatch(/Replayed/);
      expect(dataText(again.content[0]!.text)).toMatch(
        /^Replayed: this idempotency_key was used before, so nothing was written now/,
      );
      expect([name, await count()]).toEqual([name, name === 'create_expenses' ? 2 : 1]);
    }
  });

  it('twenty calls at once make one record', async () => {
    const key = newKey();
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        callTool('create_expense', { ...expense('MCP concurrent'), idempotency_key: key }),
      ),
    );
    expect(results.filter((r) => r.isError)).toEqual([]);
    expect(new Set(results.map((r) => (r.structuredContent.expense as { id: string }).id)).size).toBe(1);
    expect(await expensesNamed('MCP concurrent')).toBe(1);
  });

  it('with other arguments is a tool error that says so; a bad key is refused before anything runs', async () => {
    const key = newKey();
    await callTool('create_expense', { ...expense('MCP 422', 1), idempotency_key: key });
    const other = await callTool('create_expense', { ...expense('MCP 422', 2), idempotency_key: key });
    expect(other.isError).toBe(true);
    expect(other.content[0]!.text).toMatch(/^This Idempotency-Key was used with a different request/);
    expect(await expensesNamed('MCP 422')).toBe(1);
    const bad = await callTool('create_expense', { ...expense('MCP bad key'), idempotency_key: 'with space' });
    expect(bad.isError).toBe(true);
    expect(bad.content[0]!.text).toMatch(/idempotency_key/);
    expect(await expensesNamed('MCP bad key')).toBe(0);
  });
});

describe('the OpenAPI documents', () => {
  it('/api/v1 documents the Idempotency-Key header on each POST', async () => {
    const doc = (await request(t.app).get('/api/v1/openapi.json').expect(200)).body as {
      paths: Record<string, Record<string, { parameters?: { name: string; in: string }[] }>>;
    };
    const posts = Object.entries(doc.paths).filter(([path, ops]) => ops.post && path !== '/token');
    expect(posts.length).toBeGreaterThanOrEqual(3);
    for (const [path, ops] of posts)
      expect([path, ops.post!.parameters?.some((p) => p.name === 'Idempotency-Key' && p.in === 'header')]).toEqual([
        path,
        true,
      ]);
  });

  it('/rest/v1 (OpenAPI 3.1) documents it on each POST, of tables and of functions', async () => {
    const doc = (
      await request(t.app)
        .get('/rest/v1/')
        .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwtA}`, Accept: 'application/vnd.oai.openapi+json' })
        .expect(200)
    ).body as { paths: Record<string, Record<string, { parameters?: { name: string; in: string }[] }>> };
    const posts = Object.entries(doc.paths).filter(([, ops]) => ops.post);
    expect(posts.map(([p]) => p)).toEqual(expect.arrayContaining(['/personal_transactions', '/rpc/undo_change']));
    for (const [path, ops] of posts)
      expect([path, ops.post!.parameters?.some((p) => p.name === 'Idempotency-Key' && p.in === 'header')]).toEqual([
        path,
        true,
      ]);
  });
});

/** Rows of A's `table` whose `column` is `value`. */
const countWhere = async (table: string, column: string, value: string) =>
  Number(
    (
      await db.admin<{ n: string }[]>`
      SELECT count(*) AS n FROM ${db.admin('public')}.${db.admin(table)}
       WHERE workspace_id = ${a.id} AND ${db.admin(column)}::text = ${value}`
    )[0]!.n,
  );
