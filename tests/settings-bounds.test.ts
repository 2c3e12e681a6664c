import request from 'supertest';
import type { Response } from 'supertest';
import { addMember } from '../gateway/admin/members.js';
import { createToken } from '../gateway/admin/tokens.js';
import { sha256 } from '../gateway/secrets.js';
import { ApiError } from '../gateway/errors.js';
import { startTestApp, type TestApp } from './harness/app.js';
import { tearDown } from './harness/suite.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { tokenFor, workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { csrfOf, first, present } from './harness/present.js';
import { waitFor } from './harness/wait.js';

// What a settings user can grow, bounded per workspace: its active tokens (50, the 51st refused),
// its revoked tokens (the 50 most recently revoked kept) and its audit log (the 1,000 newest
// entries kept). Each was measured to grow without end: 300 tokens minted through the page,
// nothing refused, and 402 audit rows after 300 mints and 100 switches.

const PASSWORD = 'correct horse battery staple';
const ACTIVE_TOKENS = 50; // ACTIVE_TOKENS_PER_WORKSPACE, gateway/admin/tokens.ts
const REVOKED_TOKENS = 50; // revoked_per_workspace, tally.revoke_token
const AUDIT_ENTRIES = 1000; // kept, tally.audit: per workspace, and per actor of entries of no workspace
const REFUSAL = 'A workspace has at most 50 active tokens. Revoke a token to make room for a new one.';

