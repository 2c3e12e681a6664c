import request from 'supertest';
import type { App } from '../gateway/server.js';
import { serverPool } from '../gateway/db/connect.js';
import { jest } from '@jest/globals';
import { FAILED_AUTH_LIMIT_PER_MINUTE, PostgresRateLimitStore, WINDOW_MS } from '../gateway/auth/ratelimit.js';
import { newWorkspaceToken } from '../gateway/secrets.js';
import { startTestApp, type TestApp } from './harness/app.js';
import { createTestDatabase, type TestDatabase, serverUrl } from './harness/db.js';
import { tokenFor, workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { first, present } from './harness/present.js';
import { waitFor } from './harness/wait.js';

// Rate limits: per workspace token across surfaces and instances, per
// address without a token, stricter per address for failed authentications; counters in
// Postgres.

describe('rate limits', () => {
  let db: TestDatabase;
  let ws: WorkspaceFixture;
  const apps: TestApp[] = [];
  const start = (env: Record<string, string> = {}): TestApp => {
    const t = startTestApp(db.url, env);
    apps.push(t);
    return t;
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    ws = await workspaceWithData(db.admin);
  });
  afterAll(async () => {
    await Promise.all(apps.map((t) => t.close()));
    await db.drop();
  });
  beforeEach(() => db.admin`DELETE FROM tally.rate_limits`);

  const exchange = (app: App, token: string) => request(app).post('/api/v1/token').set('x-api-token', token);
  // /rest/v1 checks the apikey, then the JWT, inside limitAfter: a request counts once, against
  // its workspace token when both pass, against the client address otherwise.
  const restRead = (app: App, jwt?: string) => {
    const req = request(app).get('/rest/v1/personal_transactions?select=id').set('apikey', TEST_API_KEY);
    return jwt === undefined ? req : req.set('Authorization', `Bearer ${jwt}`);
  };
  const restWrite = (app: App, jwt: string) =>
    request(app)
      .post('/rest/v1/personal_transactions')
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}`, Prefer: 'return=minimal' })
      .send({ name: 'rate-limited write', amount: 1, category_id: 'other', method_id: 'cash' });

  // The exchange also reports its failed-authentication policy: draft-8 headers are lists of
  // policies, so pick the request limit's item.
  const item = (header: string | undefined, name: string): string | undefined =>
    header?.split(/,\s*(?=")/).find((p) => p.startsWith(`"${name}"`));

  function expect429(res: request.Response, limit: number) {
    expect(res.status).toBe(429);
    const retryAfter = Number(res.headers['retry-after']);
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(item(res.headers['ratelimit-policy'], `${limit}-in-1min`)).toMatch(
      new RegExp(`^"${limit}-in-1min"; q=${limit}; w=60; pk=:[A-Za-z0-9+/=]+:$`),
    );
    expect(item(res.headers['ratelimit'], `${limit}-in-1min`)).toMatch(new RegExp(`^"${limit}-in-1min"; r=0; t=\\d+$`));
    expect(res.body).toEqual({
      code: 'PT429',
      message: expect.stringContaining('Rate limit exceeded'),
      details: null,
      hint: expect.stringContaining('Retry-After'),
    });
  }

  it('by default allows 60 exchanges a minute per token and answers the 61st with 429', async () => {
    const t = start();
    expect(t.ctx.config.rateLimitPerMinute).toBe(60);
    const { token } = await tokenFor(db.admin, ws.id, 'read');
    for (let i = 1; i <= 60; i++) {
      const res = await exchange(t.app, token);
      expect(res.status).toBe(200);
      expect(item(res.headers['ratelimit'], '60-in-1min')).toMatch(new RegExp(`^"60-in-1min"; r=${60 - i}; t=\\d+$`));
      expect(item(res.headers['ratelimit-policy'], '60-in-1min')).toMatch(/^"60-in-1min"; q=60; w=60; pk=:/);
    }
    const res = await exchange(t.app, token);
    expect429(res, 60);
    expect(JSON.stringify(res.body)).not.toContain(token);
    expect(res.headers['x-ratelimit-limit']).toBeUndefined(); // standard headers only
  });

  it('counts one token across two instances and across surfaces (exchange and JWT requests)', async () => {
    const a = start(restEnv({ TALLY_RATE_LIMIT_PER_MINUTE: '5' }));
    const b = start(restEnv({ TALLY_RATE_LIMIT_PER_MINUTE: '5' }));
    const { token } = await tokenFor(db.admin, ws.id, 'write');
    const jwt = (await exchange(a.app, token).expect(200)).body.access_token as string; // 1
    await exchange(b.app, token).expect(200); // 2
    await restRead(a.app, jwt).expect(200); // 3
    await restRead(b.app, jwt).expect(200); // 4
    await restWrite(b.app, jwt).expect(201); // 5
    expect429(await restRead(a.app, jwt), 5);
    expect429(await exchange(b.app, token), 5);
    expect429(await exchange(a.app, token), 5);

    // Another token of the same workspace and address has its own budget.
    const second = await tokenFor(db.admin, ws.id, 'write');
    await exchange(a.app, second.token).expect(200);
  });

  it('limits requests without a token per client address', async () => {
    const t = start(restEnv({ TALLY_RATE_LIMIT_PER_MINUTE: '3' }));
    // anon has no grant on the table (401), but each request is counted before any database work
    for (let i = 0; i < 3; i++) {
      const res = await restRead(t.app);
      expect([res.status, res.body.code]).toEqual([401, '42501']);
    }
    expect429(await restRead(t.app), 3);
    const rows = await db.admin<{ key: string }[]>`SELECT key FROM tally.rate_limits`;
    expect(rows.map((r) => r.key)).toEqual([expect.stringMatching(/^req:ip:/)]);
  });

  it('counts requests with a bad JWT against the client address, and still answers 401 until the limit', async () => {
    const t = start(restEnv({ TALLY_RATE_LIMIT_PER_MINUTE: '3' }));
    for (let i = 0; i < 3; i++) {
      const res = await restRead(t.app, 'not.a.jwt');
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('PGRST301');
    }
    expect429(await restRead(t.app, 'not.a.jwt'), 3);
    expect429(await restRead(t.app), 3); // the same address, now without a JWT
    // A valid token from the same address has its own budget.
    const { token } = await tokenFor(db.admin, ws.id, 'read');
    const jwt = (await exchange(t.app, token).expect(200)).body.access_token as string;
    // ... but only once the apikey passes: without it the JWT is not looked at, and the
    // request is the address's.
    expect429(
      await request(t.app).get('/rest/v1/personal_transactions?select=id').set('Authorization', `Bearer ${jwt}`),
      3,
    );
    await restRead(t.app, jwt).expect(200);
  });

  it('starts a new window once the old one has ended', async () => {
    const t = start({ TALLY_RATE_LIMIT_PER_MINUTE: '2' });
    const { token, id } = await tokenFor(db.admin, ws.id, 'read');
    await exchange(t.app, token).expect(200);
    await exchange(t.app, token).expect(200);
    await exchange(t.app, token).expect(429);
    // A minute later, for the database and for the process, which refuses a window it knows is
    // used up without asking the database again until the window ends.
    await db.admin`UPDATE tally.rate_limits SET reset_at = now() - interval '1 second' WHERE key = ${'req:token:' + id}`;
    await exchange(t.app, token).expect(429);
    const now = Date.now();
    jest.spyOn(Date, 'now').mockReturnValue(now + WINDOW_MS + 1000);
    await exchange(t.app, token).expect(200);
    jest.restoreAllMocks();
    const row = first(
      await db.admin<{ hits: number }[]>`SELECT hits FROM tally.rate_limits WHERE key = ${'req:token:' + id}`,
    );
    expect(row.hits).toBe(1);
  });

  describe('failed authentications', () => {
    it(`answers 429 per address after ${FAILED_AUTH_LIMIT_PER_MINUTE} failures a minute, even for a valid token`, async () => {
      const t = start();
      const { token } = await tokenFor(db.admin, ws.id, 'read');
      for (let i = 0; i < FAILED_AUTH_LIMIT_PER_MINUTE; i++) {
        await exchange(t.app, newWorkspaceToken()).expect(401);
      }
      const blocked = await exchange(t.app, newWorkspaceToken());
      expect(blocked.status).toBe(429);
      expect(Number(blocked.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(item(blocked.headers['ratelimit-policy'], 'failed-auth')).toBe('"failed-auth"; q=10; w=60');
      expect(item(blocked.headers['ratelimit'], 'failed-auth')).toMatch(/^"failed-auth"; r=0; t=\d+$/);
      expect(blocked.body).toEqual({
        code: 'PT429',
        message: 'Too many failed authentications from this address',
        details: null,
        hint: expect.any(String),
      });
      // The guess is not even looked at: a right token from this address waits as well.
      await exchange(t.app, token).expect(429);
      await request(t.app).post('/functions/v1/api-token').send({ token }).expect(429);
    });

    it('holds exactly under concurrency: of 60 parallel bad tokens from one address, 10 are looked at', async () => {
      const [a, b] = [start(), start()]; // two instances, one database
      const statuses = await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          exchange(i % 2 ? a.app : b.app, newWorkspaceToken()).then((r) => r.status),
        ),
      );
      expect(statuses.filter((s) => s === 401)).toHaveLength(FAILED_AUTH_LIMIT_PER_MINUTE);
      expect(statuses.filter((s) => s === 429)).toHaveLength(60 - FAILED_AUTH_LIMIT_PER_MINUTE);
      expect(await db.admin`SELECT hits FROM tally.rate_limits WHERE key LIKE 'authfail:%'`).toEqual([
        { hits: FAILED_AUTH_LIMIT_PER_MINUTE },
      ]);
      // MCP shares the count: the address is refused there too.
      expect(
        (await request(a.app).post('/mcp').set('Authorization', `Bearer ${newWorkspaceToken()}`).send({})).status,
      ).toBe(429);
    });

    it('never takes requests in flight for failures: many concurrent valid calls from one address all pass', async () => {
      const t = start({ TALLY_RATE_LIMIT_PER_MINUTE: '1000' });
      const { token } = await tokenFor(db.admin, ws.id, 'read');
      const statuses = await Promise.all(
        Array.from({ length: FAILED_AUTH_LIMIT_PER_MINUTE * 3 }, () => exchange(t.app, token).then((r) => r.status)),
      );
      expect(statuses).toEqual(statuses.map(() => 200));
    });

    it('lets a token made after the failures began through a blocked address, and no older one', async () => {
      const t = start();
      const { token: older } = await tokenFor(db.admin, ws.id, 'read');
      for (let i = 0; i < FAILED_AUTH_LIMIT_PER_MINUTE; i++) await exchange(t.app, newWorkspaceToken()).expect(401);
      await exchange(t.app, newWorkspaceToken()).expect(429);
      await exchange(t.app, older).expect(429);
      // Ten mistyped tokens, then a new one made to fix it: it works at once, and stays refused
      // once revoked (revoked tokens are not told apart from guesses).
      const { id, token: made } = await tokenFor(db.admin, ws.id, 'write');
      const ok = await exchange(t.app, made).expect(200);
      expect(ok.body).toMatchObject({ token_type: 'Bearer', scope: 'write' });
      const mcp = await request(t.app).post('/mcp').set('Authorization', `Bearer ${made}`).send({});
      expect([401, 429]).not.toContain(mcp.status); // MCP shares the rule
      await db.admin`UPDATE public.api_tokens SET revoked_at = now() WHERE id = ${id}`;
      await exchange(t.app, made).expect(429);
      await exchange(t.app, newWorkspaceToken()).expect(429);
      expect(await db.admin`SELECT hits FROM tally.rate_limits WHERE key LIKE 'authfail:%'`).toEqual([
        { hits: FAILED_AUTH_LIMIT_PER_MINUTE },
      ]);
    });

    it('does not count a missing, empty or malformed token: no guess, and no database call', async () => {
      const t = start();
      const { token } = await tokenFor(db.admin, ws.id, 'read');
      const slips = [
        () => request(t.app).post('/api/v1/token'),
        () => request(t.app).post('/api/v1/token').set('Authorization', 'Bearer '),
        () => exchange(t.app, 'tally_ws_...'), // the README's placeholder, pasted as it is
        () => exchange(t.app, token.slice(0, 20)), // a paste cut short
        () => request(t.app).post('/mcp?token=').send({}),
      ];
      for (let round = 0; round < 3; round++) for (const slip of slips) await slip().expect(401);
      expect(await db.admin`SELECT hits FROM tally.rate_limits WHERE key LIKE 'authfail:%'`).toEqual([]);
      await exchange(t.app, token).expect(200);
    });

    it('is shared by two instances', async () => {
      const a = start();
      const b = start();
      for (let i = 0; i < FAILED_AUTH_LIMIT_PER_MINUTE; i++) {
        await exchange(i % 2 ? a.app : b.app, newWorkspaceToken()).expect(401);
      }
      await exchange(a.app, newWorkspaceToken()).expect(429);
      await exchange(b.app, newWorkspaceToken()).expect(429);
    });

    it('does not count successful exchanges, nor other addresses', async () => {
      const t = start();
      const { token } = await tokenFor(db.admin, ws.id, 'read');
      for (let i = 0; i < FAILED_AUTH_LIMIT_PER_MINUTE + 2; i++) await exchange(t.app, token).expect(200);
      // Only failures are counted: successes leave no trace.
      expect(await db.admin`SELECT hits FROM tally.rate_limits WHERE key LIKE 'authfail:%'`).toEqual([]);
      await exchange(t.app, newWorkspaceToken()).expect(401);
      expect(await db.admin`SELECT hits FROM tally.rate_limits WHERE key LIKE 'authfail:%'`).toEqual([{ hits: 1 }]);

      // Behind a trusted proxy, addresses come from X-Forwarded-For: another client is not blocked.
      const proxied = start({ TALLY_TRUST_PROXY: 'true' });
      for (let i = 0; i < FAILED_AUTH_LIMIT_PER_MINUTE; i++) {
        await exchange(proxied.app, newWorkspaceToken()).set('X-Forwarded-For', '203.0.113.7').expect(401);
      }
      await exchange(proxied.app, token).set('X-Forwarded-For', '203.0.113.7').expect(429);
      await exchange(proxied.app, token).set('X-Forwarded-For', '198.51.100.9').expect(200);
    });
  });

  describe('the Postgres store', () => {
    it('increments atomically under concurrency from two pools, and each pool reads the one count', async () => {
      const pools = [serverPool(serverUrl(db.url), { max: 5 }), serverPool(serverUrl(db.url), { max: 5 })];
      try {
        const stores = pools.map((p) => new PostgresRateLimitStore(p, 'test:'));
        const before = Date.now();
        const results = await Promise.all(Array.from({ length: 40 }, (_, i) => present(stores[i % 2]).increment('k')));
        const after = Date.now();
        expect(results.map((r) => r.totalHits).sort((x, y) => x - y)).toEqual(
          Array.from({ length: 40 }, (_, i) => i + 1),
        );
        expect(new Set(results.map((r) => r.resetTime.getTime())).size).toBe(1); // one fixed window
        // A minute from the first hit, which came during the burst, however long it took.
        const reset = first(results).resetTime.getTime();
        expect(reset).toBeGreaterThanOrEqual(before + 60_000);
        expect(reset).toBeLessThanOrEqual(after + 60_000);

        expect((await first(stores).get('k'))?.totalHits).toBe(40);
        expect((await present(stores[1]).increment('k')).totalHits).toBe(41);
        expect(await present(stores[1]).get('other')).toBeUndefined();
      } finally {
        await Promise.all(pools.map((p) => p.end({ timeout: 5 })));
      }
    });

    describe('under a high limit, hits come from Postgres in blocks', () => {
      // A million a minute: blocks of 1,000 (1% of what is left, at most 1,000), taken ahead
      // when a quarter is left.
      const LIMIT = 1_000_000;
      const counted = async () =>
        (await db.admin<{ hits: number }[]>`SELECT hits FROM tally.rate_limits WHERE key = 'test:blocks'`)[0]?.hits ??
        0;
      const hit = (store: PostgresRateLimitStore, times: number) =>
        Array.from({ length: times }).reduce<Promise<number[]>>(
          async (done, _) => [...(await done), (await store.increment('blocks')).totalHits],
          Promise.resolve([]),
        );

      it('numbers every hit once, and takes the next block while a quarter of the current one is left', async () => {
        const pool = serverPool(serverUrl(db.url), { max: 2 });
        try {
          const store = new PostgresRateLimitStore(pool, 'test:', LIMIT);
          expect(await hit(store, 749)).toEqual(Array.from({ length: 749 }, (_, i) => i + 1));
          expect(await counted()).toBe(1000);
          // The 750th hit leaves 250: the next block is taken then, not when a request finds none.
          expect(await hit(store, 1)).toEqual([750]);
          await waitFor(async () => (await counted()) === 2000, 'the block taken ahead');
          expect(await hit(store, 1250)).toEqual(Array.from({ length: 1250 }, (_, i) => i + 751));
          await waitFor(async () => (await counted()) === 3000, 'the third block');
        } finally {
          await pool.end({ timeout: 5 });
        }
      });

      it('counts what another process took in between; past the limit, keeps the hits it holds and refuses more', async () => {
        const pools = [serverPool(serverUrl(db.url), { max: 2 }), serverPool(serverUrl(db.url), { max: 2 })];
        try {
          const [a, b] = pools.map((p) => new PostgresRateLimitStore(p, 'test:', LIMIT)) as [
            PostgresRateLimitStore,
            PostgresRateLimitStore,
          ];
          await hit(a, 750); // a holds 250 and takes a block ahead: 1,250 held
          await waitFor(async () => (await counted()) === 2000, 'the block taken ahead');
          expect(await hit(b, 1)).toEqual([2001]); // b's own block: 2001-3000
          expect(await hit(a, 1000)).toEqual(Array.from({ length: 1000 }, (_, i) => i + 751));
          await waitFor(async () => (await counted()) === 4000, "a's next block");
          // a's numbers go on from the database's count, b's block included: 4000 less the 1,250 a holds.
          expect(await hit(a, 1)).toEqual([2751]);
          // Other processes used the rest of the window: the block a takes ahead is wholly past
          // the limit. The 250 hits a holds were counted under it and stay a's; the next is refused.
          await db.admin`UPDATE tally.rate_limits SET hits = ${LIMIT} WHERE key = 'test:blocks'`;
          await hit(a, 999); // 250 left: a block is taken ahead
          await waitFor(async () => (await counted()) > LIMIT, 'the block past the limit');
          const next = await hit(a, 251);
          expect(next.slice(0, 250)).toEqual(Array.from({ length: 250 }, (_, i) => i + 3751));
          expect(next.at(-1)).toBeGreaterThan(LIMIT);
        } finally {
          await Promise.all(pools.map((p) => p.end({ timeout: 5 })));
        }
      });
    });

    it('is reachable by the authenticator role only through its functions, and not by API roles', async () => {
      const pool = serverPool(serverUrl(db.url), { max: 1 });
      try {
        await expect(pool`SELECT * FROM tally.rate_limits`).rejects.toMatchObject({ code: '42501' });
        await expect(pool`SELECT * FROM public.api_tokens`).rejects.toMatchObject({ code: '42501' });
        expect(first(await pool`SELECT hits FROM tally.rate_limit_take('probe', 60000, 1)`).hits).toBe(1);
        // A request's own SQL runs as an API role: it can neither tamper with counters nor
        // look tokens up.
        for (const role of ['anon', 'api_read', 'api_write']) {
          await expect(
            pool.control.begin(async (tx) => {
              await tx`SELECT set_config('role', ${role}, true)`;
              await tx`SELECT tally.rate_limit_reset('probe')`;
            }),
          ).rejects.toMatchObject({ code: '42501' });
          await expect(
            pool.control.begin(async (tx) => {
              await tx`SELECT set_config('role', ${role}, true)`;
              await tx`SELECT * FROM tally.exchange_token(${Buffer.alloc(32)})`;
            }),
          ).rejects.toMatchObject({ code: '42501' });
        }
      } finally {
        await pool.end({ timeout: 5 });
      }
    });
  });
});
