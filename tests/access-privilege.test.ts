import request from 'supertest';
import { SignJWT } from 'jose';
import postgres, { type Sql } from 'postgres';
import { loadConfig } from '../gateway/config.js';

import { migrate } from '../gateway/db/migrate.js';
import { preflight } from '../gateway/db/preflight.js';
import { accessToken, signJwt, startTestApp, TEST_JWT_SECRET, type TestApp } from './harness/app.js';
import { createTestDatabase, serverUrl, type TestDatabase } from './harness/db.js';
import { TENANT_TABLES, tokenFor, workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { first } from './harness/present.js';

// Least privilege: the server's database login can become the API roles and nothing else, a
// JWT signed with the real secret cannot name another role or skip the workspace token behind
// it, and a freshly migrated database isolates workspaces before any policy file is applied.

describe('least privilege', () => {
  let db: TestDatabase;
  let t: TestApp;
  let ws: WorkspaceFixture;
  let other: WorkspaceFixture;
  let readToken: { id: string; token: string };
  let writeToken: { id: string; token: string };

  beforeAll(async () => {
    db = await createTestDatabase();
    ws = await workspaceWithData(db.admin);
    other = await workspaceWithData(db.admin);
    readToken = await tokenFor(db.admin, ws.id, 'read');
    writeToken = await tokenFor(db.admin, ws.id, 'write');
    t = startTestApp(db.url, restEnv());
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });
  beforeEach(() => db.admin`DELETE FROM tally.rate_limits`);

  const get = (path: string, jwt: string) =>
    request(t.app)
      .get(path)
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}` });
  const post = (path: string, jwt: string, body: unknown) =>
    request(t.app)
      .post(path)
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}`, Prefer: 'return=minimal' })
      .send(body as object);
  const tokenCount = async () =>
    first(await db.admin<{ n: number }[]>`SELECT count(*)::int AS n FROM public.api_tokens`).n;
  const expenseCount = async () =>
    first(await db.admin<{ n: number }[]>`SELECT count(*)::int AS n FROM public.personal_transactions`).n;

  describe('a JWT signed with the real secret', () => {
    it.each(['postgres', 'authenticator', 'pg_read_all_data', 'pg_write_all_data'])(
      'naming the role %s is refused with 401 and reads or writes nothing',
      async (role) => {
        const jwt = await signJwt({ role, workspace_id: ws.id, sub: writeToken.id, scope: 'write' });
        const res = await get('/rest/v1/api_tokens?select=id,token_hash', jwt);
        expect(res.status).toBe(401);
        expect(res.body).toEqual({
          code: 'PGRST303',
          message: 'JWT role is not an API role',
          details: null,
          hint: expect.any(String),
        });
        expect(res.headers['www-authenticate']).toContain('invalid_token');
        const before = await tokenCount();
        const backdoor = await post('/rest/v1/api_tokens', jwt, {
          workspace_id: other.id,
          scope: 'write',
          token_hash: '\\x' + '00'.repeat(32),
        });
        expect(backdoor.status).toBe(401);
        expect(await tokenCount()).toBe(before);
        // The same on the wrapper.
        expect((await request(t.app).get('/api/v1/expenses').set('Authorization', `Bearer ${jwt}`)).status).toBe(401);
      },
    );

    it('with an API role but no sub is refused with 401 (no workspace token to check)', async () => {
      const jwt = await signJwt({ role: 'api_read', workspace_id: ws.id });
      const res = await get('/rest/v1/personal_transactions?select=id', jwt);
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ code: 'PT401', message: 'The access token does not name a workspace token' });
    });

    it("with a read token's sub and the role api_write is refused, and nothing is written", async () => {
      const before = await expenseCount();
      const jwt = await signJwt({ role: 'api_write', workspace_id: ws.id, sub: readToken.id, scope: 'write' });
      const res = await post('/rest/v1/personal_transactions', jwt, {
        name: 'escalated',
        amount: 1,
        category_id: 'other',
        method_id: 'cash',
      });
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ code: 'PT401', message: expect.stringContaining('scope') });
      expect(await expenseCount()).toBe(before);
      // The exchanged token of a write token does write: the check is on the scope, not the role.
      const good = await accessToken({ role: 'api_write', workspace_id: ws.id, scope: 'write', sub: writeToken.id });
      await post('/rest/v1/personal_transactions', good, {
        name: 'allowed',
        amount: 1,
        category_id: 'other',
        method_id: 'cash',
      }).expect(201);
      expect(await expenseCount()).toBe(before + 1);
    });

    it('without exp is refused with 401', async () => {
      const jwt = await new SignJWT({ role: 'api_read', workspace_id: ws.id, sub: readToken.id, scope: 'read' })
        .setProtectedHeader({ alg: 'HS256' })
        .setIssuedAt()
        .sign(new TextEncoder().encode(TEST_JWT_SECRET));
      const res = await get('/rest/v1/personal_transactions?select=id', jwt);
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ code: 'PGRST303', message: 'JWT claim "exp" is missing' });
    });

    it('is checked in the database itself: claims without sub or exp fail the pre-request check on any surface', async () => {
      const pool = serverLogin(db.url);
      try {
        const check = (role: string, claims: Record<string, unknown>) =>
          pool.begin(async (tx) => {
            await tx`SELECT set_config('role', ${role}, true), set_config('request.jwt.claims', ${JSON.stringify({ role, ...claims })}, true)`;
            await tx`SELECT tally.check_request()`;
          });
        const exp = Math.floor(Date.now() / 1000) + 60;
        await expect(check('api_read', { workspace_id: ws.id, exp })).rejects.toMatchObject({ code: 'PT401' });
        await expect(check('api_read', { workspace_id: ws.id, sub: readToken.id })).rejects.toMatchObject({
          code: 'PT401',
        });
        await expect(check('api_write', { workspace_id: ws.id, sub: readToken.id, exp })).rejects.toMatchObject({
          code: 'PT401',
        });
        await expect(check('api_read', { workspace_id: other.id, sub: readToken.id, exp })).rejects.toMatchObject({
          code: 'PT401',
        });
        await check('api_read', { workspace_id: ws.id, sub: readToken.id, exp });
        await check('api_write', { workspace_id: ws.id, sub: writeToken.id, exp });
        await check('anon', {});
        // No claims at all is the server's own read of the lookup lists: allowed, and it sees no tenant row.
        const own = await pool.begin(async (tx) => {
          await tx`SELECT set_config('role', 'api_read', true), set_config('request.jwt.claims', '{}', true)`;
          await tx`SELECT tally.check_request()`;
          return tx`SELECT (SELECT count(*)::int FROM public.personal_transactions) AS tenant_rows, (SELECT count(*)::int FROM public.categories) AS categories`;
        });
        expect(first(own).tenant_rows).toBe(0);
        expect(first(own).categories).toBeGreaterThan(0);
      } finally {
        await pool.end({ timeout: 5 });
      }
    });
  });

  describe("the server's database login", () => {
    let pool: Sql;
    beforeAll(() => {
      pool = serverLogin(db.url);
    });
    afterAll(() => pool.end({ timeout: 5 }));

    it('is authenticator, not a superuser, and cannot become the owner', async () => {
      const [me] = await pool<
        { session_user: string; current_user: string; rolsuper: boolean; rolbypassrls: boolean; rolinherit: boolean }[]
      >`
        SELECT session_user, current_user, r.rolsuper, r.rolbypassrls, r.rolinherit FROM pg_roles r WHERE r.rolname = session_user`;
      expect(me).toEqual({
        session_user: 'authenticator',
        current_user: 'authenticator',
        rolsuper: false,
        rolbypassrls: false,
        rolinherit: false,
      });
      const memberOf = await pool<{ rolname: string }[]>`
        SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
         WHERE m.member = (SELECT oid FROM pg_roles WHERE rolname = session_user) ORDER BY 1`;
      // The API roles (other test files add roles of their own fixture schema, cluster-wide),
      // and no role that could step around them.
      expect(memberOf.map((r) => r.rolname)).toEqual(expect.arrayContaining(['anon', 'api_read', 'api_write']));
      const powerful = await pool`
        SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
         WHERE m.member = (SELECT oid FROM pg_roles WHERE rolname = session_user) AND (g.rolsuper OR g.rolbypassrls OR g.rolcreaterole OR g.rolname LIKE 'pg\\_%')`;
      expect(powerful).toEqual([]);
      const owned = await pool<
        { n: number }[]
      >`SELECT count(*)::int AS n FROM pg_class WHERE relowner = (SELECT oid FROM pg_roles WHERE rolname = session_user)`;
      expect(first(owned).n).toBe(0);
      for (const role of ['postgres', 'pg_read_all_data']) {
        await expect(pool.begin((tx) => tx`SELECT set_config('role', ${role}, true)`)).rejects.toMatchObject({
          code: '42501',
        });
      }
      await expect(pool`SELECT * FROM public.api_tokens`).rejects.toMatchObject({ code: '42501' });
    });

    it('lets the API roles execute only the functions of schema tally that requests need', async () => {
      const executable = await db.admin<{ role: string; fn: string }[]>`
        SELECT r.role, p.proname AS fn
          FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace, unnest(ARRAY['anon', 'api_read', 'api_write']) r(role)
         WHERE n.nspname = 'tally' AND has_function_privilege(r.role, p.oid, 'EXECUTE')
         ORDER BY 1, 2`;
      const expected = (role: string, fns: string[]) => fns.map((fn) => ({ role, fn }));
      // local_shard: every role's, as the category trigger runs as whoever writes; it names a
      // shard of Citus's catalog (readable by every role) or nothing.
      // changed_fields: a pure function of two rows (the activity trigger's and the undo's).
      // report_changes: every request's last statement names the changes of its own request.
      const everyRole = ['changed_fields', 'check_request', 'current_workspace_id', 'jwt_claims', 'local_shard'];
      // The steps of public.undo_changes, which runs as its caller (SECURITY INVOKER), so each
      // reads and writes under the caller's role and row-level security, nothing more.
      const undoSteps = ['change_of', 'lock_record', 'record_of', 'refuse_cascade', 'undo_all', 'undo_blocker'];
      const undo = [...undoSteps, 'undo_range', 'undo_step', 'undo_steps'];
      expect(executable).toEqual([
        ...expected('anon', [...everyRole, 'report_changes'].sort()),
        ...expected('api_read', [...everyRole, 'current_workspace_currency', 'report_changes'].sort()),
        ...expected(
          'api_write',
          [
            ...everyRole,
            ...undo,
            'check_category_domain',
            // A write counts what it adds to its workspace's log and keys, against their budgets.
            'add_usage',
            'count_activity',
            'count_keys',
            'current_workspace_currency',
            // A keyed create claims its key and stores its answer, for the workspace of its claims only.
            'idempotency_claim',
            'idempotency_save',
            'refuse',
            'report_changes',
          ].sort(),
        ),
      ]);
      // None of the undo's steps runs with more rights than its caller.
      const definers = await db.admin<{ fn: string }[]>`
        SELECT p.proname AS fn FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname = 'tally' AND p.prosecdef AND p.proname = ANY(${[...undo, 'changed_fields', 'report_changes']})`;
      expect(definers).toEqual([]);
      for (const role of ['anon', 'api_read', 'api_write']) {
        for (const call of [
          pool.begin(async (tx) => {
            await tx`SELECT set_config('role', ${role}, true)`;
            await tx`SELECT tally.create_token(${other.id}::uuid, 'write', 'backdoor', ${Buffer.alloc(32)}, 'attacker')`;
          }),
          pool.begin(async (tx) => {
            await tx`SELECT set_config('role', ${role}, true)`;
            await tx`SELECT tally.set_api_enabled(${other.id}::uuid, false, 'attacker')`;
          }),
        ]) {
          await expect(call).rejects.toMatchObject({ code: '42501' });
        }
      }
      // authenticator itself cannot either (it calls only the functions granted to it by name).
      await expect(pool`SELECT tally.revoke_token(${writeToken.id}::uuid, NULL, 'attacker')`).rejects.toMatchObject({
        code: '42501',
      });
      await expect(pool`SELECT tally.set_login_password('authenticator', 'x')`).rejects.toMatchObject({
        code: '42501',
      });
    });
  });

  describe('serve refuses to start', () => {
    // Roles are cluster-wide: the blog fixture of other files grants its roles to authenticator too.
    const config = loadConfig({
      TALLY_JWT_SECRET: TEST_JWT_SECRET,
      TALLY_DB_API_ROLES: 'anon,api_read,api_write,blog_anon,blog_user',
    });

    it('passes on a migrated database with its own login', async () => {
      const pool = serverLogin(db.url);
      try {
        await preflight(pool, config);
      } finally {
        await pool.end({ timeout: 5 });
      }
    });

    it('when its login is a superuser', async () => {
      await expect(preflight(db.admin, config)).rejects.toThrow(
        /^the server's database login "postgres" is a superuser/,
      );
    });

    it('when its login is a member of a role that is not an API role', async () => {
      const pool = serverLogin(db.url);
      try {
        const narrower = { ...config, apiRoles: config.apiRoles.filter((r) => r !== 'api_write') };
        await expect(preflight(pool, narrower)).rejects.toThrow(
          `the server's database login "authenticator" is a member of api_write, not only of the API roles`,
        );
      } finally {
        await pool.end({ timeout: 5 });
      }
    });
  });
});

