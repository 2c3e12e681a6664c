import request from 'supertest';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { revokeToken } from '../gateway/admin/tokens.js';
import { setApiEnabled } from '../gateway/admin/workspaces.js';
import { newWorkspaceToken } from '../gateway/secrets.js';
import { startTestApp, type TestApp } from './harness/app.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { tokenFor, workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { first } from './harness/present.js';

// The token exchange: three ways of presenting a
// workspace token, the JWT it answers with, and every refusal.

describe('token exchange', () => {
  let db: TestDatabase;
  let t: TestApp;
  let ws: WorkspaceFixture;
  let write: { id: string; token: string };
  let read: { id: string; token: string };

  beforeAll(async () => {
    db = await createTestDatabase();
    ws = await workspaceWithData(db.admin);
    write = await tokenFor(db.admin, ws.id, 'write');
    read = await tokenFor(db.admin, ws.id, 'read');
    t = startTestApp(db.url);
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });
  // Every request of this file comes from one address: start each test with fresh counters.
  beforeEach(() => db.admin`DELETE FROM tally.rate_limits`);

  const exchange = (path = '/api/v1/token') => request(t.app).post(path);

  function expectAccessToken(body: Record<string, unknown>, token: { id: string }, scope: 'read' | 'write') {
    expect(body).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: 3600, scope });
    const claims = decodeJwt(body.access_token as string);
    expect(decodeProtectedHeader(body.access_token as string).alg).toBe('HS256');
    expect(claims).toMatchObject({
      role: scope === 'write' ? 'api_write' : 'api_read',
      workspace_id: ws.id,
      scope,
      sub: token.id,
      iss: 'tally',
      aud: 'tally',
    });
    expect(claims.jti).toEqual(expect.any(String));
    expect(claims.exp! - claims.iat!).toBe(3600);
    expect(Math.abs(claims.iat! - Date.now() / 1000)).toBeLessThan(10);
  }

  it('accepts the token as Authorization: Bearer', async () => {
    const res = await exchange().set('Authorization', `Bearer ${write.token}`).expect(200);
    expect(res.headers['cache-control']).toBe('no-store');
    expectAccessToken(res.body, write, 'write');
  });

  it('accepts the token in the x-api-token header', async () => {
    const res = await exchange().set('x-api-token', write.token).expect(200);
    expectAccessToken(res.body, write, 'write');
  });

  it('accepts the token as the JSON body field "token"', async () => {
    const res = await exchange().send({ token: write.token }).expect(200);
    expectAccessToken(res.body, write, 'write');
  });

  it('answers the same at POST /functions/v1/api-token', async () => {
    const res = await exchange('/functions/v1/api-token')
      .set('Authorization', `Bearer ${read.token}`)
      .set('Content-Type', 'application/json')
      .expect(200);
    expectAccessToken(res.body, read, 'read');
  });

  it('maps a read token to the role api_read and a write token to api_write', async () => {
    expectAccessToken((await exchange().set('x-api-token', read.token).expect(200)).body, read, 'read');
    expectAccessToken((await exchange().set('x-api-token', write.token).expect(200)).body, write, 'write');
  });

  it('lets a workspace token elsewhere win over a non-token value in Authorization', async () => {
    // e.g. a functions client that always sends its platform key as the bearer value
    const res = await exchange()
      .set('Authorization', 'Bearer eyJhbGciOiJIUzI1NiJ9.e30.x')
      .set('x-api-token', read.token)
      .expect(200);
    expectAccessToken(res.body, read, 'read');
    const same = await exchange().set('Authorization', `Bearer ${read.token}`).send({ token: read.token }).expect(200);
    expectAccessToken(same.body, read, 'read');
  });

  describe('refusals', () => {
    const errorShape = {
      code: expect.any(String),
      message: expect.any(String),
      details: null,
      hint: expect.any(String),
    };

    it('401 without a token (no header, empty body, empty JSON object)', async () => {
      for (const res of [
        await exchange(),
        await exchange().set('Content-Type', 'application/json').send(''),
        await exchange().send({}),
        await exchange().send({ token: null }),
        await exchange().set('x-api-token', ''),
      ]) {
        expect(res.status).toBe(401);
        expect(res.body).toEqual({ ...errorShape, code: 'PGRST302', message: 'No workspace token found in request' });
        expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
      }
    });

    it('401 for a malformed token, in every place', async () => {
      for (const bad of [
        'tally_ws_short',
        'not-a-token',
        write.token + '!',
        write.token.replace('tally_ws_', 'tally_pk_'),
      ]) {
        await db.admin`DELETE FROM tally.rate_limits`; // stay under the failed-authentication limit
        for (const res of [
          await exchange().set('Authorization', `Bearer ${bad}`),
          await exchange().set('x-api-token', bad),
          await exchange().send({ token: bad }),
        ]) {
          expect(res.status).toBe(401);
          expect(res.body).toEqual({ ...errorShape, code: 'PGRST301', message: 'Invalid workspace token' });
          expect(JSON.stringify(res.body)).not.toContain(bad);
        }
      }
      const notBearer = await exchange().set('Authorization', `Basic ${write.token}`);
      expect(notBearer.status).toBe(401);
    });

    it('401 for a well-formed token that was never issued', async () => {
      const unknown = newWorkspaceToken();
      const res = await exchange().set('x-api-token', unknown).expect(401);
      expect(res.body).toEqual({ ...errorShape, code: 'PGRST301', message: 'Invalid workspace token' });
      expect(JSON.stringify(res.body)).not.toContain(unknown);
    });

    it('401 for two different workspace tokens in one request', async () => {
      const res = await exchange()
        .set('Authorization', `Bearer ${write.token}`)
        .set('x-api-token', read.token)
        .expect(401);
      expect(res.body.message).toBe('Two different workspace tokens were sent');
      expect(JSON.stringify(res.body)).not.toMatch(/tally_ws_[0-9A-Za-z]{10}/);
    });

    it('400 in the error shape for malformed JSON and for a body of the wrong shape', async () => {
      const malformed = await exchange().set('Content-Type', 'application/json').send('{"token": ');
      expect(malformed.status).toBe(400);
      expect(malformed.body).toEqual({
        code: 'PGRST102',
        message: 'Empty or invalid json',
        details: null,
        hint: null,
      });
      const leaky = await exchange().set('Content-Type', 'application/json').send(`{"token": "${write.token}"`);
      expect(leaky.status).toBe(400);
      expect(JSON.stringify(leaky.body)).not.toContain(write.token);
      expect((await exchange().send([write.token])).status).toBe(400);
      expect((await exchange().send({ token: 42 })).status).toBe(400);
    });

    it('401 for a revoked token, and 403 while the API switch is off', async () => {
      const victim = await tokenFor(db.admin, ws.id, 'write');
      await exchange().set('x-api-token', victim.token).expect(200);
      await revokeToken(db.admin, victim.id, null, 'test');
      const revoked = await exchange().set('x-api-token', victim.token).expect(401);
      expect(revoked.body).toEqual({
        ...errorShape,
        code: 'PGRST301',
        message: 'The workspace token has been revoked',
      });

      await setApiEnabled(db.admin, ws.id, false, 'test');
      try {
        const off = await exchange().set('Authorization', `Bearer ${read.token}`).expect(403);
        expect(off.body).toEqual({
          ...errorShape,
          code: 'PT403',
          message: 'API access is switched off for this workspace',
        });
        expect(JSON.stringify(off.body)).not.toContain(read.token);
      } finally {
        await setApiEnabled(db.admin, ws.id, true, 'test');
      }
      await exchange().set('Authorization', `Bearer ${read.token}`).expect(200);
    });

    it("refuses other workspaces' revoked tokens without touching this one", async () => {
      const other = await workspaceWithData(db.admin);
      const theirs = await tokenFor(db.admin, other.id, 'write');
      await setApiEnabled(db.admin, other.id, false, 'test');
      await exchange().set('x-api-token', theirs.token).expect(403);
      expectAccessToken((await exchange().set('x-api-token', write.token).expect(200)).body, write, 'write');
    });
  });

  describe('last_used_at', () => {
    const lastUsed = async (id: string) =>
      first(
        await db.admin<{ last_used_at: Date | null }[]>`SELECT last_used_at FROM public.api_tokens WHERE id = ${id}`,
      ).last_used_at;

    it('is set by an exchange and written at most about once a minute', async () => {
      const fresh = await tokenFor(db.admin, ws.id, 'read');
      expect(await lastUsed(fresh.id)).toBeNull();
      await exchange().set('x-api-token', fresh.token).expect(200);
      const first = await lastUsed(fresh.id);
      expect(first).toBeInstanceOf(Date);

      await exchange().set('x-api-token', fresh.token).expect(200);
      expect(await lastUsed(fresh.id)).toEqual(first); // within the minute: no write

      await db.admin`UPDATE public.api_tokens SET last_used_at = now() - interval '61 seconds' WHERE id = ${fresh.id}`;
      const aged = await lastUsed(fresh.id);
      await exchange().set('x-api-token', fresh.token).expect(200);
      expect((await lastUsed(fresh.id))!.getTime()).toBeGreaterThan(aged!.getTime());
    });

    it('is not touched by a refused exchange', async () => {
      const fresh = await tokenFor(db.admin, ws.id, 'read');
      await revokeToken(db.admin, fresh.id, null, 'test');
      await exchange().set('x-api-token', fresh.token).expect(401);
      expect(await lastUsed(fresh.id)).toBeNull();
    });
  });

  it('stores only the SHA-256 of a token', async () => {
    const rows = await db.admin<
      { token_hash: Buffer }[]
    >`SELECT token_hash FROM public.api_tokens WHERE id = ${write.id}`;
    expect(first(rows).token_hash).toHaveLength(32);
    const dump = await db.admin<{ t: string }[]>`SELECT row_to_json(a)::text AS t FROM public.api_tokens a`;
    for (const { t: row } of dump) expect(row).not.toContain(write.token.slice(9));
  });
});
