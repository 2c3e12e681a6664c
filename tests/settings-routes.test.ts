import request from 'supertest';
import type { Response } from 'supertest';
import { createHash } from 'node:crypto';
import { addMember } from '../gateway/admin/members.js';
import { createWorkspace } from '../gateway/admin/workspaces.js';
import { sha256 } from '../gateway/secrets.js';
import { startTestApp, type TestApp } from './harness/app.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { tokenFor, workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { csrfOf, first, present } from './harness/present.js';

// The workspace settings pages: sign-in, sessions, CSRF, roles, and the changes
// they make, checked in the responses and in the database.

const PASSWORD = 'correct horse battery staple';
const REFUSED = 'The email or password is not correct.';

const cookieOf = (res: Response, name: string): string | undefined =>
  ([] as string[]).concat(res.headers['set-cookie'] ?? []).find((c) => c.startsWith(`${name}=`));
const cookieValue = (header: string): string =>
  decodeURIComponent(present(header.split(';')[0]?.split('=')[1], 'a cookie value'));
const hashOf = (secret: string): Buffer => createHash('sha256').update(secret).digest();

describe('settings pages', () => {
  let db: TestDatabase;
  let t: TestApp;
  let ws: WorkspaceFixture;
  let other: WorkspaceFixture;
  const owner = 'owner@example.com';
  const admin = 'admin@example.com';
  const member = 'member@example.com';

  beforeAll(async () => {
    db = await createTestDatabase();
    ws = await workspaceWithData(db.admin, 'Acme <Travel> & "Co"');
    other = await workspaceWithData(db.admin, 'Beta Club');
    await addMember(db.admin, ws.id, owner, 'owner', PASSWORD, 'test');
    await addMember(db.admin, ws.id, admin, 'admin', PASSWORD, 'test');
    await addMember(db.admin, other.id, admin, 'member', undefined, 'test');
    await addMember(db.admin, ws.id, member, 'member', PASSWORD, 'test');
    t = startTestApp(db.url, { TALLY_SIGN_IN_FAILURES_PER_ACCOUNT: '100', TALLY_SIGN_IN_FAILURES_PER_ADDRESS: '1000' });
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  async function signIn(email: string, password = PASSWORD) {
    const agent = request.agent(t.app);
    const login = await agent.get('/settings/login').expect(200);
    const res = await agent
      .post('/settings/login')
      .type('form')
      .send({ csrf: csrfOf(login.text), email, password });
    return { agent, res };
  }

  async function signedIn(email: string) {
    const { agent, res } = await signIn(email);
    expect(res.status).toBe(303);
    const page = await agent.get(`/settings/api?workspace=${ws.id}`).expect(200);
    return { agent, csrf: csrfOf(page.text), page, secret: cookieValue(cookieOf(res, 'tally_session')!) };
  }

  const audit = (action: string) =>
    db.admin<{ actor: string; details: Record<string, unknown> }[]>`
      SELECT actor, details FROM tally.audit_log WHERE workspace_id = ${ws.id} AND action = ${action} ORDER BY id`;

  describe('sign-in', () => {
    it('serves the login form with a login CSRF cookie, a CSP and no inline script', async () => {
      const res = await request(t.app).get('/settings/login').expect(200);
      expect(res.headers['content-type']).toMatch(/^text\/html/);
      expect(res.headers['content-security-policy']).toContain("script-src 'self'");
      expect(res.headers['content-security-policy']).toContain("default-src 'none'");
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.headers['x-frame-options']).toBe('DENY');
      expect(res.text).toContain('<label for="email">Email</label>');
      expect(res.text.match(/<script[^>]*>/g)).toEqual(['<script src="/settings/static/settings.js" defer>']);
      expect(res.text).not.toMatch(/style="/);
      const cookie = cookieOf(res, 'tally_login')!;
      expect(cookie).toMatch(/HttpOnly/);
      expect(cookie).toMatch(/SameSite=Strict/);
      expect(cookie).toMatch(/Path=\/settings/);
      expect(csrfOf(res.text)).toBe(cookieValue(cookie));
    });

    it('signs a member in: a session cookie (HttpOnly, SameSite=Strict, Path=/settings) naming a session row', async () => {
      const { agent, res } = await signIn(owner.toUpperCase());
      expect(res.status).toBe(303);
      expect(res.headers.location).toBe('/settings/api');
      const cookie = cookieOf(res, 'tally_session')!;
      expect(cookie).toMatch(/HttpOnly/);
      expect(cookie).toMatch(/SameSite=Strict/);
      expect(cookie).toMatch(/Path=\/settings/);
      expect(cookie).not.toMatch(/Secure/); // plain http here
      const secret = cookieValue(cookie);
      const [row] = await db.admin<{ email: string; hours: number }[]>`
        SELECT u.email, (extract(epoch FROM s.expires_at - s.created_at) / 3600)::float8 AS hours
          FROM tally.settings_sessions s JOIN public.user_credentials u ON u.id = s.user_id
         WHERE s.token_hash = ${hashOf(secret)}`;
      expect(row).toEqual({ email: owner, hours: 12 });
      const page = await agent.get('/settings/api').expect(200);
      expect(page.text).toContain(`Signed in as <strong>${owner}</strong>`);
      expect(page.text).toContain('Acme &lt;Travel&gt; &amp; &quot;Co&quot;');
      expect(page.text).not.toContain('Acme <Travel>');
    });

    it('marks the cookie Secure when the request came over HTTPS', async () => {
      const https = startTestApp(db.url, { TALLY_TRUST_PROXY: 'true' });
      try {
        const agent = request.agent(https.app);
        const login = await agent.get('/settings/login').set('X-Forwarded-Proto', 'https').expect(200);
        expect(cookieOf(login, 'tally_login')).toMatch(/Secure/);
        const res = await request(https.app)
          .post('/settings/login')
          .set('X-Forwarded-Proto', 'https')
          .set('Cookie', `tally_login=${csrfOf(login.text)}`)
          .type('form')
          .send({ csrf: csrfOf(login.text), email: owner, password: PASSWORD });
        expect(res.status).toBe(303);
        expect(cookieOf(res, 'tally_session')).toMatch(/; Secure/);
      } finally {
        await https.close();
      }
    });

    it('refuses a wrong password and an unknown email with the same 401 page, and makes no session', async () => {
      const { before } = first(await db.admin`SELECT count(*)::int AS before FROM tally.settings_sessions`);
      const wrong = await signIn(owner, 'not the password');
      const unknown = await signIn('nobody@example.com', 'not the password');
      for (const { res } of [wrong, unknown]) {
        expect(res.status).toBe(401);
        expect(cookieOf(res, 'tally_session')).toBeUndefined();
        expect(res.text).toContain(`<p class="error" role="alert" id="login-error">${REFUSED}</p>`);
      }
      const strip = (text: string) => text.replace(/value="[^"]*"/g, '');
      expect(strip(wrong.res.text)).toBe(strip(unknown.res.text));
      const { after } = first(await db.admin`SELECT count(*)::int AS after FROM tally.settings_sessions`);
      expect(after).toBe(before);
    });

    it('refuses a sign-in without the login form token (403)', async () => {
      const res = await request(t.app).post('/settings/login').type('form').send({ email: owner, password: PASSWORD });
      expect(res.status).toBe(403);
      expect(cookieOf(res, 'tally_session')).toBeUndefined();
    });

    it('sends a visitor without a session to the login page', async () => {
      const res = await request(t.app).get('/settings/api').expect(303);
      expect(res.headers.location).toBe('/settings/login');
      const post = await request(t.app)
        .post('/settings/api/tokens')
        .type('form')
        .send({ workspace: ws.id, scope: 'read' });
      expect(post.status).toBe(401);
    });
  });

  describe('sessions', () => {
    it('end at their expiry: the page sends the member back to sign in, and changes are refused', async () => {
      const { agent, csrf, secret } = await signedIn(admin);
      await db.admin`UPDATE tally.settings_sessions SET expires_at = now() - interval '1 second' WHERE token_hash = ${hashOf(secret)}`;
      const page = await agent.get('/settings/api').expect(303);
      expect(page.headers.location).toBe('/settings/login');
      const { count } = first(
        await db.admin`SELECT count(*)::int AS count FROM public.api_tokens WHERE workspace_id = ${ws.id}`,
      );
      const post = await agent
        .post('/settings/api/tokens')
        .type('form')
        .send({ csrf, workspace: ws.id, scope: 'read', label: 'late' });
      expect(post.status).toBe(401);
      const { count: after } = first(
        await db.admin`SELECT count(*)::int AS count FROM public.api_tokens WHERE workspace_id = ${ws.id}`,
      );
      expect(after).toBe(count);
    });

    it('sign-out (POST, with the CSRF token) deletes the session and clears the cookie', async () => {
      const { agent, csrf, secret } = await signedIn(member);
      const refused = await agent.post('/settings/logout').type('form').send({ csrf: 'wrong' });
      expect(refused.status).toBe(403);
      const out = await agent.post('/settings/logout').type('form').send({ csrf }).expect(303);
      expect(out.headers.location).toBe('/settings/login');
      expect(cookieOf(out, 'tally_session')).toMatch(/^tally_session=;.*Expires=Thu, 01 Jan 1970/);
      const rows = await db.admin`SELECT 1 FROM tally.settings_sessions WHERE token_hash = ${hashOf(secret)}`;
      expect(rows).toHaveLength(0);
      // The old cookie, replayed, opens nothing.
      const replay = await request(t.app).get('/settings/api').set('Cookie', `tally_session=${secret}`).expect(303);
      expect(replay.headers.location).toBe('/settings/login');
    });

    // Each sign-in stored a session until it expired (12 hours): one member signing in again
    // and again grew tally.settings_sessions without end. sessions_per_member in
    // sql/app/definitions/settings.sql.
    it('a member holds at most 20 sessions: a further sign-in ends the oldest, the others go on', async () => {
      const SESSIONS_PER_MEMBER = 20;
      const many = 'many-devices@example.com';
      await addMember(db.admin, ws.id, many, 'member', PASSWORD, 'test');
      const secrets: string[] = [];
      for (let i = 0; i < SESSIONS_PER_MEMBER + 5; i += 1) secrets.push((await signedIn(many)).secret);
      const rows = await db.admin<{ token_hash: Buffer }[]>`
        SELECT s.token_hash FROM tally.settings_sessions s JOIN public.user_credentials u ON u.id = s.user_id
         WHERE u.email = ${many}`;
      expect(rows.map((r) => r.token_hash.toString('hex')).sort()).toEqual(
        secrets
          .slice(-SESSIONS_PER_MEMBER)
          .map((s) => hashOf(s).toString('hex'))
          .sort(),
      );
      const oldest = await request(t.app).get('/settings/api').set('Cookie', `tally_session=${secrets[4]}`).expect(303);
      expect(oldest.headers.location).toBe('/settings/login');
      await request(t.app).get('/settings/api').set('Cookie', `tally_session=${secrets[5]}`).expect(200);
    });
  });

  describe('the API page', () => {
    it('lists the tokens with label, access, dates and status, never a secret', async () => {
      const active = await tokenFor(db.admin, ws.id, 'read');
      const revoked = await tokenFor(db.admin, ws.id, 'write');
      await db.admin`UPDATE public.api_tokens SET revoked_at = now(), label = ${'<b>old</b>'} WHERE id = ${revoked.id}`;
      await db.admin`UPDATE public.api_tokens SET last_used_at = '2030-01-02T03:04:00Z' WHERE id = ${active.id}`;
      const { page } = await signedIn(member);
      expect(page.text).toContain('test read');
      expect(page.text).toContain('&lt;b&gt;old&lt;/b&gt;');
      expect(page.text).toContain('<time datetime="2030-01-02T03:04:00.000Z">2030-01-02 03:04 UTC</time>');
      expect(page.text).toContain('<span class="badge revoked">Revoked</span>');
      expect(page.text).toContain('<span class="badge active">Active</span>');
      expect(page.text).not.toContain(active.token);
      expect(page.text).not.toContain(revoked.token);
    });

    it('shows a member the tokens but no form to change them', async () => {
      const { page } = await signedIn(member);
      expect(page.text).toContain('You are a member of this workspace.');
      expect(page.text).not.toContain('action="/settings/api/tokens"');
      expect(page.text).not.toContain('Revoke…');
      expect(page.text).not.toContain('Turn API access');
    });

    it('lets a member of several workspaces open one in one click, and refuses a workspace that is not theirs', async () => {
      const { agent, page } = await signedIn(admin);
      // Each workspace is a link straight to its page (no select-then-submit), the open one marked.
      expect(page.text).not.toContain('<select');
      expect(page.text).toMatch(/<a href="\/settings\/api\?workspace=[0-9a-f-]{36}" aria-current="page">/);
      const link = page.text.match(/<a href="([^"]+)">Beta Club<\/a>/)?.[1];
      expect(link).toBe(`/settings/api?workspace=${other.id}`);
      const beta = await agent.get(link!).expect(200);
      expect(beta.text).toContain(`<a href="/settings/api?workspace=${other.id}" aria-current="page">Beta Club</a>`);
      expect(beta.text).toContain('<span class="sub">Beta Club</span>');
      expect(beta.text).toContain('You are a member of this workspace.');
      const { agent: ownerAgent } = await signedIn(owner);
      const foreign = await ownerAgent.get(`/settings/api?workspace=${other.id}`);
      expect(foreign.status).toBe(404);
      expect(foreign.text).not.toContain('Beta Club');
    });

    it("answers the browser's /favicon.ico without a 404", async () => {
      const res = await request(t.app).get('/favicon.ico');
      expect(res.status).toBe(204);
      expect(res.headers['cache-control']).toBe('public, max-age=86400');
    });

    it('serves its own stylesheet and script', async () => {
      const css = await request(t.app).get('/settings/static/settings.css').expect(200);
      expect(css.headers['content-type']).toBe('text/css; charset=utf-8');
      expect(css.text).toContain(':focus-visible');
      const js = await request(t.app).get('/settings/static/settings.js').expect(200);
      expect(js.headers['content-type']).toBe('text/javascript; charset=utf-8');
      expect(js.text).toContain('navigator.clipboard');
      await request(t.app).get('/settings/static/nope.js').expect(404);
    });
  });

  describe('changes', () => {
    it("refuses a form without the session CSRF token, or with another session's, and changes nothing", async () => {
      const { agent } = await signedIn(admin);
      const { csrf: ownersCsrf } = await signedIn(owner);
      const { count } = first(
        await db.admin`SELECT count(*)::int AS count FROM public.api_tokens WHERE workspace_id = ${ws.id}`,
      );
      for (const csrf of [undefined, 'x'.repeat(43), ownersCsrf]) {
        const res = await agent
          .post('/settings/api/tokens')
          .type('form')
          .send({ csrf, workspace: ws.id, scope: 'write', label: 'forged' });
        expect(res.status).toBe(403);
        expect(res.text).toContain('Form refused');
      }
      const off = await agent
        .post('/settings/api/switch')
        .type('form')
        .send({ workspace: ws.id, state: 'off', confirm: 'yes' });
      expect(off.status).toBe(403);
      const { count: after } = first(
        await db.admin`SELECT count(*)::int AS count FROM public.api_tokens WHERE workspace_id = ${ws.id}`,
      );
      expect(after).toBe(count);
      expect(first(await db.admin`SELECT api_enabled FROM public.workspaces WHERE id = ${ws.id}`).api_enabled).toBe(
        true,
      );
    });

    it("refuses a member's forged change with 403, and the database refuses it too", async () => {
      const { agent, csrf, secret } = await signedIn(member);
      const victim = first(
        await db.admin<
          { id: string }[]
        >`SELECT id FROM public.api_tokens WHERE workspace_id = ${ws.id} AND revoked_at IS NULL LIMIT 1`,
      );
      const create = await agent
        .post('/settings/api/tokens')
        .type('form')
        .send({ csrf, workspace: ws.id, scope: 'write', label: 'mine' });
      expect(create.status).toBe(403);
      const revoke = await agent
        .post(`/settings/api/tokens/${victim.id}/revoke`)
        .type('form')
        .send({ csrf, workspace: ws.id, confirm: 'yes' });
      expect(revoke.status).toBe(403);
      const off = await agent
        .post('/settings/api/switch')
        .type('form')
        .send({ csrf, workspace: ws.id, state: 'off', confirm: 'yes' });
      expect(off.status).toBe(403);
      expect(await db.admin`SELECT 1 FROM public.api_tokens WHERE label = 'mine'`).toHaveLength(0);
      expect(
        first(await db.admin`SELECT revoked_at FROM public.api_tokens WHERE id = ${victim.id}`).revoked_at,
      ).toBeNull();
      expect(first(await db.admin`SELECT api_enabled FROM public.workspaces WHERE id = ${ws.id}`).api_enabled).toBe(
        true,
      );
      // The server's own database role, with the member's session, is refused by the database.
      await expect(
        t.ctx.db`SELECT tally.settings_set_api_enabled(${hashOf(secret)}, ${ws.id}, false)`,
      ).rejects.toMatchObject({ code: '42501' });
      // …and cannot read the internal tables directly.
      await expect(t.ctx.db`SELECT * FROM tally.settings_sessions`).rejects.toMatchObject({ code: '42501' });
    });

    it('lets an admin create a token, shown once with a copy button and the exchange command, stored hashed and audited', async () => {
      const { agent, csrf } = await signedIn(admin);
      const posted = await agent
        .post('/settings/api/tokens')
        .type('form')
        .send({ csrf, workspace: ws.id, scope: 'write', label: 'laptop <script>' });
      // POST/redirect/GET: the token is on the page the redirect leads to, in no URL.
      expect(posted.status).toBe(303);
      expect(posted.headers.location).toBe(`/settings/api?workspace=${ws.id}`);
      const res = await agent.get(present(posted.headers.location));
      expect(res.status).toBe(200);
      expect(res.headers['cache-control']).toBe('no-store');
      const token = present(
        /id="new-token" class="mono" type="text" readonly value="(tally_ws_[0-9A-Za-z]{40})"/.exec(res.text)?.[1],
        'the new token',
      );
      expect(res.text).toContain('data-copy="new-token"');
      expect(res.text).toContain(`curl -X POST http://127.0.0.1:`);
      expect(res.text).toMatch(
        new RegExp(
          `curl -X POST http://127\\.0\\.0\\.1:\\d+/api/v1/token -H &quot;Authorization: Bearer ${token}&quot;`,
        ),
      );
      expect(res.text).toContain('laptop &lt;script&gt;');
      const row = first(
        await db.admin`SELECT id, scope, label, revoked_at FROM public.api_tokens WHERE token_hash = ${sha256(token)}`,
      );
      expect(row).toMatchObject({ scope: 'write', label: 'laptop <script>', revoked_at: null });
      const entries = await audit('token.create');
      expect(entries[entries.length - 1]).toEqual({
        actor: admin,
        details: { token_id: row.id, scope: 'write', label: 'laptop <script>' },
      });
      // A reload shows the page without the token, and mints nothing.
      const reload = await agent.get(present(posted.headers.location));
      expect(reload.text).not.toContain(token);
      expect(reload.text).not.toContain('id="new-token"');
      expect(await db.admin`SELECT 1 FROM public.api_tokens WHERE label = 'laptop <script>'`).toHaveLength(1);
      // The token works at the exchange, and it is never shown again.
      await request(t.app).post('/api/v1/token').set('Authorization', `Bearer ${token}`).expect(200);
      const again = await agent.get(`/settings/api?workspace=${ws.id}`).expect(200);
      expect(again.text).toContain('laptop &lt;script&gt;');
      expect(again.text).not.toContain(token);
    });

    it('refuses a bad scope or an over-long label with 400 and creates nothing', async () => {
      const { agent, csrf } = await signedIn(admin);
      const { count } = first(await db.admin`SELECT count(*)::int AS count FROM public.api_tokens`);
      const scope = await agent
        .post('/settings/api/tokens')
        .type('form')
        .send({ csrf, workspace: ws.id, scope: 'admin' });
      expect(scope.status).toBe(400);
      expect(scope.text).toContain('Scope must be read or write');
      const label = await agent
        .post('/settings/api/tokens')
        .type('form')
        .send({ csrf, workspace: ws.id, scope: 'read', label: 'x'.repeat(201) });
      expect(label.status).toBe(400);
      expect(first(await db.admin`SELECT count(*)::int AS count FROM public.api_tokens`).count).toBe(count);
    });

    it('revokes a token after a confirmation step, records it, and the token stops working', async () => {
      const victim = await tokenFor(db.admin, ws.id, 'read');
      const { agent, csrf } = await signedIn(owner);
      const confirm = await agent.get(`/settings/api/tokens/${victim.id}/revoke?workspace=${ws.id}`).expect(200);
      expect(confirm.text).toContain('Revoke token “test read”?');
      expect(confirm.text).toContain('name="confirm" value="yes"');
      // Without the confirmation the POST only leads to the confirmation page.
      const unconfirmed = await agent
        .post(`/settings/api/tokens/${victim.id}/revoke`)
        .type('form')
        .send({ csrf, workspace: ws.id })
        .expect(303);
      expect(unconfirmed.headers.location).toBe(`/settings/api/tokens/${victim.id}/revoke?workspace=${ws.id}`);
      expect(
        first(await db.admin`SELECT revoked_at FROM public.api_tokens WHERE id = ${victim.id}`).revoked_at,
      ).toBeNull();

      const done = await agent
        .post(`/settings/api/tokens/${victim.id}/revoke`)
        .type('form')
        .send({ csrf: csrfOf(confirm.text), workspace: ws.id, confirm: 'yes' })
        .expect(303);
      expect(done.headers.location).toBe(`/settings/api?workspace=${ws.id}&done=revoked`);
      expect(
        first(await db.admin`SELECT revoked_at FROM public.api_tokens WHERE id = ${victim.id}`).revoked_at,
      ).toBeInstanceOf(Date);
      const entries = await audit('token.revoke');
      expect(entries[entries.length - 1]).toEqual({ actor: owner, details: { token_id: victim.id } });
      const page = await agent.get(present(done.headers.location)).expect(200);
      expect(page.text).toContain('The token is revoked.');
      await request(t.app).post('/api/v1/token').set('Authorization', `Bearer ${victim.token}`).expect(401);
      // Revoking it again, or a token of another workspace, finds nothing.
      const twice = await agent
        .post(`/settings/api/tokens/${victim.id}/revoke`)
        .type('form')
        .send({ csrf, workspace: ws.id, confirm: 'yes' });
      expect(twice.status).toBe(404);
      const foreign = await tokenFor(db.admin, other.id, 'read');
      const cross = await agent
        .post(`/settings/api/tokens/${foreign.id}/revoke`)
        .type('form')
        .send({ csrf, workspace: ws.id, confirm: 'yes' });
      expect(cross.status).toBe(404);
      expect(
        first(await db.admin`SELECT revoked_at FROM public.api_tokens WHERE id = ${foreign.id}`).revoked_at,
      ).toBeNull();
    });

    it('turns the API switch off only after a confirmation, and on again; both recorded, both effective', async () => {
      const live = await tokenFor(db.admin, ws.id, 'read');
      const { agent, csrf } = await signedIn(admin);
      const unconfirmed = await agent
        .post('/settings/api/switch')
        .type('form')
        .send({ csrf, workspace: ws.id, state: 'off' })
        .expect(303);
      expect(unconfirmed.headers.location).toBe(`/settings/api/switch?workspace=${ws.id}`);
      expect(first(await db.admin`SELECT api_enabled FROM public.workspaces WHERE id = ${ws.id}`).api_enabled).toBe(
        true,
      );
      const confirm = await agent.get(present(unconfirmed.headers.location)).expect(200);
      expect(confirm.text).toContain('Turn API access off for Acme &lt;Travel&gt;');

      await agent
        .post('/settings/api/switch')
        .type('form')
        .send({ csrf, workspace: ws.id, state: 'off', confirm: 'yes' })
        .expect(303);
      expect(first(await db.admin`SELECT api_enabled FROM public.workspaces WHERE id = ${ws.id}`).api_enabled).toBe(
        false,
      );
      expect((await audit('api.off')).pop()).toEqual({ actor: admin, details: {} });
      await request(t.app).post('/api/v1/token').set('Authorization', `Bearer ${live.token}`).expect(403);
      const page = await agent.get(`/settings/api?workspace=${ws.id}&done=api-off`).expect(200);
      expect(page.text).toContain('API access is <strong>off</strong>');
      expect(page.text).toContain('name="state" value="on"');

      await agent.post('/settings/api/switch').type('form').send({ csrf, workspace: ws.id, state: 'on' }).expect(303);
      expect(first(await db.admin`SELECT api_enabled FROM public.workspaces WHERE id = ${ws.id}`).api_enabled).toBe(
        true,
      );
      expect((await audit('api.on')).pop()).toEqual({ actor: admin, details: {} });
      await request(t.app).post('/api/v1/token').set('Authorization', `Bearer ${live.token}`).expect(200);
    });
  });
});

describe('one-time passwords and password changes', () => {
  let db: TestDatabase;
  let t: TestApp;
  let wsId: string;
  const email = 'newcomer@example.com';
  let oneTime: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    wsId = (await createWorkspace(db.admin, 'Passwords', 'USD', 'test')).id;
    oneTime = (await addMember(db.admin, wsId, email, 'owner', undefined, 'test')).generatedPassword!;
    t = startTestApp(db.url);
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  async function signIn(password: string) {
    const agent = request.agent(t.app);
    const login = await agent.get('/settings/login').expect(200);
    const res = await agent
      .post('/settings/login')
      .type('form')
      .send({ csrf: csrfOf(login.text), email, password });
    return { agent, res };
  }

  it('sends a member with a one-time password to choose their own before anything else', async () => {
    const { agent, res } = await signIn(oneTime);
    expect(res.status).toBe(303);
    const api = await agent.get(`/settings/api?workspace=${wsId}`).expect(303);
    expect(api.headers.location).toBe('/settings/password');
    const form = await agent.get('/settings/password').expect(200);
    expect(form.text).toContain('Choose your password');
    // Signed in with the one-time password a moment ago: the form does not ask for it again.
    expect(form.text).not.toContain('name="current"');
    expect(form.text).toContain('name="new"');
    const create = await agent
      .post('/settings/api/tokens')
      .type('form')
      .send({ csrf: csrfOf(form.text), workspace: wsId, scope: 'write' });
    expect(create.status).toBe(403);
    expect(await db.admin`SELECT 1 FROM public.api_tokens WHERE workspace_id = ${wsId}`).toHaveLength(0);
  });

  it('refuses a wrong current password, a mismatch and a short one, changing nothing', async () => {
    const { agent } = await signIn(oneTime);
    const csrf = csrfOf((await agent.get('/settings/password').expect(200)).text);
    const before = first(await db.admin`SELECT password_hash FROM public.user_credentials WHERE email = ${email}`);
    const cases: [Record<string, string>, number, string][] = [
      [{ new: 'a brand new passphrase', repeat: 'a brand new passphrase!' }, 400, 'The two new passwords differ.'],
      [{ new: 'short', repeat: 'short' }, 400, 'A password has at least 12 characters.'],
      [{ new: oneTime, repeat: oneTime }, 400, 'The new password must differ from the one-time password.'],
    ];
    for (const [fields, status, message] of cases) {
      const res = await agent
        .post('/settings/password')
        .type('form')
        .send({ csrf, ...fields });
      expect(res.status).toBe(status);
      expect(res.text).toContain(message);
    }
    const forged = await agent
      .post('/settings/password')
      .type('form')
      .send({ current: oneTime, new: 'a brand new passphrase', repeat: 'a brand new passphrase' });
    expect(forged.status).toBe(403);
    const after = first(await db.admin`SELECT password_hash FROM public.user_credentials WHERE email = ${email}`);
    expect(after.password_hash).toBe(before.password_hash);
  });

  it('changes the password: the new one signs in, the old one no longer does, other sessions end, and it is recorded', async () => {
    const other = await signIn(oneTime);
    const otherSecret = cookieValue(cookieOf(other.res, 'tally_session')!);
    const { agent, res } = await signIn(oneTime);
    const mine = cookieValue(cookieOf(res, 'tally_session')!);
    const csrf = csrfOf((await agent.get('/settings/password').expect(200)).text);
    const done = await agent
      .post('/settings/password')
      .type('form')
      .send({ csrf, new: 'my very own passphrase', repeat: 'my very own passphrase' })
      .expect(303);
    expect(done.headers.location).toBe('/settings/api?done=password');
    const page = await agent.get(present(done.headers.location)).expect(200);
    expect(page.text).toContain('Your password is changed.');
    const row = first(await db.admin`SELECT password_temporary FROM public.user_credentials WHERE email = ${email}`);
    expect(row.password_temporary).toBe(false);
    expect(
      await db.admin`SELECT 1 FROM tally.settings_sessions WHERE token_hash = ${hashOf(otherSecret)}`,
    ).toHaveLength(0);
    expect(await db.admin`SELECT 1 FROM tally.settings_sessions WHERE token_hash = ${hashOf(mine)}`).toHaveLength(1);
    const [entry] = await db.admin`SELECT workspace_id, actor FROM tally.audit_log WHERE action = 'member.password'`;
    expect(entry).toEqual({ workspace_id: null, actor: email });
    expect((await signIn(oneTime)).res.status).toBe(401);
    expect((await signIn('my very own passphrase')).res.status).toBe(303);
    // With a password of their own, a change asks for it, and refuses a wrong one.
    const form = await agent.get('/settings/password').expect(200);
    expect(form.text).toContain('<label for="current">Current password</label>');
    const wrong = await agent
      .post('/settings/password')
      .type('form')
      .send({
        csrf: csrfOf(form.text),
        current: 'not my passphrase',
        new: 'another passphrase here',
        repeat: 'another passphrase here',
      });
    expect(wrong.status).toBe(401);
    expect(wrong.text).toContain('Your current password is not correct.');
  });
});

describe('failed sign-in limits', () => {
  let db: TestDatabase;
  let a: TestApp;
  let b: TestApp;
  let wsId: string;
  const limits = { TALLY_SIGN_IN_FAILURES_PER_ACCOUNT: '3', TALLY_SIGN_IN_FAILURES_PER_ADDRESS: '6' };

  beforeAll(async () => {
    db = await createTestDatabase();
    wsId = (await createWorkspace(db.admin, 'Limits', 'USD', 'test')).id;
    for (const who of ['target', 'bystander', 'third'])
      await addMember(db.admin, wsId, `${who}@example.com`, 'member', PASSWORD, 'test');
    // Two servers on one database: the counters are shared, as between two processes. Behind a
    // trusted proxy, so that tests can come from several client addresses.
    a = startTestApp(db.url, { ...limits, TALLY_TRUST_PROXY: 'true' });
    b = startTestApp(db.url, { ...limits, TALLY_TRUST_PROXY: 'true' });
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    await db.drop();
  });

  async function attempt(app: TestApp, email: string, password: string, headers: Record<string, string> = {}) {
    const agent = request.agent(app.app);
    const login = await agent.get('/settings/login').set(headers).expect(200);
    return agent
      .post('/settings/login')
      .set(headers)
      .type('form')
      .send({ csrf: csrfOf(login.text), email, password });
  }

  const ATTACKER = '203.0.113.7';
  const MEMBER = '198.51.100.9';
  const from = (address: string) => ({ 'X-Forwarded-For': address });
  const liftDelays = () => db.admin`UPDATE tally.sign_in_failures SET blocked_until = NULL`;

  it('an attacker elsewhere cannot lock the member out, and is slowed down with growing delays', async () => {
    await db.admin`DELETE FROM tally.sign_in_failures`;
    // The attacker fails ten times on the member's email (lifting each delay by hand, as if it
    // had waited it), across both servers.
    for (let i = 0; i < 10; i++) {
      expect((await attempt(i % 2 ? a : b, 'target@example.com', 'wrong', from(ATTACKER))).status).toBe(401);
      if (i < 9) await liftDelays();
    }
    const pair = first(
      await db.admin`SELECT failures FROM tally.sign_in_failures WHERE key = ${`pair:${ATTACKER} target@example.com`}`,
    );
    expect(pair.failures).toBe(10);
    // The attacker's next try, even with the right password, waits: 2^(10-3) s after the tenth
    // failure (it was 1 s after the third).
    const slowed = await attempt(a, 'target@example.com', PASSWORD, from(ATTACKER));
    expect(slowed.status).toBe(429);
    expect(slowed.text).toContain('Too many failed sign-ins');
    expect(cookieOf(slowed, 'tally_session')).toBeUndefined();
    expect(Number(slowed.headers['retry-after'])).toBeGreaterThan(64);
    expect(Number(slowed.headers['retry-after'])).toBeLessThanOrEqual(128);
    // Meanwhile the member signs in from their own address, on either server.
    expect((await attempt(b, 'target@example.com', PASSWORD, from(MEMBER))).status).toBe(303);
    expect((await attempt(a, 'target@example.com', PASSWORD, from(MEMBER))).status).toBe(303);
    // A success clears the member's own count from that address, not the attacker's.
    expect(
      await db.admin`SELECT 1 FROM tally.sign_in_failures WHERE key = ${`pair:${MEMBER} target@example.com`}`,
    ).toHaveLength(0);
    expect((await attempt(b, 'target@example.com', PASSWORD, from(ATTACKER))).status).toBe(429);
  });

  it('throttles an address across emails, known or not, and only that address', async () => {
    await db.admin`DELETE FROM tally.sign_in_failures`;
    for (let i = 0; i < 6; i++)
      expect((await attempt(i % 2 ? a : b, `guess${i}@example.com`, 'wrong', from(ATTACKER))).status).toBe(401);
    const blocked = await attempt(a, 'third@example.com', PASSWORD, from(ATTACKER));
    expect(blocked.status).toBe(429);
    expect(blocked.headers['retry-after']).toMatch(/^\d+$/);
    const rows = await db.admin<
      { key: string; failures: number }[]
    >`SELECT key, failures FROM tally.sign_in_failures WHERE key LIKE 'addr:%'`;
    expect(rows).toEqual([{ key: `addr:${ATTACKER}`, failures: 6 }]);
    expect((await attempt(b, 'third@example.com', PASSWORD, from(MEMBER))).status).toBe(303);
  });

  it('counts an IPv6 client by its /56 network: guesses from many addresses of one /64 are one address', async () => {
    await db.admin`DELETE FROM tally.sign_in_failures`;
    // One client holds a whole /64 (or /56) and can send each guess from an address of its own.
    const inNetwork = (i: number) => `2001:db8:7:${(0x10 + (i % 2)).toString(16)}::${(i + 1).toString(16)}`;
    for (let i = 0; i < 6; i++)
      expect((await attempt(i % 2 ? a : b, `guess${i}@example.com`, 'wrong', from(inNetwork(i)))).status).toBe(401);
    const blocked = await attempt(a, 'third@example.com', PASSWORD, from('2001:db8:7:ff:abcd::99'));
    expect(blocked.status).toBe(429);
    expect((await db.admin`SELECT key FROM tally.sign_in_failures WHERE key LIKE 'addr:%'`).map((r) => r.key)).toEqual([
      'addr:2001:db8:7::/56',
    ]);
    // Another network is another client.
    expect((await attempt(b, 'third@example.com', PASSWORD, from('2001:db8:8::1'))).status).toBe(303);
  });

  it('answers an unknown email and a wrong password alike, and counts both', async () => {
    await db.admin`DELETE FROM tally.sign_in_failures`;
    const unknown = await attempt(a, 'nobody@example.com', 'wrong', from(MEMBER));
    const wrong = await attempt(a, 'bystander@example.com', 'wrong', from(MEMBER));
    expect(unknown.status).toBe(401);
    expect(wrong.status).toBe(401);
    const errorOf = (text: string) => /<p class="error"[^>]*>([^<]*)</.exec(text)?.[1] ?? text.length;
    expect(errorOf(unknown.text)).toEqual(errorOf(wrong.text));
    expect((await db.admin`SELECT key FROM tally.sign_in_failures ORDER BY key`).map((r) => r.key)).toEqual([
      `addr:${MEMBER}`,
      `pair:${MEMBER} bystander@example.com`,
      `pair:${MEMBER} nobody@example.com`,
    ]);
  });
});