describe('a database migrated by "tally migrate" alone', () => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase({ empty: true });
    await migrate(db.url);
    t = startTestApp(db.url, restEnv());
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  it('already forces RLS on every tenant table and shows a token its own workspace only', async () => {
    const forced = await db.admin<{ relname: string }[]>`
      SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relrowsecurity AND relforcerowsecurity ORDER BY 1`;
    expect(forced.map((r) => r.relname)).toEqual([...TENANT_TABLES].sort());
    const ws = await workspaceWithData(db.admin);
    const other = await workspaceWithData(db.admin);
    const { id } = await tokenFor(db.admin, ws.id, 'write');
    const jwt = await accessToken({ role: 'api_write', workspace_id: ws.id, scope: 'write', sub: id });
    let seen = 0;
    for (const table of TENANT_TABLES) {
      const res = await request(t.app)
        .get(`/rest/v1/${table}?select=workspace_id`)
        .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}` })
        .expect(200);
      // Rows of its workspace only (the activity log's read policy comes with the policy files).
      expect(res.body.every((r: { workspace_id: string }) => r.workspace_id === ws.id)).toBe(true);
      seen += res.body.length;
    }
    expect(seen).toBeGreaterThan(0);
    // Nor can it write into another workspace.
    const res = await request(t.app)
      .post('/rest/v1/contacts')
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}`, Prefer: 'return=minimal' })
      .send({ workspace_id: other.id, name: 'planted' });
    expect(res.status).toBe(403);
    expect(await db.admin`SELECT 1 FROM public.contacts WHERE name = 'planted'`).toEqual([]);
  });
});

/** One plain connection with the server's own login, as `tally serve` logs in. */
function serverLogin(url: string): Sql {
  return postgres(serverUrl(url), { max: 1, onnotice: () => {} });
}
