import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { freePort } from '../../../gateway/db/free-port.js';
import { tally } from '../../harness/cli.js';
import { waitFor } from '../../harness/wait.js';

// A Debian PostgreSQL 15 of the test's own on a free port, optionally a hot standby of it made
// with pg_basebackup, and Debian's PgBouncer in transaction mode in front of it: what the
// PgBouncer section of docs/deployment.md sets up. Everything runs as the user postgres in a temporary folder
// and is stopped and removed by stop(), also when a test failed.

const BIN = '/usr/lib/postgresql/15/bin';
const AUTHENTICATOR_PASSWORD = 'authenticator-password-for-the-scale-suite';

/** What the machine lacks for these tests, in one line, or undefined. */
function missing(): string | undefined {
  if (!existsSync(join(BIN, 'postgres')) || !existsSync(join(BIN, 'pg_basebackup')))
    return `Debian's PostgreSQL 15 is missing (${BIN}): apt-get install postgresql-15`;
  if (!aptInstalled('pgbouncer', () => onPath('pgbouncer')))
    return "Debian's pgbouncer is missing: apt-get install pgbouncer (as root)";
  return undefined;
}

/** What the machine lacks for PostGIS on Debian's PostgreSQL 15, in one line, or undefined. */
export function postgisMissing(): string | undefined {
  const control = '/usr/share/postgresql/15/extension/postgis.control';
  if (!aptInstalled('postgresql-15-postgis-3', () => existsSync(control)))
    return "PostGIS for Debian's PostgreSQL 15 is missing: apt-get install postgresql-15-postgis-3 (as root)";
  return undefined;
}

/**
 * Whether `present()` holds, after installing `pkg` with apt when it did not and this is root:
 * under the lock every apt user of this machine takes, the package lists first on a fresh
 * machine. A failure is the caller's one line.
 */
function aptInstalled(pkg: string, present: () => boolean): boolean {
  if (present() || process.getuid?.() !== 0) return present();
  const apt = (...args: string[]) =>
    execFileSync('flock', ['/tmp/tally-apt.lock', 'apt-get', ...args], {
      stdio: 'ignore',
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
  try {
    apt('install', '-y', '-qq', pkg);
  } catch {
    try {
      apt('update', '-qq');
      apt('install', '-y', '-qq', pkg);
    } catch {
      // said by the caller
    }
  }
  return present();
}

function onPath(command: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const asPostgres = (args: string[]) => execFileSync('runuser', ['-u', 'postgres', '--', ...args], { stdio: 'pipe' });

export interface PgBouncerSetup {
  /** The owner's URL, directly to Postgres (migrations, the CLI). */
  ownerUrl: string;
  /** The server's login through PgBouncer (TALLY_DB_URI). */
  bouncerUrl: string;
  /** The server's login directly to Postgres. */
  directUrl: string;
  admin: postgres.Sql;
  /** A hot standby of the database (pg_basebackup), as its port. */
  startStandby(): Promise<number>;
  primaryPort: number;
  stop(): Promise<void>;
}

export async function startPgBouncer(): Promise<PgBouncerSetup> {
  const lacking = missing();
  if (lacking) throw new Error(lacking);
  const dir = await mkdtemp(join(tmpdir(), 'tally-pgbouncer-'));
  await chmod(dir, 0o777);
  const stops: (() => void)[] = [];
  const children: ChildProcess[] = [];
  const stop = async () => {
    for (const s of stops.reverse()) {
      try {
        s();
      } catch {
        // already stopped
      }
    }
    for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const primaryPort = await freePort();
    const data = join(dir, 'primary');
    asPostgres([join(BIN, 'initdb'), '-D', data, '-A', 'trust', '-U', 'postgres']);
    await writeFile(
      join(data, 'pg_hba.conf'),
      'host all all 127.0.0.1/32 trust\nhost replication all 127.0.0.1/32 trust\n',
    );
    const pgStart = (d: string, port: number) =>
      asPostgres([
        join(BIN, 'pg_ctl'),
        '-D',
        d,
        '-w',
        '-l',
        `${d}.log`,
        '-o',
        `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories= -c max_connections=200`,
        'start',
      ]);
    pgStart(data, primaryPort);
    stops.push(() => asPostgres([join(BIN, 'pg_ctl'), '-D', data, '-m', 'immediate', 'stop']));
    const cluster = postgres(`postgres://postgres@127.0.0.1:${primaryPort}/postgres`, { max: 1, onnotice: () => {} });
    await cluster`CREATE DATABASE tally`;
    await cluster.end();
    const ownerUrl = `postgres://postgres@127.0.0.1:${primaryPort}/tally`;
    const directUrl = `postgres://authenticator:${AUTHENTICATOR_PASSWORD}@127.0.0.1:${primaryPort}/tally`;
    const migrated = await tally(['migrate'], { DATABASE_URL: ownerUrl, TALLY_DB_URI: directUrl });
    if (migrated.code !== 0) throw new Error(`tally migrate failed: ${migrated.stderr}`);

    // The PgBouncer configuration of docs/deployment.md, on free ports of the test's own.
    const bouncerPort = await freePort();
    await writeFile(join(dir, 'userlist.txt'), `"authenticator" "${AUTHENTICATOR_PASSWORD}"\n`);
    await writeFile(
      join(dir, 'pgbouncer.ini'),
      [
        '[databases]',
        `tally = host=127.0.0.1 port=${primaryPort} dbname=tally`,
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${bouncerPort}`,
        'unix_socket_dir =',
        'pool_mode = transaction',
        'auth_type = plain',
        `auth_file = ${join(dir, 'userlist.txt')}`,
        'ignore_startup_parameters = role',
        'default_pool_size = 20',
        'max_client_conn = 500',
        '',
      ].join('\n'),
    );
    const bouncer = spawn('runuser', ['-u', 'postgres', '--', 'pgbouncer', join(dir, 'pgbouncer.ini')], {
      stdio: 'ignore',
    });
    children.push(bouncer);
    const bouncerUrl = `postgres://authenticator:${AUTHENTICATOR_PASSWORD}@127.0.0.1:${bouncerPort}/tally`;
    await waitFor(async () => {
      const probe = postgres(bouncerUrl, { max: 1, prepare: false, onnotice: () => {}, connect_timeout: 2 });
      try {
        await probe`SELECT 1`;
        return true;
      } catch {
        return false;
      } finally {
        await probe.end({ timeout: 1 });
      }
    }, 'PgBouncer to accept connections');

    const admin = postgres(ownerUrl, { max: 2, onnotice: () => {} });
    return {
      ownerUrl,
      bouncerUrl,
      directUrl,
      primaryPort,
      admin,
      async startStandby() {
        const port = await freePort();
        const standby = join(dir, 'standby');
        asPostgres([
          join(BIN, 'pg_basebackup'),
          '-h',
          '127.0.0.1',
          '-p',
          String(primaryPort),
          '-U',
          'postgres',
          '-D',
          standby,
          '-R',
          '-X',
          'stream',
        ]);
        pgStart(standby, port);
        stops.push(() => asPostgres([join(BIN, 'pg_ctl'), '-D', standby, '-m', 'immediate', 'stop']));
        return port;
      },
      async stop() {
        await admin.end({ timeout: 1 });
        await stop();
      },
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
