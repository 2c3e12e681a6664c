import request from 'supertest';
import { asRole, sqlState, type TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import type { WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';

// Idempotency keys: a create sent again with its Idempotency-Key answers what the first
// answered and writes nothing, on every surface; the database decides, so twenty copies sent at
// once make one record; a key is its workspace's, kept 24 hours, and no API role can read or
// write the keys' records.

let db: TestDatabase, t: TestApp, a: WorkspaceFixture, b: WorkspaceFixture, jwtA: string, jwtB: string;
let readA: string;

beforeAll(async () => {
  ({ db, t, a, b, jwtA, jwtB, readA } = await setUpFinance(restEnv(), ['Idem A', 'Idem B']));
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
    const [swept] = await db.admin<{ n: string }[]>`SELECT tally.prune_idempotency_keys()::text AS n`;
    expect(Number(swept!.n)).toBeGreaterThanOrEqual(1);
    expect(await keyRecords(old)).toBe(0);
    expect(await keyRecords(key)).toBe(1); // a live key stays
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

  it('a read token with a key is refused as a read-only write, and keeps no key', async () => {
    const key = newKey();
    const res = await restPost('personal_transactions', expense('Read keyed'), key, readA);
    expect([401, 403]).toContain(res.status);
    expect(await keyRecords(key)).toBe(0);
  });
});

describe('the keys’ records', () => {
  it('are neither readable nor writable by an API role, nor reachable through /rest/v1', async () => {
    const key = newKey();
    await restPost('personal_transactions', expense('Hidden key'), key).expect(201);
    for (const role of ['api_read', 'api_write']) {
      expect(
        await sqlState(
          asRole(db.admin, role, { workspace_id: a.id }, (tx) => tx`SELECT * FROM tally.idempotency_keys`),
        ),
      ).toBe('42501');
      expect(
        await sqlState(
          asRole(
            db.admin,
            role,
            { workspace_id: a.id },
            (tx) =>
              tx`INSERT INTO tally.idempotency_keys (workspace_id, key, fingerprint) VALUES (${a.id}, 'forged', 'x')`,
          ),
        ),
      ).toBe('42501');
    }
    const res = await request(t.app)
      .get('/rest/v1/idempotency_keys')
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwtA}` });
    expect(res.status).toBe(404);
    // Forced RLS: even a grant would show no row to an API role.
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
