import postgres, { type Sql } from 'postgres';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { createTestDatabase, serverUrl, sqlState, type TestDatabase } from './harness/db.js';
import { workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { first } from './harness/present.js';

// A function whose search_path does not name pg_temp searches it first for tables, and any
// login may create temporary tables. The server's login (authenticator) calls SECURITY DEFINER
// functions; with tables of its own in front of the real ones it could make them act on what
// it wrote. Every such function searches pg_temp last.

describe('SECURITY DEFINER functions and temporary tables', () => {
  let db: TestDatabase;
  let server: Sql;
  let victim: WorkspaceFixture;

  beforeAll(async () => {
    db = await createTestDatabase();
    victim = await workspaceWithData(db.admin);
    // One connection: temporary tables belong to the session that made them.
    server = postgres(serverUrl(db.url), { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    await server.end({ timeout: 5 });
    await db.drop();
  });

  it('authenticator cannot mint a token for a workspace by shadowing the settings tables', async () => {
    const session = createHash('sha256').update(randomBytes(32)).digest();
    const user = randomUUID();
    await server`CREATE TEMP TABLE settings_sessions (token_hash bytea, user_id uuid, csrf_token text, created_at timestamptz, expires_at timestamptz)`;
    await server`CREATE TEMP TABLE user_credentials (id uuid, email text)`;
    await server`CREATE TEMP TABLE workspace_members (workspace_id uuid, user_id uuid, role text)`;
    await server`INSERT INTO pg_temp.settings_sessions VALUES (${session}, ${user}, ${'x'.repeat(32)}, now(), now() + interval '1 hour')`;
    await server`INSERT INTO pg_temp.user_credentials VALUES (${user}, 'forged@example.com')`;
    await server`INSERT INTO pg_temp.workspace_members VALUES (${victim.id}, ${user}, 'owner')`;

    const tokenHash = createHash('sha256').update(randomBytes(32)).digest();
    // No such session exists in the database: the function refuses as for any stranger.
    expect(
      await sqlState(
        server`SELECT tally.settings_create_token(${session}, ${victim.id}, 'write', 'forged', ${tokenHash})`,
      ),
    ).toBe('42501');
    expect(await sqlState(server`SELECT tally.settings_set_api_enabled(${session}, ${victim.id}, false)`)).toBe(
      '42501',
    );
    // The settings page's reads see only real sessions too.
    expect(await server`SELECT * FROM tally.settings_workspaces(${session})`).toHaveLength(0);

    const tokens = first(
      await db.admin<{ n: number }[]>`SELECT count(*)::int AS n FROM public.api_tokens WHERE token_hash = ${tokenHash}`,
    );
    expect(tokens.n).toBe(0);
    const forged = first(
      await db.admin<
        { n: number }[]
      >`SELECT count(*)::int AS n FROM tally.audit_log WHERE actor = 'forged@example.com'`,
    );
    expect(forged.n).toBe(0);
    const ws = first(
      await db.admin<{ api_enabled: boolean }[]>`SELECT api_enabled FROM public.workspaces WHERE id = ${victim.id}`,
    );
    expect(ws.api_enabled).toBe(true);
  });

  it('authenticator cannot clear its rate limit by shadowing the counters', async () => {
    await db.admin`INSERT INTO tally.rate_limits (key, hits, reset_at) VALUES ('shadow-test', 1000, now() + interval '1 hour')`;
    await server`CREATE TEMP TABLE rate_limits (key text PRIMARY KEY, hits integer, reset_at timestamptz)`;
    const [row] = await server<{ hits: number }[]>`SELECT hits FROM tally.rate_limit_take('shadow-test', 60000, 1)`;
    expect(row?.hits).toBe(1001);
  });

  it('every SECURITY DEFINER function, and every function that sets a search_path, searches pg_temp last', async () => {
    // Functions of extensions are the extension's; everything else in the database is checked,
    // so a function a later migration adds cannot forget it.
    const rows = await db.admin<{ fn: string; path: string | null }[]>`
      SELECT p.oid::regprocedure::text AS fn,
             (SELECT substr(c, length('search_path=') + 1) FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%') AS path
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
       WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_%'
         AND NOT EXISTS (SELECT 1 FROM pg_depend d
                          WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
         AND (p.prosecdef OR EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%'))
       ORDER BY 1`;
    expect(rows.length).toBeGreaterThan(20);
    expect(rows.filter((r) => !/(^|,\s*)pg_temp$/.test(r.path ?? ''))).toEqual([]);
  });
});
