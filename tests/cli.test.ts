import { jest } from '@jest/globals';
import { mkdtemp, rm, chmod, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sha256 } from '../gateway/secrets.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { exited, tally, tallyServer } from './harness/cli.js';
import { freePort, listenPort } from '../gateway/db/free-port.js';
import { writeFile } from 'node:fs/promises';
import { allPages, page } from './harness/docs.js';
import request from 'supertest';
import { accessToken, startTestApp } from './harness/app.js';
import { TENANT_TABLES, tokenFor, workspaceWithData } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { first, present } from './harness/present.js';

// Each command is a process compiled by tsx: seconds apiece on a busy machine.
jest.setTimeout(180_000);

const noStackTrace = (text: string): void => {
  expect(text).not.toMatch(/\n\s+at /);
  expect(text.trim().split('\n')[0]).toMatch(/^tally: /);
};

describe('tally CLI with DATABASE_URL', () => {
  let db: TestDatabase;
  let env: Record<string, string>;
  beforeAll(async () => {
    db = await createTestDatabase();
    env = { DATABASE_URL: db.url, TALLY_JWT_SECRET: 'x'.repeat(32) };
  });
  afterAll(() => db.drop());

  it('creates a workspace and prints its id last', async () => {
    const r = await tally(['workspace', 'create', 'Acme Travel', '--currency', 'EUR'], env);
    expect(r.code).toBe(0);
    const [ws] = await db.admin`SELECT id, name, currency, api_enabled FROM public.workspaces WHERE id = ${r.lastLine}`;
    expect(ws).toEqual({ id: r.lastLine, name: 'Acme Travel', currency: 'EUR', api_enabled: true });
    const [audit] = await db.admin`SELECT actor, action FROM tally.audit_log WHERE workspace_id = ${r.lastLine}`;
    expect(audit).toEqual({ actor: 'cli', action: 'workspace.create' });
  });

  it('refuses a duplicate workspace and a bad currency with one line and exit 1', async () => {
    const dup = await tally(['workspace', 'create', 'acme travel'], env);
    expect(dup.code).toBe(1);
    expect(dup.stderr.trim()).toBe('tally: a workspace named "acme travel" exists already');
    const cur = await tally(['workspace', 'create', 'Other', '--currency', 'euro'], env);
    expect(cur.code).toBe(1);
    noStackTrace(cur.stderr);
    // Three capital letters are not enough: the code must be one of ISO 4217's.
    const made = await tally(['workspace', 'create', 'Other', '--currency', 'XYZ'], env);
    expect(made.code).toBe(1);
    expect(made.stderr.trim()).toBe('tally: currency must be an ISO 4217 code such as USD, got "XYZ"');
    expect(await db.admin`SELECT 1 FROM public.workspaces WHERE name = 'Other'`).toHaveLength(0);
  });

  it('mints a token once, stores only its SHA-256, lists it without the secret and revokes it', async () => {
    const r = await tally(['token', 'create', '--workspace', 'Acme Travel', '--scope', 'write', '--label', 'ci'], env);
    expect(r.code).toBe(0);
    expect(r.lastLine).toMatch(/^tally_ws_[0-9A-Za-z]{40}$/);
    const row = first(
      await db.admin`SELECT id, scope, label, token_hash FROM public.api_tokens WHERE token_hash = ${sha256(r.lastLine)}`,
    );
    expect(row).toMatchObject({ scope: 'write', label: 'ci' });
    const everything = JSON.stringify(await db.admin`SELECT * FROM public.api_tokens`);
    expect(everything).not.toContain(r.lastLine.slice(9));

    const list = await tally(['token', 'list', '--workspace', 'Acme Travel'], env);
    expect(list.stdout).toContain(row.id);
    expect(list.stdout).toContain('active');
    expect(list.stdout).toContain('workspace "Acme Travel"');
    expect(list.stdout).not.toContain(r.lastLine);

    const revoke = await tally(['token', 'revoke', row.id], env);
    expect(revoke.code).toBe(0);
    const after = first(await db.admin`SELECT revoked_at FROM public.api_tokens WHERE id = ${row.id}`);
    expect(after.revoked_at).toBeInstanceOf(Date);
    const again = await tally(['token', 'revoke', row.id], env);
    expect(again.code).toBe(1);
    expect(again.stderr.trim()).toBe(`tally: no active token with id ${row.id}`);
  });

  it('refuses a token for an unknown workspace or scope', async () => {
    const unknown = await tally(['token', 'create', '--workspace', 'Nowhere', '--scope', 'read'], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr.trim()).toBe('tally: unknown workspace "Nowhere"');
    const scope = await tally(['token', 'create', '--workspace', 'Acme Travel', '--scope', 'admin'], env);
    expect(scope.code).toBe(1);
    expect(scope.stderr.trim()).toBe('tally: scope must be read or write, got "admin"');
    const missing = await tally(['token', 'create', '--scope', 'read'], env);
    expect(missing.code).toBe(1);
    noStackTrace(missing.stderr);
  });

  it('switches the workspace API off and on', async () => {
    const off = await tally(['workspace', 'api', 'Acme Travel', 'off'], env);
    expect(off.code).toBe(0);
    expect(
      first(await db.admin`SELECT api_enabled FROM public.workspaces WHERE name = 'Acme Travel'`).api_enabled,
    ).toBe(false);
    await tally(['workspace', 'api', 'Acme Travel', 'on'], env);
    expect(
      first(await db.admin`SELECT api_enabled FROM public.workspaces WHERE name = 'Acme Travel'`).api_enabled,
    ).toBe(true);
    const bad = await tally(['workspace', 'api', 'Acme Travel', 'maybe'], env);
    expect(bad.code).toBe(1);
  });

  it('creates a publishable key, printed last, stored hashed', async () => {
    const r = await tally(['key', 'create', '--label', 'web'], env);
    expect(r.code).toBe(0);
    expect(r.lastLine).toMatch(/^tally_pk_[0-9A-Za-z]{40}$/);
    const [row] = await db.admin`SELECT label FROM public.publishable_keys WHERE key_hash = ${sha256(r.lastLine)}`;
    expect(row).toEqual({ label: 'web' });
  });

  it('answers an unknown command and a bad flag with usage and exit 1', async () => {
    const r = await tally(['frobnicate'], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('tally: unknown command "frobnicate" (see tally help)\n'); // one line, not the whole usage
    const flag = await tally(['token', 'list', '--bogus'], env);
    expect(flag.code).toBe(1);
    noStackTrace(flag.stderr);
    expect(flag.stderr.trim().split('\n')).toHaveLength(1);
    expect(flag.stderr).toMatch(/\(see tally help token\)\n$/);
  });

  it('lists every command the README and docs/ name in --help', async () => {
    const help = await tally(['--help'], env);
    expect(help.code).toBe(0);
    const docs = allPages().map(page).join('\n');
    // docs/cli.md's table: `tally workspace api WORKSPACE on|off`, `tally key list`, `tally key revoke KEY_ID`…
    const commands = [...docs.matchAll(/`tally ((?:[a-z]+ ?)+)/g)].map((m) => present(m[1]).trim());
    expect(commands).toEqual(expect.arrayContaining(['up', 'mcp', 'sql', 'psql', 'db url', 'key revoke']));
    const lines = help.stdout.split('\n').map((l) => l.trim());
    for (const command of new Set(commands))
      expect([command, lines.some((l) => l.startsWith(command + ' ') || l === command)]).toEqual([command, true]);
  });

  it('says so in one line when the database is unreachable', async () => {
    const r = await tally(['workspace', 'list'], { DATABASE_URL: 'postgres://nobody:x@127.0.0.1:1/none' });
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe(
      'tally: cannot reach the database (ECONNREFUSED); check DATABASE_URL or start Tally with "tally up"',
    );
  });

  it('a DBA adds a function with `tally sql`, and a running server serves it over /rest/v1 without a restart', async () => {
    const ws = await workspaceWithData(db.admin, 'DBA Travel');
    const jwt = await accessToken({
      role: 'api_write',
      workspace_id: ws.id,
      scope: 'write',
      sub: (await tokenFor(db.admin, ws.id, 'write')).id,
    });
    const app = startTestApp(db.url, restEnv());
    try {
      const call = () =>
        request(app.app)
          .get('/rest/v1/rpc/expenses_over?min_amount=10&select=name')
          .set({ apikey: TEST_API_KEY, authorization: `Bearer ${jwt}` });
      expect((await call()).status).toBe(404); // not there yet, and the schema cache is loaded

      const dir = await mkdtemp(join(tmpdir(), 'tally-sql-'));
      const file = join(dir, 'expenses_over.sql');
      await writeFile(
        file,
        `
        CREATE FUNCTION public.expenses_over(min_amount numeric) RETURNS SETOF public.personal_transactions
        LANGUAGE sql STABLE AS $$ SELECT * FROM public.personal_transactions WHERE amount >= min_amount $$;
        REVOKE EXECUTE ON FUNCTION public.expenses_over(numeric) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION public.expenses_over(numeric) TO api_read, api_write;`,
      );
      const r = await tally(['sql', file], env);
      await rm(dir, { recursive: true, force: true });
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).toBe('GRANT\n'); // the last statement's tag

      // tally sql returned once the running server serves the function: the very next request.
      const res = await call();
      expect([res.status, res.body]).toEqual([200, [{ name: 'DBA Travel lunch' }]]); // RLS applies: this workspace's row
    } finally {
      await app.close();
    }

    // -c and standard input; rows come back tab-separated with a header.
    const c = await tally(
      ['sql', '-c', "SELECT name, amount FROM public.personal_transactions WHERE name = 'DBA Travel lunch'"],
      env,
    );
    expect(c.stdout).toBe('name\tamount\nDBA Travel lunch\t12.5\n(1 row)\n');
    const piped = await tally(
      ['sql'],
      env,
      "UPDATE public.funds SET description = 'from stdin' WHERE name = 'DBA Travel fund';\n",
    );
    expect(piped.stdout).toBe('UPDATE 1\n');

    // A failing script changes nothing (one transaction) and says why in one line.
    const bad = await tally(
      ['sql', '-c', "UPDATE public.funds SET description = 'half' WHERE name = 'DBA Travel fund'; SELECT nope"],
      env,
    );
    expect(bad.code).toBe(1);
    expect(bad.stderr.trim()).toBe('tally: the database refused: column "nope" does not exist');
    const fund = first(await db.admin`SELECT description FROM public.funds WHERE name = 'DBA Travel fund'`);
    expect(fund.description).toBe('from stdin');
  });

  it('prints the TypeScript types of the schema, as a role sees it', async () => {
    const types = await tally(['gen', 'types'], env);
    expect([types.code, types.stderr]).toEqual([0, '']);
    expect(types.stdout).toContain('// Generated by `tally gen types` as api_write sees the schema.');
    expect(types.stdout).toContain('"personal_transactions": {');
    const anon = await tally(['gen', 'types', '--role', 'anon'], env);
    expect(anon.stdout).not.toContain('personal_transactions');
    const wrong = await tally(['gen', 'types', '--role', 'postgres'], env);
    expect([wrong.code, wrong.stdout]).toEqual([1, '']);
    expect(wrong.stderr).toBe('tally: --role must be one of anon, api_read, api_write (see tally help gen)\n');
  });

  it('prints the connection URL, and opens psql on it (or says how to get psql)', async () => {
    const url = await tally(['db', 'url'], env);
    expect(url.stdout).toBe(`${db.url}\n`);

    // A stand-in psql on PATH shows what tally runs it with.
    const bin = await mkdtemp(join(tmpdir(), 'tally-psql-'));
    await writeFile(join(bin, 'psql'), '#!/bin/sh\nfor a in "$@"; do echo "arg: $a"; done\nexit 3\n', { mode: 0o755 });
    try {
      const psql = await tally(['psql', '--', '-c', 'select 1'], { ...env, PATH: bin });
      expect(psql.stdout).toBe(`arg: ${db.url}\narg: -c\narg: select 1\n`);
      expect(psql.code).toBe(3); // psql's own exit code
    } finally {
      await rm(bin, { recursive: true, force: true });
    }
    const missing = await tally(['psql'], { ...env, PATH: '/nonexistent' });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(
      /^tally: psql is not installed\. Install the PostgreSQL client .*apt-get install postgresql-client/,
    );
    expect(missing.stdout).toBe(`${db.url}\n`);
  });

  it('migrates an empty database, policies included, in one step', async () => {
    const empty = await createTestDatabase({ empty: true });
    try {
      const m = await tally(['migrate'], { DATABASE_URL: empty.url });
      expect(m.code).toBe(0);
      expect(m.stdout).toMatch(/^up: gateway\/000_baseline\nup: 000_baseline\n(up: \d{3}_\w+\n)*$/);
      const unpoliced = await empty.admin`
        SELECT c.relname FROM pg_class c
         WHERE c.relnamespace = 'public'::regnamespace AND c.relname = ANY (${TENANT_TABLES})
           AND NOT (c.relforcerowsecurity AND EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid))`;
      expect(unpoliced).toEqual([]);
      const p = await tally(['policies', 'apply'], { DATABASE_URL: empty.url });
      expect(p.code).toBe(0);
      expect(p.stdout).toContain('personal_transactions.sql');
      const again = await tally(['migrate'], { DATABASE_URL: empty.url });
      expect(again.stdout.trim()).toBe('no migrations to run');
    } finally {
      await empty.drop();
    }
  });
});

describe('tally in embedded mode', () => {
  let home: string;
  let env: Record<string, string | undefined>;
  beforeAll(async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tally-cli-'));
    await chmod(dir, 0o755);
    home = join(dir, 'home');
    env = {
      DATABASE_URL: undefined,
      TALLY_JWT_SECRET: undefined,
      TALLY_HOME: home,
      TALLY_EMBEDDED_PG_PORT: String(await freePort()),
      PORT: String(await listenPort()),
    };
  });
  afterAll(() => rm(join(home, '..'), { recursive: true, force: true }));

  it('`tally up` starts Postgres, migrates, seeds, serves and prints working credentials; a second start keeps the data', async () => {
    const first = await tallyServer(['up'], env, /Demo token\s+(tally_ws_\S+)/);
    const url = /Tally is up on (\S+)/.exec(first.output)![1];
    // A first start says what it is doing, step by step, with durations.
    expect(first.output).toMatch(
      /^Creating the embedded Postgres in .* \(initdb, first run only\) and starting it… \d+\.\d s$/m,
    );
    expect(first.output).toMatch(/^Running migrations… \d+ applied, \d+\.\d s$/m);
    expect(first.output).toMatch(/^Seeding the demo workspace… \d+\.\d s$/m);
    const token = /Demo token\s+(tally_ws_\S+)/.exec(first.output)![1];
    expect(first.output).toMatch(/Publishable key\s+tally_pk_[0-9A-Za-z]{40}/);
    expect(first.output).toContain(`${url}/api/v1`);
    expect(first.output).toContain(`${url}/rest/v1`);
    expect(first.output).toContain(`${url}/functions/v1/api-token`);
    expect(first.output).toContain(`${url}/mcp?token=${token}`);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect(await (await fetch(`${url}/readyz`)).json()).toMatchObject({ status: 'ready', pool: { size: 10 } });
    expect((await stat(join(home, 'secrets.json'))).mode & 0o077).toBe(0); // owner-only

    // While it runs, another command uses the same embedded server.
    const list = await tally(['workspace', 'list'], env);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/ Demo\n$/);

    first.child.kill('SIGTERM');
    expect(await exited(first.child)).toBe(0);

    const second = await tallyServer(['up'], env, /Demo token\s+(tally_ws_\S+)/);
    try {
      expect(/Demo token\s+(tally_ws_\S+)/.exec(second.output)![1]).toBe(token);
      const again = await tally(['workspace', 'list'], env);
      expect(again.stdout.trim().split('\n')).toHaveLength(1); // seeded once, data kept
    } finally {
      second.child.kill('SIGTERM');
      await exited(second.child);
    }
  }, 120_000);

  it('a command with no server running starts Postgres for its own duration', async () => {
    const r = await tally(['token', 'create', '--workspace', 'Demo', '--scope', 'read'], env);
    expect(r.code).toBe(0);
    expect(r.lastLine).toMatch(/^tally_ws_/);
    const list = await tally(['token', 'list'], env);
    expect(list.stdout.match(/active/g)).toHaveLength(2); // the demo token and this one
  }, 60_000);
});
