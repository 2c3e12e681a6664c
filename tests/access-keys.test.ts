import type { Pool } from '../gateway/engine/pool.js';
import { jest } from '@jest/globals';
import { ApiKeys } from '../gateway/auth/apikey.js';
import { createKey, listKeys, revokeKey } from '../gateway/admin/keys.js';
import { serverPool } from '../gateway/db/connect.js';
import { ApiError, catalogue } from '../gateway/errors.js';
import { newPublishableKey } from '../gateway/secrets.js';
import { createTestDatabase, type TestDatabase, serverUrl } from './harness/db.js';

// Publishable keys: the apikey of /rest/v1, created, listed and revoked as
// `tally key create|list|revoke` do (gateway/admin/keys.ts), checked by the server's pool
// (the authenticator role), with extra keys from TALLY_PUBLISHABLE_KEYS.

describe('publishable keys', () => {
  let db: TestDatabase;
  let pool: Pool;

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = serverPool(serverUrl(db.url), { max: 2 });
  });
  afterAll(async () => {
    await pool.end({ timeout: 5 });
    await db.drop();
  });
  afterEach(() => jest.restoreAllMocks());

  async function refusal(keys: ApiKeys, key: string | undefined): Promise<ApiError> {
    try {
      await keys.check(key);
    } catch (err) {
      expect(err).toBeInstanceOf(ApiError);
      return err as ApiError;
    }
    throw new Error('expected the key to be refused');
  }

  it('accepts a created key and refuses it once revoked (an instance that never cached it at once)', async () => {
    const { id, key } = await createKey(db.admin, 'web', 'test');
    await new ApiKeys(pool, []).check(key);

    await revokeKey(db.admin, id, 'test');
    const err = await refusal(new ApiKeys(pool, []), key);
    expect(err.status).toBe(401);
    expect(err.body()).toEqual({
      code: 'PGRST301',
      message: 'Invalid API key',
      details: null,
      hint: expect.any(String),
    });
    expect(JSON.stringify(err.body())).not.toContain(key);

    const listed = (await listKeys(db.admin)).find((k) => k.id === id);
    expect(listed).toMatchObject({ label: 'web', revoked_at: expect.any(Date) });
  });

  it('an instance that checked a key before its revocation refuses it within 10 seconds', async () => {
    const { id, key } = await createKey(db.admin, 'cached', 'test');
    const keys = new ApiKeys(pool, []);
    await keys.check(key);
    await revokeKey(db.admin, id, 'test');
    await keys.check(key); // the positive cache (KEY_CACHE_MS)
    const now = Date.now();
    jest.spyOn(Date, 'now').mockReturnValue(now + 10_001);
    expect((await refusal(keys, key)).status).toBe(401);
  });

  it('refuses a missing or unknown key', async () => {
    const keys = new ApiKeys(pool, []);
    expect((await refusal(keys, undefined)).body()).toMatchObject({
      code: 'PGRST301',
      message: 'No API key found in request',
    });
    expect((await refusal(keys, '')).status).toBe(401);
    expect((await refusal(keys, newPublishableKey())).body()).toMatchObject({ message: 'Invalid API key' });
  });

  it('refuses a key it was told is unknown for 10 seconds without asking the database again', async () => {
    // A client repeating a wrong key (or a flood of them) was a lookup per request.
    const keys = new ApiKeys(pool, []);
    const key = newPublishableKey();
    expect((await refusal(keys, key)).status).toBe(401);
    // The key is made now: the database would accept it, so a refusal is the process's own answer.
    await db.admin`INSERT INTO public.publishable_keys (key_hash, label) VALUES (sha256(${key}::bytea), 'late')`;
    expect((await refusal(keys, key)).status).toBe(401);
    const now = Date.now();
    jest.spyOn(Date, 'now').mockReturnValue(now + 10_001);
    await keys.check(key);
  });

  it('asks the database about a key only after the caller had its say (an address over its limit)', async () => {
    const keys = new ApiKeys(pool, []);
    const over = catalogue.rateLimited('over the limit', null, 'wait');
    const refuse = () => {
      throw over;
    };
    await expect(keys.check(newPublishableKey(), { poolKey: 'ip:192.0.2.1', beforeLookup: refuse })).rejects.toBe(over);
    // A key it knows needs no lookup, so nothing refuses it.
    const { key } = await createKey(db.admin, 'known', 'test');
    await keys.check(key, { poolKey: 'ip:192.0.2.1' });
    await keys.check(key, { poolKey: 'ip:192.0.2.1', beforeLookup: refuse });
  });

  it('accepts keys from TALLY_PUBLISHABLE_KEYS without a database row', async () => {
    const fromEnv = newPublishableKey();
    const keys = new ApiKeys(pool, [fromEnv]);
    await keys.check(fromEnv);
    const rows = await db.admin`SELECT 1 FROM public.publishable_keys WHERE key_hash = sha256(${fromEnv}::bytea)`;
    expect(rows).toHaveLength(0);
    expect((await refusal(keys, newPublishableKey())).status).toBe(401);
  });

  it('keeps the hashes of at most 1,000 keys, each of at most 128 characters', async () => {
    // Each request's key is hashed once and kept: a client sending a new key each time, or a
    // long one, must not grow the process.
    const keys = new ApiKeys(pool, []);
    const fromEnv = newPublishableKey();
    const configured = new ApiKeys(pool, [fromEnv]);
    await configured.check(fromEnv);
    await configured.check(fromEnv);
    expect(configured.hashedKeys).toBe(1);
    await refusal(keys, 'x'.repeat(129));
    expect(keys.hashedKeys).toBe(0);
    for (let i = 0; i < 1_001; i++) await refusal(keys, `unknown-${i}`);
    expect(keys.hashedKeys).toBe(1_000);
  });

  it('refuses revocation of an unknown or already revoked key', async () => {
    const { id } = await createKey(db.admin, 'twice', 'test');
    await revokeKey(db.admin, id, 'test');
    await expect(revokeKey(db.admin, id, 'test')).rejects.toThrow(/no active key/);
    await expect(revokeKey(db.admin, 'nope', 'test')).rejects.toThrow(/not a key id/);
  });
});