describe('settings bounds per workspace', () => {
  let db: TestDatabase;
  let t: TestApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = startTestApp(db.url, restEnv());
  });
  afterAll(() => tearDown(db, t));
  beforeEach(() => db.admin`DELETE FROM tally.rate_limits`);

  /** A fresh workspace with the owner signed in: the agent and the page's CSRF token. */
  async function ownedWorkspace(): Promise<{
    ws: WorkspaceFixture;
    agent: ReturnType<typeof request.agent>;
    csrf: string;
  }> {
    const ws = await workspaceWithData(db.admin);
    const owner = `owner-${ws.id}@example.com`;
    await addMember(db.admin, ws.id, owner, 'owner', PASSWORD, 'test');
    const agent = request.agent(t.app);
    const login = await agent.get('/settings/login').expect(200);
    await agent
      .post('/settings/login')
      .type('form')
      .send({ csrf: csrfOf(login.text), email: owner, password: PASSWORD })
      .expect(303);
    const page = await agent.get(`/settings/api?workspace=${ws.id}`).expect(200);
    return { ws, agent, csrf: csrfOf(page.text) };
  }

  const count = async (query: Promise<{ n: number }[]>): Promise<number> => first(await query).n;
  const activeTokens = (wsId: string) =>
    count(
      db.admin`SELECT count(*)::int AS n FROM public.api_tokens WHERE workspace_id = ${wsId} AND revoked_at IS NULL`,
    );
  const revokedTokens = (wsId: string) =>
    count(
      db.admin`SELECT count(*)::int AS n FROM public.api_tokens WHERE workspace_id = ${wsId} AND revoked_at IS NOT NULL`,
    );
  const auditEntries = (wsId: string) =>
    count(db.admin`SELECT count(*)::int AS n FROM tally.audit_log WHERE workspace_id = ${wsId}`);

  const mint = (
    agent: ReturnType<typeof request.agent>,
    csrf: string,
    wsId: string,
    label: string,
  ): Promise<Response> =>
    agent.post('/settings/api/tokens').type('form').send({ csrf, workspace: wsId, scope: 'read', label });
  const revoke = (agent: ReturnType<typeof request.agent>, csrf: string, wsId: string, id: string) =>
    agent
      .post(`/settings/api/tokens/${id}/revoke`)
      .type('form')
      .send({ csrf, workspace: wsId, confirm: 'yes' })
      .expect(303);

  it('refuses a 51st active token on the page (409, nothing written), on the CLI too, and one revoked makes room', async () => {
    const { ws, agent, csrf } = await ownedWorkspace();
    const creates = () =>
      count(
        db.admin`SELECT count(*)::int AS n FROM tally.audit_log WHERE workspace_id = ${ws.id} AND action = 'token.create'`,
      );
    for (let i = 0; i < ACTIVE_TOKENS; i += 1) expect((await mint(agent, csrf, ws.id, `client ${i}`)).status).toBe(303);
    expect(await activeTokens(ws.id)).toBe(ACTIVE_TOKENS);

    const refused = await mint(agent, csrf, ws.id, 'one too many');
    expect(refused.status).toBe(409);
    expect(refused.text).toContain(`<p class="error" role="alert">${REFUSAL}</p>`);
    expect(refused.text).toContain('client 49'); // the page with its tokens, to revoke one
    expect(String(refused.headers['set-cookie'] ?? '')).not.toContain('tally_created=');
    expect(await activeTokens(ws.id)).toBe(ACTIVE_TOKENS);
    expect(await count(db.admin`SELECT count(*)::int AS n FROM public.api_tokens WHERE label = 'one too many'`)).toBe(
      0,
    );
    expect(await creates()).toBe(ACTIVE_TOKENS);

    // The CLI's path is the same database function: refused as TLY205.
    const cli = await createToken(db.admin, ws.id, 'read', 'from the CLI', 'test').catch((err: unknown) => err);
    expect(cli).toBeInstanceOf(ApiError);
    expect((cli as ApiError).body()).toEqual({
      code: 'TLY205',
      message: 'The workspace has 50 active tokens, the most it may have',
      details: REFUSAL,
      hint: 'Revoke a token to make room for a new one',
    });
    expect((cli as ApiError).status).toBe(409);

    // Revoking one makes room for exactly one.
    const [oldest] = await db.admin<{ id: string }[]>`
      SELECT id FROM public.api_tokens WHERE workspace_id = ${ws.id} ORDER BY created_at LIMIT 1`;
    await revoke(agent, csrf, ws.id, present(oldest, 'a token').id);
    expect((await mint(agent, csrf, ws.id, 'in its place')).status).toBe(303);
    expect((await mint(agent, csrf, ws.id, 'one too many again')).status).toBe(409);
    expect(await activeTokens(ws.id)).toBe(ACTIVE_TOKENS);
    expect(await creates()).toBe(ACTIVE_TOKENS + 1);
  });

  it('decides concurrent mints one after the other: of two racing for the last place, the second is refused', async () => {
    const ws = await workspaceWithData(db.admin);
    await db.admin`
      INSERT INTO public.api_tokens (workspace_id, scope, label, token_hash)
      SELECT ${ws.id}, 'read', 'prepared ' || i, sha256(convert_to(${ws.id} || i, 'UTF8'))
        FROM generate_series(1, ${ACTIVE_TOKENS - 1}) i`;
    const create = (sql: typeof db.admin, label: string) =>
      sql`SELECT tally.create_token(${ws.id}, 'read', ${label}, ${sha256(`${ws.id} ${label}`)}, 'test')`;
    let release = (): void => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    let minted = (): void => {};
    const firstMinted = new Promise<void>((resolve) => (minted = resolve));
    // The first mint takes the last place and holds its transaction open.
    const firstTx = db.admin.begin(async (sql) => {
      await create(sql as unknown as typeof db.admin, 'first');
      minted();
      await held;
    });
    await firstMinted;
    let settled = false;
    const second = create(db.admin, 'second').then(
      () => 'made',
      (err: { code?: string }) => err.code,
    );
    void second.finally(() => (settled = true));
    // It waits for the first's lock of the workspace (without one, it would not wait, and pass).
    await waitFor(
      async () =>
        settled ||
        (await count(db.admin`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`)) >
          0,
      'the second mint to wait or finish',
    );
    release();
    await firstTx;
    expect(await second).toBe('54000');
    expect(await activeTokens(ws.id)).toBe(ACTIVE_TOKENS);
  });

  it('keeps the 50 most recently revoked tokens: one more revoked deletes the oldest, whose secret and access token stay refused', async () => {
    const { ws, agent, csrf } = await ownedWorkspace();
    // A token that wrote a change, then was revoked first of all.
    const gone = await tokenFor(db.admin, ws.id, 'write');
    const exchanged = await request(t.app).post('/api/v1/token').set('x-api-token', gone.token).expect(200);
    const jwt = exchanged.body.access_token as string;
    await request(t.app)
      .post('/rest/v1/personal_transactions')
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}`, Prefer: 'return=minimal' })
      .send({ name: 'by a token revoked long ago', amount: 1, category_id: 'other', method_id: 'cash' })
      .expect(201);
    await revoke(agent, csrf, ws.id, gone.id);
    // 50 more revoked after it, prepared in the database; one active token to revoke through the page.
    await db.admin`
      INSERT INTO public.api_tokens (workspace_id, scope, label, token_hash, revoked_at)
      SELECT ${ws.id}, 'read', 'revoked ' || i, sha256(convert_to(${ws.id} || i, 'UTF8')),
             (SELECT g.revoked_at FROM public.api_tokens g WHERE g.id = ${gone.id}) + i * interval '1 microsecond'
        FROM generate_series(1, ${REVOKED_TOKENS}) i`;
    const last = await tokenFor(db.admin, ws.id, 'read');
    expect(await revokedTokens(ws.id)).toBe(REVOKED_TOKENS + 1);

    await revoke(agent, csrf, ws.id, last.id);
    expect(await revokedTokens(ws.id)).toBe(REVOKED_TOKENS);
    const kept = await db.admin<{ label: string }[]>`
      SELECT label FROM public.api_tokens WHERE workspace_id = ${ws.id} AND revoked_at IS NOT NULL ORDER BY revoked_at, id`;
    // The first revoked (gone) and the oldest prepared one are deleted; the newest 50 kept.
    expect(kept.map((k) => k.label)).toEqual([
      ...Array.from({ length: REVOKED_TOKENS - 1 }, (_, i) => `revoked ${i + 2}`),
      'test read',
    ]);
    expect(await count(db.admin`SELECT count(*)::int AS n FROM public.api_tokens WHERE id = ${gone.id}`)).toBe(0);

    // Its secret and its access token are refused as a revoked token's are.
    await request(t.app).post('/api/v1/token').set('x-api-token', gone.token).expect(401);
    const read = await request(t.app)
      .get('/rest/v1/personal_transactions?select=id')
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}` });
    expect(read.status).toBe(401);
    // Its change is still in the activity log, with its token's id and label.
    expect(
      await db.admin`SELECT token_id, token_name FROM public.activity
                      WHERE workspace_id = ${ws.id} AND after ->> 'name' = 'by a token revoked long ago'`,
    ).toEqual([{ token_id: gone.id, token_name: 'test write' }]);
    // And the page still opens, listing what is kept.
    const page = await agent.get(`/settings/api?workspace=${ws.id}`).expect(200);
    expect(page.text).toContain('revoked 50');
  });

  it("keeps a workspace's 1,000 newest audit entries: each one more deletes the oldest, no other workspace's", async () => {
    const { ws, agent, csrf } = await ownedWorkspace();
    const { ws: other } = await ownedWorkspace();
    // A full log prepared in the database, older than anything the page records.
    const before = await auditEntries(ws.id);
    await db.admin`
      INSERT INTO tally.audit_log (workspace_id, actor, action, at)
      SELECT ${ws.id}, 'test', 'prepared', now() - interval '1 day' FROM generate_series(1, ${AUDIT_ENTRIES - before})`;
    const otherBefore = await auditEntries(other.id);
    expect(await auditEntries(ws.id)).toBe(AUDIT_ENTRIES);
    const oldest = await db.admin<{ id: string }[]>`
      SELECT id FROM tally.audit_log WHERE workspace_id = ${ws.id} ORDER BY id LIMIT 3`;

    await agent
      .post('/settings/api/switch')
      .type('form')
      .send({ csrf, workspace: ws.id, state: 'off', confirm: 'yes' })
      .expect(303);
    await agent.post('/settings/api/switch').type('form').send({ csrf, workspace: ws.id, state: 'on' }).expect(303);
    expect((await mint(agent, csrf, ws.id, 'audited')).status).toBe(303);

    expect(await auditEntries(ws.id)).toBe(AUDIT_ENTRIES);
    const newest = await db.admin<{ action: string }[]>`
      SELECT action FROM tally.audit_log WHERE workspace_id = ${ws.id} ORDER BY id DESC LIMIT 3`;
    expect(newest.map((e) => e.action)).toEqual(['token.create', 'api.on', 'api.off']);
    const ids = oldest.map((o) => o.id);
    expect(await db.admin`SELECT id FROM tally.audit_log WHERE id = ANY(${ids}::bigint[])`).toEqual([]);
    expect(await auditEntries(other.id)).toBe(otherBefore);
  });

  it("keeps a member's 1,000 newest audit entries of no workspace: a password change deletes the oldest, not another actor's", async () => {
    const { ws, agent } = await ownedWorkspace();
    const owner = `owner-${ws.id}@example.com`;
    const ofActor = (actor: string) =>
      count(db.admin`SELECT count(*)::int AS n FROM tally.audit_log WHERE workspace_id IS NULL AND actor = ${actor}`);
    // A full log of this member's password changes, and an operator's entry, older than both.
    await db.admin`INSERT INTO tally.audit_log (workspace_id, actor, action, at) VALUES (NULL, 'operator', 'key.create', now() - interval '2 days')`;
    await db.admin`
      INSERT INTO tally.audit_log (workspace_id, actor, action, at)
      SELECT NULL, ${owner}, 'prepared', now() - interval '1 day' FROM generate_series(1, ${AUDIT_ENTRIES})`;
    const operatorBefore = await ofActor('operator');

    const csrf = csrfOf((await agent.get('/settings/password').expect(200)).text);
    await agent
      .post('/settings/password')
      .type('form')
      .send({ csrf, current: PASSWORD, new: 'another long passphrase', repeat: 'another long passphrase' })
      .expect(303);

    expect(await ofActor(owner)).toBe(AUDIT_ENTRIES);
    const newest = first(
      await db.admin<{ action: string }[]>`
        SELECT action FROM tally.audit_log WHERE workspace_id IS NULL AND actor = ${owner} ORDER BY id DESC LIMIT 1`,
    );
    expect(newest.action).toBe('member.password');
    expect(await ofActor('operator')).toBe(operatorBefore);
  });
});
