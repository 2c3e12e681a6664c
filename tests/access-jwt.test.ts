import request from 'supertest';
import { SignJWT } from 'jose';
import type { App } from '../gateway/server.js';
import { revokeToken } from '../gateway/admin/tokens.js';
import { setApiEnabled } from '../gateway/admin/workspaces.js';
import { accessToken, startTestApp, TEST_JWT_SECRET, type TestApp } from './harness/app.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { tokenFor, workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { first, present } from './harness/present.js';

// Access tokens on /rest/v1: expiry, forgeries, rotation, and revocation and the
// API switch acting on the very next request, with two Tally instances on one database.

const b64 = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');

describe('access tokens', () => {
  let db: TestDatabase;
  let a: TestApp;
  let b: TestApp;
  let ws: WorkspaceFixture;
  let other: WorkspaceFixture;

  beforeAll(async () => {
    db = await createTestDatabase();
    ws = await workspaceWithData(db.admin);
    other = await workspaceWithData(db.admin);
    a = startTestApp(db.url, restEnv());
    b = startTestApp(db.url, restEnv());
  });
  afterAll(async () => {
    await Promise.all([a.close(), b.close()]);
    await db.drop();
  });
  beforeEach(() => db.admin`DELETE FROM tally.rate_limits`);

  async function exchanged(app: App, token: string): Promise<string> {
    const res = await request(app).post('/api/v1/token').set('x-api-token', token).expect(200);
    return res.body.access_token as string;
  }

  // A read and a write of the real /rest/v1, with the publishable key and the access token.
  const read = (app: App, jwt: string) =>
    request(app)
      .get('/rest/v1/personal_transactions?select=id&order=id')
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}` });
  const write = (app: App, jwt: string) =>
    request(app)
      .post('/rest/v1/personal_transactions')
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}`, Prefer: 'return=minimal' })
      .send({ name: 'access-jwt write', amount: 1, category_id: 'other', method_id: 'cash' });

  it('an exchanged access token reads its own workspace on either instance', async () => {
    const { token } = await tokenFor(db.admin, ws.id, 'read');
    const jwt = await exchanged(a.app, token);
    const own = await db.admin<
      { id: string }[]
    >`SELECT id FROM public.personal_transactions WHERE workspace_id = ${ws.id} ORDER BY id`;
    expect(own.length).toBeGreaterThan(0);
    for (const app of [a.app, b.app]) {
      const res = await read(app, jwt).expect(200);
      expect(res.body).toEqual(own.map(({ id }) => ({ id }))); // its workspace's rows, and no other's
      expect(res.headers['content-range']).toBe(`0-${own.length - 1}/*`);
    }
  });

  describe('refused JWTs', () => {
    let good: string;
    let tokenId: string;
    beforeAll(async () => {
      const t = await tokenFor(db.admin, ws.id, 'write');
      tokenId = t.id;
      good = await exchanged(a.app, t.token);
    });

    async function refused(jwt: string, code: string, message: RegExp | string) {
      const res = await read(a.app, jwt);
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ code, message: expect.stringMatching(message), details: null });
      expect(Object.keys(res.body).sort()).toEqual(['code', 'details', 'hint', 'message']);
      expect(JSON.stringify(res.body)).not.toContain(jwt);
      expect(JSON.stringify(res.body)).not.toContain(TEST_JWT_SECRET);
      return res;
    }

    it('an expired JWT (exp in the past) is 401 PGRST303', async () => {
      const now = Math.floor(Date.now() / 1000);
      const expired = await new SignJWT({ role: 'api_write', workspace_id: ws.id, scope: 'write' })
        .setProtectedHeader({ alg: 'HS256' })
        .setSubject(tokenId)
        .setIssuer('tally')
        .setAudience('tally')
        .setIssuedAt(now - 7200)
        .setExpirationTime(now - 3600)
        .sign(new TextEncoder().encode(TEST_JWT_SECRET));
      const res = await refused(expired, 'PGRST303', 'JWT expired');
      expect(res.headers['www-authenticate']).toMatch(/^Bearer error="invalid_token"/);
    });

    it('alg "none" is refused', async () => {
      const [, payload] = good.split('.');
      await refused(`${b64({ alg: 'none', typ: 'JWT' })}.${payload}.`, 'PGRST301', /algorithm|decoded/);
    });

    it('a JWT signed with another secret is refused', async () => {
      const forged = await accessToken(
        { role: 'api_write', workspace_id: ws.id, scope: 'write', sub: tokenId },
        'another-secret-that-is-long-enough-to-sign',
      );
      await refused(forged, 'PGRST301', 'JWT signature does not match');
    });

    it('edited claims (role, workspace, scope) break the signature', async () => {
      const [header, payload, signature] = good.split('.');
      const claims = JSON.parse(Buffer.from(present(payload), 'base64url').toString());
      for (const edit of [
        { role: 'postgres' },
        { workspace_id: other.id },
        { role: 'api_write', scope: 'write', sub: '00000000-0000-0000-0000-000000000000' },
      ]) {
        await refused(
          `${header}.${b64({ ...claims, ...edit })}.${signature}`,
          'PGRST301',
          'JWT signature does not match',
        );
      }
    });

    it("another workspace's id under a validly signed token is refused by the pre-request check", async () => {
      // As if a signing bug (or a leaked secret) paired this workspace's token with another
      // workspace: the database still refuses, because the token belongs to `ws`.
      const mismatched = await accessToken({ role: 'api_write', workspace_id: other.id, scope: 'write', sub: tokenId });
      await refused(mismatched, 'PT401', /revoked/);
      const unknownSub = await accessToken({
        role: 'api_write',
        workspace_id: ws.id,
        scope: 'write',
        sub: '00000000-0000-0000-0000-000000000000',
      });
      await refused(unknownSub, 'PT401', /revoked/);
    });

    it('a JWT for another audience is refused', async () => {
      const wrongAud = await new SignJWT({ role: 'api_write', workspace_id: ws.id })
        .setProtectedHeader({ alg: 'HS256' })
        .setSubject(tokenId)
        .setAudience('someone-else')
        .setIssuedAt()
        .setExpirationTime('1h')
        .sign(new TextEncoder().encode(TEST_JWT_SECRET));
      await refused(wrongAud, 'PGRST303', 'JWT not in audience');
    });

    it('a workspace token sent where an access token belongs is refused with a hint to exchange it', async () => {
      const t = await tokenFor(db.admin, ws.id, 'read');
      const res = await refused(t.token, 'PGRST301', /JWT/);
      expect(res.body.hint).toMatch(/exchange/i);
      expect(JSON.stringify(res.body)).not.toContain(t.token);
    });
  });

  it('accepts JWTs signed with the previous secret during a rotation, and signs with the new one', async () => {
    const rotated = startTestApp(
      db.url,
      restEnv({
        TALLY_JWT_SECRET: 'the-next-secret-that-is-at-least-32-chars',
        TALLY_JWT_SECRET_PREVIOUS: TEST_JWT_SECRET,
      }),
    );
    try {
      const t = await tokenFor(db.admin, ws.id, 'read');
      const old = await exchanged(a.app, t.token); // signed with TEST_JWT_SECRET
      await read(rotated.app, old).expect(200);
      const fresh = await exchanged(rotated.app, t.token);
      await read(rotated.app, fresh).expect(200);
      await read(a.app, fresh).expect(401); // a does not know the new secret
    } finally {
      await rotated.close();
    }
  });

  it('revoking a workspace token stops its JWT on the very next request, on both instances', async () => {
    const t = await tokenFor(db.admin, ws.id, 'write');
    const jwt = await exchanged(a.app, t.token);
    await read(a.app, jwt).expect(200);
    await read(b.app, jwt).expect(200);

    await revokeToken(db.admin, t.id, ws.id, 'test');

    for (const app of [b.app, a.app]) {
      const res = await read(app, jwt).expect(401);
      expect(res.body).toMatchObject({
        code: 'PT401',
        message: 'The workspace token behind this access token has been revoked',
      });
      await write(app, jwt).expect(401);
    }
    expect(
      first(
        await db.admin<
          { n: number }[]
        >`SELECT count(*)::int AS n FROM public.personal_transactions WHERE name = 'access-jwt write'`,
      ).n,
    ).toBe(0);
    for (const app of [a.app, b.app]) {
      await request(app).post('/api/v1/token').set('x-api-token', t.token).expect(401);
    }
  });

  it('the API switch stops every token of the workspace on the next request with 403, and only that workspace', async () => {
    const t = await tokenFor(db.admin, ws.id, 'read');
    const theirs = await tokenFor(db.admin, other.id, 'read');
    const jwt = await exchanged(a.app, t.token);
    const theirJwt = await exchanged(b.app, theirs.token);

    await setApiEnabled(db.admin, ws.id, false, 'test');
    try {
      for (const app of [a.app, b.app]) {
        const res = await read(app, jwt).expect(403);
        expect(res.body).toMatchObject({ code: 'PT403', message: 'API access is switched off for this workspace' });
        await request(app).post('/functions/v1/api-token').set('Authorization', `Bearer ${t.token}`).expect(403);
        await read(app, theirJwt).expect(200);
      }
    } finally {
      await setApiEnabled(db.admin, ws.id, true, 'test');
    }
    await read(b.app, jwt).expect(200);
    await request(a.app).post('/api/v1/token').set('x-api-token', t.token).expect(200);
  });
});
