import { spawn, spawnSync, type SpawnOptions } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { freePort } from '../../../gateway/db/free-port.js';

// A Citus cluster on this machine for the scale suite: Debian's PostgreSQL 15 servers (a
// coordinator and workers) in one temporary folder, on free loopback ports, as the OS user
// `postgres` when the suite runs as root (Postgres refuses to run as root). Every server it
// starts is stopped and its folder removed by stop(); a watchdog process does the same if this
// process ends without calling it (a failed setup, Ctrl-C, a killed jest), so no server outlives
// the run.

const BIN = '/usr/lib/postgresql/15/bin';
const LIB = '/usr/lib/postgresql/15/lib';
const EXTENSIONS = '/usr/share/postgresql/15/extension';

/**
 * Why a Citus cluster cannot start here (one line), or null when it can.
 * @public (global-setup.mjs imports it through tsx, which knip does not follow)
 */
export function citusMissing(): string | null {
  const lack = (what: string) =>
    `Citus 13 for PostgreSQL 15 is not installed: ${what} (install Citus's packages for PostgreSQL 15, see the Citus section of docs/deployment.md)`;
  if (!existsSync(join(BIN, 'initdb'))) return lack(`${BIN}/initdb is missing (Debian's postgresql-15)`);
  if (!existsSync(join(LIB, 'citus.so'))) return lack(`${LIB}/citus.so is missing`);
  const control = join(EXTENSIONS, 'citus.control');
  const version = existsSync(control)
    ? /default_version\s*=\s*'([^']+)'/.exec(readFileSync(control, 'utf8'))?.[1]
    : undefined;
  if (!version?.startsWith('13.')) return lack(`${control} offers ${version ?? 'no version'}, not 13.x`);
  if (userInfo().uid === 0 && spawnSync('id', ['-u', 'postgres']).status !== 0) {
    return lack('running as root, but there is no OS user "postgres" to run the servers as');
  }
  return null;
}

/** One PostgreSQL 15 server of the cluster. */
export interface PgNode {
  readonly name: string;
  readonly port: number;
  readonly dataDir: string;
  /** The superuser's URL of `database` on this server. */
  url(database?: string): string;
}

export interface CitusCluster {
  readonly coordinator: PgNode;
  /** The workers started with the cluster and by startServer(); not all need be added. */
  readonly workers: PgNode[];
  /**
   * A new database named `name` as Tally's deployment starts: created on every server given
   * (default: the coordinator and every worker), the citus extension in each, the coordinator
   * registered and the workers added. Returns the superuser URL on the coordinator.
   */
  createDatabase(name: string, workers?: PgNode[]): Promise<string>;
  dropDatabase(name: string): Promise<void>;
  /** Starts one more server with Citus loaded (e.g. a worker to add later). */
  startServer(name: string): Promise<PgNode>;
  /**
   * Stops a server of the cluster, as an outage does: a fast shutdown (its sessions are ended),
   * or an immediate one (killed, as a crash: it recovers when started again).
   */
  stopNode(node: PgNode, mode?: 'fast' | 'immediate'): Promise<void>;
  /** Starts a stopped server again, on its port, and waits until it accepts connections. */
  startNode(node: PgNode): Promise<void>;
  /** Stops every server and removes the folder. Idempotent. */
  stop(): Promise<void>;
}

interface RunAs {
  uid?: number;
  gid?: number;
}

function runAs(): RunAs {
  if (userInfo().uid !== 0) return {};
  const id = (flag: string) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
  return { uid: id('-u'), gid: id('-g') };
}

function run(cmd: string, args: string[], as: RunAs, cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    // HOME: the servers' own connections to one another (libpq) look for client certificates
    // there, and root's is not theirs to read.
    const env = { ...process.env, LC_ALL: 'C.UTF-8', HOME: cwd };
    const options: SpawnOptions = { ...as, cwd, stdio: ['ignore', 'pipe', 'pipe'], env };
    const child = spawn(cmd, args, options);
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}: ${out.trim()}`)),
    );
  });
}

const CONF = (port: number) => `
listen_addresses = '127.0.0.1'
port = ${port}
unix_socket_directories = ''
shared_preload_libraries = 'citus'
max_connections = 300
max_prepared_transactions = 200
wal_level = logical
max_wal_senders = 20
max_replication_slots = 20
fsync = off
synchronous_commit = off
full_page_writes = off
log_min_messages = warning
citus.log_distributed_deadlock_detection = off
`;

// Loopback only, and trust: the servers live for one test run on one machine. A deployment
// authenticates the nodes' connections to one another (pg_dist_authinfo, .pgpass or certificates).
// With `passwords`, every role but the superuser logs in with its password, as in a deployment:
// the API roles' connections to the workers need the secrets `tally migrate` gave them.
const HBA = (passwords: boolean) =>
  passwords
    ? `host all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n`
    : `host all all 127.0.0.1/32 trust\n`;

/**
 * Starts a coordinator and `workers` workers (none added yet: createDatabase adds them to each
 * database). Throws the one line of citusMissing() when Citus is not installed.
 */
export async function startCitusCluster(
  options: { workers?: number; passwords?: boolean } = {},
): Promise<CitusCluster> {
  const missing = citusMissing();
  if (missing) throw new Error(missing);
  const as = runAs();
  const base = await mkdtemp(join(tmpdir(), 'tally-citus-'));
  if (as.uid !== undefined) await chown(base, as.uid, as.gid!);
  const nodes: PgNode[] = [];
  let stopped = false;
  const watchdog = startWatchdog(base, as);

  async function startServer(name: string): Promise<PgNode> {
    const dataDir = join(base, name);
    const port = await freePort();
    await run(
      join(BIN, 'initdb'),
      ['-D', dataDir, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--no-instructions'],
      as,
      base,
    );
    await writeFile(join(dataDir, 'postgresql.auto.conf'), CONF(port));
    await writeFile(join(dataDir, 'pg_hba.conf'), HBA(options.passwords ?? false));
    if (as.uid !== undefined) {
      await chown(join(dataDir, 'postgresql.auto.conf'), as.uid, as.gid!);
      await chown(join(dataDir, 'pg_hba.conf'), as.uid, as.gid!);
    }
    const node: PgNode = {
      name,
      port,
      dataDir,
      url: (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`,
    };
    nodes.push(node);
    await startNode(node);
    return node;
  }

  async function startNode(node: PgNode): Promise<void> {
    await run(
      join(BIN, 'pg_ctl'),
      ['-D', node.dataDir, '-l', join(base, `${node.name}.log`), '-w', '-t', '120', 'start'],
      as,
      base,
    );
  }

  const cluster: CitusCluster = {
    get coordinator() {
      return nodes[0]!;
    },
    get workers() {
      return nodes.slice(1);
    },
    startServer,
    startNode,
    stopNode: (node, mode = 'fast') =>
      run(join(BIN, 'pg_ctl'), ['-D', node.dataDir, '-m', mode, '-w', 'stop'], as, base),
    async createDatabase(name, workers = nodes.slice(1)) {
      return createCitusDatabase(nodes[0]!, workers, name);
    },
    dropDatabase: (name) => dropCitusDatabase(nodes, name),
    async stop() {
      if (stopped) return;
      stopped = true;
      for (const node of nodes) {
        await run(join(BIN, 'pg_ctl'), ['-D', node.dataDir, '-m', 'immediate', '-w', 'stop'], as, base).catch(() => {});
      }
      await rm(base, { recursive: true, force: true });
      watchdog.kill();
    },
  };

  try {
    await startServer('coordinator');
    for (let i = 1; i <= (options.workers ?? 2); i++) await startServer(`worker${i}`);
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  return cluster;
}

async function onNode<T>(node: PgNode, database: string, fn: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const sql = postgres(node.url(database), { max: 1, onnotice: () => {} });
  try {
    return await fn(sql);
  } finally {
    await sql.end();
  }
}

/** A node of a running cluster known by its port on 127.0.0.1 (e.g. from the environment). */
export function nodeAt(port: number, name = `node:${port}`): PgNode {
  return {
    name,
    port,
    dataDir: '',
    url: (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`,
  };
}

/**
 * A new database `name` as a Citus deployment starts: created on the coordinator and each
 * worker, the citus extension in each, the coordinator registered and the workers added.
 * Returns the superuser URL on the coordinator.
 */
export async function createCitusDatabase(coordinator: PgNode, workers: PgNode[], name: string): Promise<string> {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a plain database name: ${name}`);
  for (const node of [coordinator, ...workers]) {
    await onNode(node, 'postgres', (sql) => sql.unsafe(`CREATE DATABASE ${name}`));
    await onNode(node, name, (sql) => sql`CREATE EXTENSION citus`);
  }
  await onNode(coordinator, name, async (sql) => {
    await sql`SELECT citus_set_coordinator_host('127.0.0.1', ${coordinator.port})`;
    for (const w of workers) await sql`SELECT citus_add_node('127.0.0.1', ${w.port})`;
  });
  return coordinator.url(name);
}

/** Drops database `name` on every node given. */
export async function dropCitusDatabase(nodes: PgNode[], name: string): Promise<void> {
  for (const node of nodes) {
    await onNode(node, 'postgres', (sql) => sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
  }
}

/**
 * A detached shell that waits for this process to end, then stops every server under `base` and
 * removes it. stop() kills it first when the run ends normally.
 */
function startWatchdog(base: string, as: RunAs) {
  const script = `
    while [ -d /proc/${process.pid} ]; do sleep 1; done
    for d in "${base}"/*/; do
      [ -f "$d/PG_VERSION" ] && ${BIN}/pg_ctl -D "$d" -m immediate -w stop >/dev/null 2>&1
    done
    rm -rf "${base}"`;
  const child = spawn('sh', ['-c', script], { ...as, detached: true, stdio: 'ignore', cwd: tmpdir() });
  child.unref();
  return {
    kill() {
      try {
        if (child.pid !== undefined) process.kill(child.pid);
      } catch {
        // already gone
      }
    },
  };
}
