// `npm run bench`: Tally side by side with a floor (bench/baseline.ts: node:http + postgres.js,
// JWT verified, the same transaction as the case: the list read's, or for the embed (c) and
// the write (d) their own) and PostGraphile 5 (bench/postgraphile.ts), over
// loopback, with autocannon. Starts its own embedded Postgres in a temporary home on a free
// port, generates the data set (bench/data.ts), runs `tally serve`, the floor and PostGraphile
// as child processes (so their peak RSS is their own), and, when Debian's pgbouncer is
// installed, a second Tally behind PgBouncer in transaction mode with prepared statements off.
// On a shared machine the load drifts between runs: every case is measured interleaved with its
// floor at the same connections (floor, case, case, floor), and compared with that floor figure.
// Prints every target with its measured value, and writes bench/results/latest.json.
//
// Knobs (environment): BENCH_SECONDS (per case, default 6), BENCH_CONNECTIONS (default
// 16), BENCH_MAIN_ROWS (100000), BENCH_OTHER_WORKSPACES (100), BENCH_OTHER_ROWS (10000),
// BENCH_MANY_WORKSPACES (1000; 0 skips the many-workspaces case), BENCH_MCP_SESSIONS (100),
// BENCH_LARGE_ROWS (1000000; 0 skips the growth case), BENCH_CITUS_ROWS (20000: case k's
// expenses), BENCH_CASES (e.g. c,d: only these besides the baseline and (a); n is the noisy
// neighbour; f the figures of 2,000 funds; cpu the CPU per request against bench/cpu-baseline.json, bench/cpu.ts, on a
// Postgres of its own: BENCH_CPU_ROWS, 200000, BENCH_CPU_ROUNDS, 4; BENCH_CASES=cpu runs it
// alone, into bench/results/cpu-latest.json), BENCH_CPU_KINDS (the request kinds of case cpu and
// of BENCH_AGAINST, bench/kinds.ts: list,one,insert,mcp by default, `all` for every kind), BENCH_CPU_PROF=1 (Tally and the floor run with --cpu-prof
// into bench/results/profiles), BENCH_OUT (the JSON file).
//
// BENCH_AGAINST=<a built checkout of another commit> runs instead the comparison of
// bench/against.ts: CPU, statements, round trips and commits per request of this build against
// that one (BENCH_AGAINST_ROUNDS, default 4; BENCH_AGAINST_ROWS, default 200000; 8 connections
// unless BENCH_CONNECTIONS says otherwise; BENCH_CPU_KINDS=mcp,mcp-ping measures only those), written
// to bench/results/against.json.

import autocannon, { type Result } from 'autocannon';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import postgres from 'postgres';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { adminClient } from '../gateway/db/connect.js';
import { localSecrets, startEmbedded } from '../gateway/db/embedded.js';
import { migrate } from '../gateway/db/migrate.js';
import { packageRoot } from '../gateway/paths.js';
import { citusCase, type CitusReport } from './citus.js';
import { compareBuilds } from './against.js';
import { CPU_TARGETS, cpuAgainstBaseline, type CpuReport } from './cpu.js';
import { kindsFrom } from './kinds.js';
import { cpuMsOf, memoryOf, postgresCpuMsOf, startProcess, stopProcess, waitReady } from './proc.js';
import { postgraphileEntry } from './postgraphile-install.js';
import { generateDataset, generateExpenses, type Dataset } from './data.js';
import { FUND_FIGURES_FUNDS, FUND_FIGURES_TARGET_MS, fundsWorkspace, timeFundFigures } from './funds.js';
import { createWorkspace } from '../gateway/admin/workspaces.js';
import { freePort } from '../gateway/db/free-port.js';
import { oneRow } from '../gateway/engine/invariant.js';
import { createToken } from '../gateway/admin/tokens.js';
import { jwtKeys, signAccessToken } from '../gateway/auth/jwt.js';

const env = process.env;
const num = (name: string, fallback: number): number =>
  env[name] !== undefined && env[name] !== '' ? Number(env[name]) : fallback;
const SECONDS = num('BENCH_SECONDS', 6);
const CONNECTIONS = (env.BENCH_CONNECTIONS ?? '16').split(',').map(Number);
const OUT = env.BENCH_OUT ?? join(packageRoot, 'bench', 'results', 'latest.json');

const log = (line: string): void => void process.stdout.write(line + '\n');

interface Case {
  id: string;
  title: string;
  target: 'tally' | 'baseline' | 'postgraphile' | 'pgbouncer';
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: string;
  /** Compared with the baseline's figure at the same connections. */
  comparable: boolean;
  /** The floor running this case's own transaction, where it is not the list read's. */
  floor?: Case;
}

export interface Measurement {
  case: string;
  title: string;
  target: string;
  connections: number;
  seconds: number;
  requests: number;
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  errors: number;
  ratioToBaseline: number | null;
  /** This case's p99 over the floor's p99 in the paired floor run. */
  p99RatioToBaseline: number | null;
  /**
   * CPU time the serving process spent per answered request (ms): unlike throughput, barely
   * moved by what else runs on the machine. Postgres's share is not counted.
   */
  serverCpuMsPerRequest: number | null;
  /** CPU of the embedded Postgres's processes over the same windows, per request. */
  postgresCpuMsPerRequest: number | null;
  tallyPeakRssMb: number | null;
}

/** The first body a case answered with a tool error (MCP answers those with HTTP 200). */
const toolErrors = new Map<string, string>();

async function drive(base: string, c: Case, connections: number, seconds: number): Promise<Result> {
  return autocannon({
    // An MCP tool error is a 200: count it as a mismatch, not a success.
    verifyBody: c.path.startsWith('/mcp')
      ? (raw) => {
          const body = String(raw ?? '');
          const ok = !body.includes('"isError":true');
          if (!ok && !toolErrors.has(c.id)) toolErrors.set(c.id, body.slice(0, 400));
          return ok;
        }
      : undefined,
    url: base + c.path,
    method: c.method,
    headers: c.headers,
    body: c.body,
    connections,
    duration: seconds,
    pipelining: 1,
  });
}

/** The list read of case (a) as PostGraphile's Amber preset names it: every column of the newest 20. */
const GRAPHQL_LIST = JSON.stringify({
  query:
    '{ allPersonalTransactions(first: 20, orderBy: OCCURRED_AT_DESC) { nodes { id workspaceId name amount categoryId methodId occurredAt note createdAt } } }',
});

function cases(
  d: Dataset,
  wrapperPresent: boolean,
  mcpToken: string,
  extra: { postgraphile: boolean; pgbouncer: boolean },
): [floor: Case, caseA: Case, ...others: Case[]] {
  const rest = { apikey: d.apikey, authorization: `Bearer ${d.main.jwt}` };
  const floor: Case = {
    id: 'baseline',
    title: 'baseline: node:http + postgres.js, same transaction as (a)',
    target: 'baseline',
    method: 'GET',
    path: '/',
    headers: { authorization: `Bearer ${d.main.jwt}` },
    comparable: false,
  };
  const write = {
    body: JSON.stringify({ name: 'Bench write', amount: 12.5, category_id: 'essentials', method_id: 'cash' }),
    headers: { 'content-type': 'application/json', prefer: 'return=minimal' },
  };
  const list: [Case, Case, ...Case[]] = [
    floor,
    {
      id: 'a',
      title: 'GET /rest/v1/personal_transactions?select=*&order=occurred_at.desc&limit=20',
      target: 'tally',
      method: 'GET',
      path: '/rest/v1/personal_transactions?select=*&order=occurred_at.desc&limit=20',
      headers: rest,
      comparable: true,
    },
  ];
  if (wrapperPresent) {
    list.push({
      id: 'b',
      title: 'GET /api/v1/personal_transactions (wrapper)',
      target: 'tally',
      method: 'GET',
      path: '/api/v1/personal_transactions',
      headers: { authorization: `Bearer ${d.main.jwt}` },
      comparable: true,
    });
  }
  list.push(
    {
      id: 'c',
      title: 'GET /rest/v1/funds?select=*,fund_transactions(*)&status=eq.In%20Progress',
      target: 'tally',
      method: 'GET',
      path: '/rest/v1/funds?select=*,fund_transactions(*)&status=eq.In%20Progress',
      headers: rest,
      comparable: true,
      floor: { ...floor, id: 'baseline@c', title: 'baseline: same transaction as (c)', path: '/funds' },
    },
    {
      id: 'd',
      title: 'POST /rest/v1/personal_transactions (one row, return=minimal)',
      target: 'tally',
      method: 'POST',
      path: '/rest/v1/personal_transactions',
      headers: { ...rest, ...write.headers },
      body: write.body,
      comparable: true,
      floor: {
        ...floor,
        id: 'baseline@d',
        title: 'baseline: same transaction as (d)',
        method: 'POST',
        path: '/write',
        headers: { ...floor.headers, ...write.headers },
        body: write.body,
      },
    },
    {
      id: 'e',
      title: 'MCP tools/call list_expenses (Streamable HTTP, stateless)',
      target: 'tally',
      method: 'POST',
      path: `/mcp?token=${encodeURIComponent(mcpToken)}`,
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'list_expenses', arguments: { limit: 20 } },
      }),
      comparable: true,
    },
  );
  if (extra.postgraphile) {
    list.push({
      id: 'g',
      title: 'PostGraphile 5 (Amber): allPersonalTransactions(first: 20, orderBy: OCCURRED_AT_DESC), same JWT',
      target: 'postgraphile',
      method: 'POST',
      path: '/graphql',
      headers: { authorization: `Bearer ${d.main.jwt}`, 'content-type': 'application/json' },
      body: GRAPHQL_LIST,
      comparable: true,
    });
  }
  if (extra.pgbouncer)
    list.push({
      ...list[1],
      id: 'p',
      title: 'case (a) through PgBouncer (transaction mode), TALLY_DB_PREPARED_STATEMENTS=false',
      target: 'pgbouncer',
    });
  return list;
}

/**
 * Transactions Postgres committed per request of case (a): the round trips a read costs. The
 * database also commits on its own while it is measured (the servers' change watch polls twice a
 * second): that rate, measured over a wait without requests, is taken off.
 */
async function transactionsPerRead(ownerUrl: string, base: string, c: Case): Promise<number> {
  const admin = adminClient(ownerUrl);
  try {
    // The commits so far, and when: an idle backend flushes its statistics within
    // PGSTAT_IDLE_INTERVAL (10 s). Each count is two transactions of its own.
    const count = async (): Promise<{ n: number; at: number }> => {
      await new Promise((r) => setTimeout(r, 11_000));
      const row = oneRow(
        await admin<{ n: string }[]>`
        SELECT (xact_commit + xact_rollback)::text AS n FROM pg_stat_database WHERE datname = current_database()`,
        "the database's statistics",
      );
      await admin`SELECT pg_stat_clear_snapshot()`;
      return { n: Number(row.n), at: Date.now() };
    };
    const first = await count();
    const before = await count();
    const ownPerMs = (before.n - first.n - 2) / (before.at - first.at);
    const n = 200;
    for (let i = 0; i < n; i++) {
      const res = await fetch(base + c.path, { headers: c.headers });
      if (!res.ok) throw new Error(`case ${c.id} answered ${res.status}: ${await res.text()}`);
      await res.arrayBuffer();
    }
    const after = await count();
    const own = ownPerMs * (after.at - before.at);
    return Math.round(((after.n - before.n - 2 - own) / n) * 100) / 100;
  } finally {
    await admin.end();
  }
}

const fmt = (n: number, digits = 1): string => n.toFixed(digits);

/** Writes a run's results, dated and with the load average, to BENCH_OUT or bench/results/`name`. */
async function writeResults(name: string, results: object): Promise<void> {
  const out = env.BENCH_OUT ?? join(packageRoot, 'bench', 'results', name);
  await writeFile(
    out,
    JSON.stringify({ measuredAt: new Date().toISOString(), loadavg: loadavg(), ...results }, null, 2) + '\n',
  );
  log(`\nWrote ${out}`);
}

/** The one-minute load average, for the log lines. */
const load1 = (): string => {
  const [one = NaN] = loadavg();
  return one.toFixed(2);
};

const peerMemory: { postgraphile?: () => { peakMb: number; rssMb: number } | undefined } = {};

/**
 * Debian's pgbouncer in transaction mode in front of the embedded Postgres, logging in as
 * `authenticator` with the password every server of the run uses; a note instead when it is
 * not installed.
 */
async function startPgBouncer(
  ownerUrl: string,
  home: string,
  password: string,
): Promise<{ child: ChildProcess; url: string } | string> {
  let binary: string;
  try {
    [binary = ''] = execFileSync('sh', ['-c', 'command -v pgbouncer || ls /usr/sbin/pgbouncer'], { encoding: 'utf8' })
      .trim()
      .split('\n');
  } catch {
    return 'pgbouncer is not installed (apt-get install pgbouncer), case (p) skipped';
  }
  const owner = new URL(ownerUrl);
  const port = await freePort();
  const database = owner.pathname.slice(1);
  const dir = join(home, 'pgbouncer');
  await mkdir(dir, { recursive: true });
  await chmod(dir, 0o755);
  await writeFile(join(dir, 'userlist.txt'), `"authenticator" "${password}"\n`, { mode: 0o644 });
  await writeFile(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `${database} = host=${owner.hostname} port=${owner.port} dbname=${database} user=authenticator password=${password}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = scram-sha-256',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      'pool_mode = transaction',
      'default_pool_size = 10',
      'max_client_conn = 200',
      // postgres.js sends the role as a startup parameter; the login is authenticator already.
      'ignore_startup_parameters = role',
    ].join('\n') + '\n',
    { mode: 0o644 },
  );
  const args = [...(process.getuid?.() === 0 ? ['-u', 'postgres'] : []), join(dir, 'pgbouncer.ini')];
  const child = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-2000)));
  const url = `postgres://authenticator:${password}@127.0.0.1:${port}/${database}`;
  const deadline = Date.now() + 15_000;
  for (;;) {
    const probe = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 2, prepare: false });
    try {
      await probe`SELECT 1`;
      return { child, url };
    } catch (err) {
      if (child.exitCode !== null || Date.now() > deadline) {
        child.kill('SIGKILL');
        return `pgbouncer did not start, case (p) skipped: ${err instanceof Error ? err.message : String(err)} ${stderr.slice(-300)}`;
      }
      await new Promise((r) => setTimeout(r, 200));
    } finally {
      await probe.end({ timeout: 1 });
    }
  }
}

/** Case (cpu)'s settings: those its baseline was measured with, unless told otherwise. */
const cpuOptions = () => ({
  rows: num('BENCH_CPU_ROWS', 200_000),
  seconds: 5,
  rounds: num('BENCH_CPU_ROUNDS', 4),
  connections: 8,
  kinds: kindsFrom(env.BENCH_CPU_KINDS),
  log,
});

async function main(): Promise<void> {
  if (env.BENCH_AGAINST) {
    // BENCH_CASES chose its requests once: say so rather than measure others than those asked for.
    if (env.BENCH_CASES && env.BENCH_CASES !== 'cpu')
      throw new Error(
        `BENCH_AGAINST measures the kinds of BENCH_CPU_KINDS (BENCH_CPU_KINDS=${env.BENCH_CASES}?), not BENCH_CASES`,
      );
    const report = await compareBuilds({
      against: env.BENCH_AGAINST,
      rows: num('BENCH_AGAINST_ROWS', 200_000),
      seconds: SECONDS,
      rounds: num('BENCH_AGAINST_ROUNDS', 4),
      connections: env.BENCH_CONNECTIONS ? CONNECTIONS[0]! : 8,
      kinds: kindsFrom(env.BENCH_CPU_KINDS),
      log,
    });
    await writeResults('against.json', report);
    return;
  }
  if (env.BENCH_CASES === 'cpu') {
    // Case (cpu) alone: it needs none of the run's servers.
    const cpu = await cpuAgainstBaseline(cpuOptions());
    for (const [id, most] of Object.entries(CPU_TARGETS)) {
      const measured = cpu.ratios[id]?.sum;
      log(
        `Target ${id} CPU per request vs ${cpu.baseline.commit}: <= ${most}×, measured ${measured}× → ${measured !== undefined && measured <= most ? 'met' : 'NOT met'}`,
      );
    }
    await writeResults('cpu-latest.json', cpu);
    return;
  }
  const started = Date.now();
  const home = await mkdtemp(join(tmpdir(), 'tally-bench-'));
  await chmod(home, 0o755); // the embedded server runs as the user postgres when we are root
  const pgPort = await freePort();
  const jwtSecret = randomBytes(48).toString('base64url');
  const loadAverageAtStart = loadavg();
  log(
    `Tally benchmark: ${cpus().length} cores, load average ${loadAverageAtStart.map((l) => l.toFixed(2)).join(' ')}, ${SECONDS} s per case`,
  );
  log(`Embedded Postgres in ${home} on port ${pgPort}; generating data…`);
  const pg = await startEmbedded({ home, port: pgPort, create: true });
  const pgData = join(home, 'pgdata');
  const children: ChildProcess[] = [];
  try {
    await migrate(pg.url);
    const owner = adminClient(pg.url);
    let dataset: Dataset;
    try {
      dataset = await generateDataset(owner, {
        mainRows: num('BENCH_MAIN_ROWS', 100_000),
        otherWorkspaces: num('BENCH_OTHER_WORKSPACES', 100),
        otherRows: num('BENCH_OTHER_ROWS', 10_000),
        largeRows: num('BENCH_LARGE_ROWS', 1_000_000),
        jwtSecret,
        log,
      });
    } finally {
      await owner.end();
    }
    log(`  generated in ${fmt(dataset.generationSeconds)} s`);

    const tallyPort = await freePort();
    const baselinePort = await freePort();
    const profileDir = join(packageRoot, 'bench', 'results', 'profiles');
    const profile = (name: string): string[] =>
      env.BENCH_CPU_PROF === '1'
        ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, `--cpu-prof-name=${name}-${Date.now()}.cpuprofile`]
        : [];
    const tallyEnv = {
      TALLY_HOME: home,
      TALLY_EMBEDDED_PG_PORT: String(pgPort),
      HOST: '127.0.0.1',
      TALLY_JWT_SECRET: jwtSecret,
      // The benchmark sends far more than a client may: the limit is raised by configuration.
      TALLY_RATE_LIMIT_PER_MINUTE: '10000000',
      LOG_LEVEL: env.LOG_LEVEL ?? 'info',
    };
    const tally = startProcess([...profile('tally'), 'dist/gateway/cli/main.js', 'serve'], {
      ...tallyEnv,
      PORT: String(tallyPort),
    });
    children.push(tally.child);
    const tallyBase = `http://127.0.0.1:${tallyPort}`;
    const baselineBase = `http://127.0.0.1:${baselinePort}`;
    await waitReady(`${tallyBase}/readyz`, tally.child, tally.output);
    // Every server of the run logs in as Tally's server does: authenticator, with the password
    // Tally gave it from the home folder on start (so it is set once the server is ready).
    const loginPassword = (await localSecrets(home)).authenticatorPassword;
    const loginUrl = Object.assign(new URL(pg.url), {
      username: 'authenticator',
      password: encodeURIComponent(loginPassword),
    }).toString();
    const baseline = startProcess([...profile('floor'), 'dist/bench/baseline.js'], {
      DATABASE_URL: loginUrl,
      PORT: String(baselinePort),
      TALLY_JWT_SECRET: jwtSecret,
    });
    children.push(baseline.child);
    const bases: Record<Case['target'], string> = {
      tally: tallyBase,
      baseline: baselineBase,
      postgraphile: '',
      pgbouncer: '',
    };
    const pids: Record<Case['target'], number | undefined> = {
      tally: tally.child.pid,
      baseline: baseline.child.pid,
      postgraphile: undefined,
      pgbouncer: undefined,
    };
    await waitReady(baselineBase + '/', baseline.child, baseline.output, true); // any answer: it has no health route

    // PostGraphile 5, installed on first use into a folder of its own (postgraphileEntry).
    const notes: string[] = [];
    let postgraphileUp = false;
    try {
      const entry = await postgraphileEntry();
      const port = await freePort();
      const pgl = startProcess([entry], {
        DATABASE_URL: loginUrl,
        PORT: String(port),
        TALLY_JWT_SECRET: jwtSecret,
        GRAPHILE_ENV: 'production',
      });
      children.push(pgl.child);
      bases.postgraphile = `http://127.0.0.1:${port}`;
      await waitReady(`${bases.postgraphile}/graphql`, pgl.child, pgl.output, true);
      postgraphileUp = true;
      peerMemory.postgraphile = () => memoryOf(pgl.child.pid);
      pids.postgraphile = pgl.child.pid;
    } catch (err) {
      notes.push(
        `PostGraphile 5 is not available, case (g) skipped: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`,
      );
    }

    // Tally behind PgBouncer in transaction mode, when Debian's pgbouncer is installed.
    let pgbouncerUp = false;
    const bouncer = await startPgBouncer(pg.url, home, loginPassword);
    if (typeof bouncer === 'string') notes.push(bouncer);
    else {
      children.push(bouncer.child);
      const port = await freePort();
      const behind = startProcess(['dist/gateway/cli/main.js', 'serve'], {
        ...tallyEnv,
        PORT: String(port),
        TALLY_DB_URI: bouncer.url,
        TALLY_DB_PREPARED_STATEMENTS: 'false',
      });
      children.push(behind.child);
      bases.pgbouncer = `http://127.0.0.1:${port}`;
      pids.pgbouncer = behind.child.pid;
      await waitReady(`${bases.pgbouncer}/readyz`, behind.child, behind.output);
      pgbouncerUp = true;
    }
    for (const note of notes) log(`  note: ${note}`);

    const probe = await fetch(`${tallyBase}/api/v1/personal_transactions`, {
      headers: { authorization: `Bearer ${dataset.main.jwt}` },
    });
    const wrapperPresent = probe.status !== 404;
    await probe.arrayBuffer();
    if (!wrapperPresent) log('  note: /api/v1 is not served by this build; case (b) is skipped');

    const only = env.BENCH_CASES ? new Set(env.BENCH_CASES.split(',')) : undefined;
    // The floor and case (a) always run: every other case is measured against them.
    const [floor, caseA, ...others] = cases(dataset, wrapperPresent, dataset.main.token, {
      postgraphile: postgraphileUp,
      pgbouncer: pgbouncerUp,
    });
    const all = [floor, caseA, ...others.filter((c) => !only || only.has(c.id))];
    // Every case must answer 2xx before it is measured: a benchmark of errors measures nothing.
    for (const c of all) {
      const res = await fetch(bases[c.target] + c.path, { method: c.method, headers: c.headers, body: c.body }).catch(
        (err: unknown) => {
          throw new Error(`case ${c.id} (${c.target}) did not answer: ${String((err as Error).cause ?? err)}`);
        },
      );
      const text = await res.text();
      if (!res.ok) throw new Error(`case ${c.id} answered ${res.status}: ${text.slice(0, 300)}`);
      if (c.id === 'e' && /"isError":true/.test(text))
        throw new Error(`case e returned a tool error: ${text.slice(0, 300)}`);
      if (c.id === 'g' && (/"errors"/.test(text) || !/"nodes":\[\{/.test(text)))
        throw new Error(`case g answered no rows: ${text.slice(0, 300)}`);
    }

    const results: Measurement[] = [];
    /** One stretch of load on a case: what autocannon and the process's CPU counter saw. */
    interface Window {
      requests: number;
      seconds: number;
      p50Ms: number;
      p99Ms: number;
      non2xx: number;
      errors: number;
      cpuMs: number;
      postgresCpuMs: number;
    }
    const window = async (c: Case, connections: number, seconds: number): Promise<Window> => {
      const cpuBefore = cpuMsOf(pids[c.target]);
      const postgresBefore = postgresCpuMsOf(pgData);
      const r = await drive(bases[c.target], c, connections, seconds);
      return {
        requests: r.requests.total,
        seconds,
        p50Ms: r.latency.p50,
        p99Ms: r.latency.p99,
        non2xx: r.non2xx,
        errors: r.errors + r.timeouts + (r.mismatches ?? 0),
        cpuMs: cpuMsOf(pids[c.target]) - cpuBefore,
        postgresCpuMs: postgresCpuMsOf(pgData) - postgresBefore,
      };
    };
    /**
     * A case's figures over its windows (throughput and CPU from the totals, the percentiles as
     * the mean of the windows'), compared with `against` when given.
     */
    const record = (c: Case, connections: number, windows: Window[], against?: Measurement): Measurement => {
      const sum = (f: (w: Window) => number) => windows.reduce((t, w) => t + f(w), 0);
      const requests = sum((w) => w.requests);
      const seconds = sum((w) => w.seconds);
      const rps = requests / seconds;
      const p50 = sum((w) => w.p50Ms) / windows.length;
      const p99 = sum((w) => w.p99Ms) / windows.length;
      const cpuMs = sum((w) => w.cpuMs);
      const postgresCpuMs = sum((w) => w.postgresCpuMs);
      const perRequest = (ms: number): number | null =>
        Number.isFinite(ms) && requests > 0 ? Math.round((ms / requests) * 1000) / 1000 : null;
      const m: Measurement = {
        case: c.id,
        title: c.title,
        target: c.target,
        connections,
        seconds,
        requests,
        reqPerSec: Math.round(rps),
        p50Ms: p50,
        p99Ms: p99,
        non2xx: sum((w) => w.non2xx),
        errors: sum((w) => w.errors),
        ratioToBaseline:
          against && c.comparable && against.reqPerSec > 0 ? Math.round((rps / against.reqPerSec) * 100) / 100 : null,
        p99RatioToBaseline:
          against && c.comparable && against.p99Ms > 0 ? Math.round((p99 / against.p99Ms) * 100) / 100 : null,
        serverCpuMsPerRequest: perRequest(cpuMs),
        postgresCpuMsPerRequest: perRequest(postgresCpuMs),
        tallyPeakRssMb: memoryOf(tally.child.pid)?.peakMb ?? null,
      };
      results.push(m);
      log(
        `  ${c.id.padEnd(8)} ${String(connections).padStart(3)} conn  ${String(m.reqPerSec).padStart(6)} req/s  p50 ${fmt(m.p50Ms)} ms  p99 ${fmt(m.p99Ms)} ms` +
          `${m.ratioToBaseline !== null ? `  ${fmt(m.ratioToBaseline, 2)}× floor, p99 ${fmt(m.p99RatioToBaseline ?? NaN, 2)}× floor's` : ''}` +
          `  ${fmt(m.serverCpuMsPerRequest ?? NaN, 3)} CPU ms/request, Postgres ${fmt(m.postgresCpuMsPerRequest ?? NaN, 3)}` +
          `${m.non2xx || m.errors ? `  (${m.non2xx} non-2xx, ${m.errors} errors)` : ''}  [load ${load1()}]`,
      );
      return m;
    };
    /**
     * Two measurements that are compared, taken in the order first, second, second, first, each
     * window half of BENCH_SECONDS: a drift of the machine's load during the pair (another
     * process, Postgres's checkpoints and autovacuum after the writes) weighs on both alike.
     * Measured one after the other, the same build's (b) ranged over 0.68-0.87x the floor.
     */
    const interleaved = async (
      [first, firstConnections]: [Case, number],
      [second, secondConnections]: [Case, number],
    ): Promise<[Measurement, Measurement]> => {
      const half = Math.max(1, Math.round(SECONDS / 2));
      const a1 = await window(first, firstConnections, half);
      const b1 = await window(second, secondConnections, half);
      const b2 = await window(second, secondConnections, half);
      const a2 = await window(first, firstConnections, half);
      const a = record(first, firstConnections, [a1, a2]);
      return [a, record(second, secondConnections, [b1, b2], a)];
    };
    /** A case and the floor at the same connections, interleaved: compared with that floor figure. */
    const paired = async (c: Case, connections: number): Promise<Measurement> =>
      (await interleaved([c.floor ?? floor, connections], [c, connections]))[1];

    // Warm-up before each case: JIT, prepared statements, pool connections. A second at four
    // connections left Tally's first case (a) 0.72-0.74x the floor in three runs where the same
    // read measured 0.79-0.84x later on: the floor's few functions are optimised sooner.
    const WARM_UP_SECONDS = 3;
    // A process that sat idle meanwhile (the floor during the MCP and growth cases, both while
    // the database grows) is cold again: a pair is measured right after its own warm-up.
    const warmUp = async (c: Case): Promise<void> => {
      await drive(baselineBase, c.floor ?? floor, 16, WARM_UP_SECONDS);
      await drive(bases[c.target], c, 16, WARM_UP_SECONDS);
    };
    // The servers have just started: their first minute differs from what follows (the JIT,
    // the first full collections, Postgres's buffers). (a) first at 0.347 CPU ms per request
    // against 0.297-0.308 later in the same run (b5584ab): the run measures the steady state.
    const START_UP_SECONDS = 10;
    await drive(baselineBase, floor, 16, START_UP_SECONDS);
    await drive(tallyBase, caseA, 16, START_UP_SECONDS);
    for (const c of all.slice(1)) {
      await warmUp(c);
      for (const connections of CONNECTIONS) await paired(c, connections);
    }
    for (const [id, body] of toolErrors) log(`  note: case ${id} answered tool errors, e.g. ${body}`);

    // Tally against PostGraphile on the list read: a pair of its own, interleaved (a, g, g, a).
    // Their req/s from their floor pairs, taken minutes apart, differed by the machine's drift.
    const peer = all.find((c) => c.id === 'g');
    let tallyVsPostgraphile: number | null = null;
    if (peer) {
      const [tallyRead, peerRead] = await interleaved(
        [{ ...caseA, id: 'a@vs-g', comparable: false }, 16],
        [{ ...peer, id: 'g@vs-a', comparable: false }, 16],
      );
      tallyVsPostgraphile =
        peerRead.reqPerSec > 0 ? Math.round((tallyRead.reqPerSec / peerRead.reqPerSec) * 100) / 100 : null;
      log(`  Tally ${tallyRead.reqPerSec} req/s vs PostGraphile ${peerRead.reqPerSec} (${tallyVsPostgraphile}×)`);
    }

    // Many MCP clients at once (the endpoint is stateless: a client's session is its connection).
    const mcp = all.find((c) => c.id === 'e');
    const mcpSessions = num('BENCH_MCP_SESSIONS', 100);
    let mcpHold: number | null = null;
    if (mcp && mcpSessions > 0) {
      // Its own pair of rows (e@hold): 16 sessions and many, interleaved, neither against the floor.
      const hold: Case = { ...mcp, id: 'e@hold', comparable: false };
      const [at16, many] = await interleaved([hold, 16], [hold, mcpSessions]);
      mcpHold = at16.reqPerSec > 0 ? Math.round((many.reqPerSec / at16.reqPerSec) * 100) / 100 : null;
      log(`  MCP: ${mcpSessions} concurrent sessions ${many.reqPerSec} req/s vs ${at16.reqPerSec} at 16 (${mcpHold}×)`);
    }

    // Cost as data grows: case (a) on a 10,000-row and a large workspace, one connection (latency).
    const growth: { rows: number; p50Ms: number; p99Ms: number; meanMs: number; reqPerSec: number; non2xx: number }[] =
      [];
    for (const ws of [dataset.small, dataset.large]) {
      if (!ws) continue;
      const c: Case = {
        ...caseA,
        id: `a@${ws.rows}`,
        headers: { apikey: dataset.apikey, authorization: `Bearer ${ws.jwt}` },
      };
      const probe = await fetch(tallyBase + c.path, { headers: c.headers });
      const text = await probe.text();
      if (!probe.ok) throw new Error(`growth case on ${ws.rows} rows answered ${probe.status}: ${text.slice(0, 300)}`);
      await drive(tallyBase, c, 1, 1);
      const r = await drive(tallyBase, c, 1, SECONDS);
      // autocannon's histogram has millisecond resolution, too coarse for a sub-millisecond
      // mean; with one connection (a closed loop) the mean latency is 1 s / throughput.
      const meanMs = Math.round((1000 / r.requests.average) * 1000) / 1000;
      growth.push({
        rows: ws.rows,
        p50Ms: r.latency.p50,
        p99Ms: r.latency.p99,
        meanMs,
        reqPerSec: Math.round(r.requests.average),
        non2xx: r.non2xx,
      });
      log(
        `  growth   (a) on ${ws.rows.toLocaleString('en')} rows: ${Math.round(r.requests.average)} req/s, mean ${fmt(meanMs, 3)} ms, p99 ${fmt(r.latency.p99)} ms` +
          `${r.non2xx ? `  (${r.non2xx} non-2xx)` : ''}  [load ${load1()}]`,
      );
    }

    const txPerRead = await transactionsPerRead(pg.url, tallyBase, caseA);
    const baselineTx = await transactionsPerRead(pg.url, baselineBase, floor);
    log(`  Postgres transactions per read (a): Tally ${txPerRead}, floor ${baselineTx}`);

    // Many workspaces: case (a) against the floor right before and right after the database
    // grows to BENCH_MANY_WORKSPACES workspaces; the measured workspace's reads must not slow
    // down. Both pairs are taken at the same point of the run: comparing with the first (a),
    // measured before every other case had warmed and grown the process, blamed the workspaces
    // for what the other cases left behind.
    const manyWorkspaces = num('BENCH_MANY_WORKSPACES', 1000);
    let manyRatio: number | null = null;
    if (manyWorkspaces > dataset.others + 2) {
      const before: Case = { ...caseA, id: 'a@before-many' };
      await warmUp(before);
      const readBefore = await paired(before, 16);
      const owner = adminClient(pg.url);
      try {
        const add = manyWorkspaces - dataset.others - 2;
        for (let i = 0; i < add; i++) {
          const ws = await createWorkspace(owner, `Bench many ${i}`, 'USD', 'bench');
          await owner.begin(async (tx) => {
            await tx`SET LOCAL session_replication_role = replica`;
            await tx`SET LOCAL synchronous_commit = off`;
            await generateExpenses(tx, ws.id, 1000);
          });
        }
        await owner`VACUUM ANALYZE public.personal_transactions`;
        await owner`CHECKPOINT`;
        log(`  ${manyWorkspaces.toLocaleString('en')} workspaces now (${add} added, 1,000 expenses each)`);
      } finally {
        await owner.end();
      }
      const many: Case = { ...caseA, id: 'a@many' };
      await warmUp(many);
      const after = await paired(many, 16);
      manyRatio =
        readBefore.ratioToBaseline && after.ratioToBaseline
          ? Math.round((after.ratioToBaseline / readBefore.ratioToBaseline) * 100) / 100
          : null;
    }

    // Case (f): the figures of a workspace of 2,000 funds, each request timed on its own.
    let fundFigures: Record<string, number> | undefined;
    if (!only || only.has('f')) {
      const owner = adminClient(pg.url);
      try {
        const ws = await fundsWorkspace(owner, jwtSecret);
        fundFigures = await timeFundFigures(tallyBase, ws, dataset.apikey);
      } finally {
        await owner.end();
      }
      for (const [name, ms] of Object.entries(fundFigures))
        log(`  (f) ${name} at ${FUND_FIGURES_FUNDS.toLocaleString('en')} funds: ${ms} ms`);
    }

    // A noisy neighbour: two read tokens of the main workspace keep ten reads running that last
    // until the statement timeout (a back-reference regex over every note); meanwhile another
    // workspace runs the list read at 4 connections and exchanges its token. Its reads and
    // exchanges must not wait for a connection until the deadline (504 after 3 s).
    let neighbour: { measurement: Measurement; exchangeMaxMs: number; exchangeFailures: number } | undefined;
    if (!only || only.has('n')) {
      const owner = adminClient(pg.url);
      let stop = false;
      const loops: Promise<void>[] = [];
      try {
        const worst = `/rest/v1/personal_transactions?select=id&note=match.${encodeURIComponent('(.{0,9}){1,60}\\1z')}`;
        for (let t = 0; t < 2; t++) {
          const { id } = await createToken(owner, dataset.main.id, 'read', 'bench neighbour', 'bench');
          const jwt = await signAccessToken(jwtKeys(jwtSecret), {
            role: 'api_read',
            workspace_id: dataset.main.id,
            scope: 'read',
            sub: id,
          });
          const headers = { apikey: dataset.apikey, authorization: `Bearer ${jwt}` };
          for (let i = 0; i < 5; i++)
            loops.push(
              (async () => {
                while (!stop)
                  await fetch(tallyBase + worst, { headers }).then(
                    (r) => r.arrayBuffer(),
                    () => undefined,
                  );
              })(),
            );
        }
        // The neighbour holds its share of the pool before the victim is measured.
        let held = 0;
        for (let i = 0; i < 400 && held < 4; i++) {
          const ready = (await (await fetch(`${tallyBase}/readyz`)).json()) as {
            pool?: { size: number; free: number };
          };
          held = ready.pool ? ready.pool.size - ready.pool.free : 0;
          if (held < 4) await new Promise((r) => setTimeout(r, 50));
        }
        log(`  n        the neighbour's reads hold ${held} connections of the pool`);
        const victim: Case = {
          ...caseA,
          id: 'n',
          title: 'case (a) for another workspace while two read tokens of one workspace run ten reads to the timeout',
          headers: { apikey: dataset.apikey, authorization: `Bearer ${dataset.small.jwt}` },
        };
        const measurement = record(victim, 4, [await window(victim, 4, SECONDS)]);
        let exchangeMaxMs = 0;
        let exchangeFailures = 0;
        for (let i = 0; i < 5; i++) {
          const t0 = performance.now();
          const res = await fetch(`${tallyBase}/functions/v1/api-token`, {
            method: 'POST',
            headers: { authorization: `Bearer ${dataset.small.token}` },
          });
          await res.arrayBuffer();
          exchangeMaxMs = Math.max(exchangeMaxMs, Math.round(performance.now() - t0));
          if (!res.ok) exchangeFailures++;
        }
        log(
          `  n        token exchange of the other workspace: max ${fmt(exchangeMaxMs)} ms, ${exchangeFailures} failed`,
        );
        neighbour = { measurement, exchangeMaxMs, exchangeFailures };
      } finally {
        stop = true;
        await owner`SELECT pg_catalog.pg_cancel_backend(pid) FROM pg_catalog.pg_stat_activity WHERE application_name = 'tally' AND state = 'active' AND query LIKE '%~%'`;
        await Promise.all(loops);
        await owner.end();
      }
    }

    const tallyMemory = memoryOf(tally.child.pid);
    const baselineMemory = memoryOf(baseline.child.pid);
    const postgraphileMemory = peerMemory.postgraphile?.();
    const at = (id: string) => results.filter((m) => m.case === id && m.connections === 16).at(-1);
    const [onSmall, onLarge] = growth;
    const growthRatio = onSmall && onLarge ? Math.round((onLarge.meanMs / onSmall.meanMs) * 100) / 100 : null;
    const target = (label: string, measured: number | null | undefined, met: (v: number) => boolean) => ({
      target: label,
      measured: measured ?? null,
      met: measured !== null && measured !== undefined && met(measured),
    });
    // Cases with a floor of their own, set against the list read's floor as well (its mean over
    // the run): what the heavier query or the write costs in the database, not in Tally.
    const listFloors = results.filter((m) => m.case === 'baseline' && m.connections === 16);
    const listFloorRps = listFloors.reduce((t, m) => t + m.reqPerSec, 0) / listFloors.length;
    for (const c of all.filter((c) => c.floor)) {
      const m = at(c.id);
      if (m && listFloorRps > 0)
        notes.push(
          `(${c.id}) is ${fmt(m.reqPerSec / listFloorRps, 2)}× the list read's floor (${Math.round(listFloorRps)} req/s, mean of the run), ` +
            `${fmt(m.ratioToBaseline ?? NaN, 2)}× its own (${c.floor!.title})`,
        );
    }
    // Case (k): Tally on a Citus coordinator against Tally on one plain PostgreSQL 15.
    let citus: CitusReport | undefined;
    if (!only || only.has('k')) {
      const ran = await citusCase({
        jwtSecret,
        rows: num('BENCH_CITUS_ROWS', 20_000),
        seconds: SECONDS,
        connections: CONNECTIONS,
        log,
      });
      if (typeof ran === 'string') {
        notes.push(ran);
        log(`  note: ${ran}`);
      } else citus = ran;
    }
    const citusAt = (name: string) => citus?.figures.find((f) => f.case === name && f.connections === 16)?.ratio;
    // Case (cpu): CPU per request against the committed baseline, on a Postgres of its own.
    let cpu: CpuReport | undefined;
    if (!only || only.has('cpu')) cpu = await cpuAgainstBaseline(cpuOptions());
    const cpuTargets = Object.fromEntries(
      Object.entries(CPU_TARGETS).map(([id, most]) => [
        `${id}CpuPerRequestVsBaseline`,
        target(
          `<= ${most}× ${cpu?.baseline.commit ?? 'the baseline'}'s (Tally + Postgres)`,
          cpu?.ratios[id]?.sum,
          (v) => v <= most,
        ),
      ]),
    );

    // The fund figures' targets: rpc/fund_summaries and the computed field summary.
    const fundFigureTargets = (where: string, figures: Record<string, number> | undefined) =>
      Object.fromEntries(
        ['GET /rest/v1/rpc/fund_summaries', 'GET /rest/v1/funds?select=*,summary'].map((name) => [
          `fundFigures ${name} on ${where}`,
          target(
            `< ${FUND_FIGURES_TARGET_MS} ms at ${FUND_FIGURES_FUNDS} funds`,
            figures?.[name],
            (v) => v < FUND_FIGURES_TARGET_MS,
          ),
        ]),
      );
    const targets: Record<string, { target: string; measured: number | null; met: boolean }> = {
      restReadVsFloorAt16: target('>= 0.85× floor', at('a')?.ratioToBaseline, (v) => v >= 0.85),
      restReadP99VsFloorAt16: target("<= 1.2× floor's p99", at('a')?.p99RatioToBaseline, (v) => v <= 1.2),
      wrapperReadVsFloorAt16: target('>= 0.85× floor', at('b')?.ratioToBaseline, (v) => v >= 0.85),
      wrapperReadP99VsFloorAt16: target("<= 1.2× floor's p99", at('b')?.p99RatioToBaseline, (v) => v <= 1.2),
      fundsWithTransactionsVsFloorAt16: target(
        '>= 0.6× its floor (same transaction)',
        at('c')?.ratioToBaseline,
        (v) => v >= 0.6,
      ),
      singleRowPostVsFloorAt16: target(
        '>= 0.7× its floor (same transaction)',
        at('d')?.ratioToBaseline,
        (v) => v >= 0.7,
      ),
      mcpListVsFloorAt16: target('>= 0.5× floor', at('e')?.ratioToBaseline, (v) => v >= 0.5),
      restReadVsPostGraphileAt16: target('> 1× PostGraphile', tallyVsPostgraphile, (v) => v > 1),
      pgbouncerReadVsFloorAt16: target(
        'answers 2xx (figure for information)',
        at('p')?.ratioToBaseline,
        () => (at('p')?.non2xx ?? 1) === 0 && (at('p')?.errors ?? 1) === 0,
      ),
      peakRssMb: target('< 150 MB', tallyMemory?.peakMb, (v) => v < 150),
      postgresTransactionsPerRead: target('1', txPerRead, (v) => v <= 1.05),
      latencyLargeVsSmallWorkspace: target('<= 1.2', growthRatio, (v) => v <= 1.2),
      readWithManyWorkspacesVsBefore: target('>= 0.9 (not slower)', manyRatio, (v) => v >= 0.9),
      neighbourVictimReadP99Ms: target(
        '< 3000 ms and every answer 2xx (no wait for a connection until the deadline)',
        neighbour?.measurement.p99Ms,
        (v) => v < 3000 && neighbour?.measurement.non2xx === 0,
      ),
      neighbourVictimExchangeMaxMs: target(
        '< 3000 ms and every answer 2xx',
        neighbour?.exchangeMaxMs,
        (v) => v < 3000 && neighbour?.exchangeFailures === 0,
      ),
      mcpThroughputManySessionsVs16: target(`>= 0.9 (${mcpSessions} sessions hold)`, mcpHold, (v) => v >= 0.9),
      ...fundFigureTargets('plain PostgreSQL', fundFigures),
      ...fundFigureTargets('Citus', citus?.fundFigures.citus),
      citusReadVsPlainPostgresAt16: target('>= 0.5× plain PostgreSQL 15', citusAt('k read'), (v) => v >= 0.5),
      citusInsertVsPlainPostgresAt16: target('>= 0.5× plain PostgreSQL 15', citusAt('k insert'), (v) => v >= 0.5),
      ...cpuTargets,
      cpuCommitsPerListRead: target('1', cpu?.measured.list?.commits, (v) => v <= 1.05),
    };

    log('');
    log(
      "| case | conn | req/s | p50 ms | p99 ms | × floor | p99 × floor's | server CPU ms/req | Postgres CPU ms/req | Tally peak RSS MB |",
    );
    log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const m of results) {
      log(
        `| ${m.case} | ${m.connections} | ${m.reqPerSec} | ${fmt(m.p50Ms)} | ${fmt(m.p99Ms)} | ${m.ratioToBaseline === null ? '' : fmt(m.ratioToBaseline, 2)} | ${m.p99RatioToBaseline === null ? '' : fmt(m.p99RatioToBaseline, 2)} | ${m.serverCpuMsPerRequest ?? ''} | ${m.postgresCpuMsPerRequest ?? ''} | ${m.target === 'tally' ? (m.tallyPeakRssMb ?? '') : ''} |`,
      );
    }
    log('');
    log(
      `Peak RSS: Tally ${tallyMemory?.peakMb} MB, floor ${baselineMemory?.peakMb} MB${postgraphileMemory ? `, PostGraphile ${postgraphileMemory.peakMb} MB` : ''}`,
    );
    if (citus)
      log(
        `Citus (k): the coordinator's hop costs a request ${citus.hopMs.read} ms (list read) and ${citus.hopMs.insert} ms (insert) at one connection`,
      );
    for (const note of notes) log(`Note: ${note}`);
    for (const [name, t] of Object.entries(targets))
      log(`Target ${name}: ${t.target}, measured ${t.measured} → ${t.met ? 'met' : 'NOT met'}`);
    log(
      `Load average at the end: ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
    );

    const report = {
      measuredAt: new Date().toISOString(),
      machine: {
        cores: cpus().length,
        model: cpus()[0]?.model,
        loadAverageAtStart,
        loadAverageAtEnd: loadavg(),
        node: process.version,
      },
      settings: {
        secondsPerCase: SECONDS,
        connections: CONNECTIONS,
        tallyPool: 10,
        baselinePool: 10,
        postgraphilePool: 10,
        logLevel: env.LOG_LEVEL ?? 'info',
      },
      data: {
        mainRows: dataset.main.rows,
        otherWorkspaces: dataset.others,
        otherRows: dataset.small.rows,
        largeRows: dataset.large?.rows ?? 0,
        manyWorkspaces,
        generationSeconds: dataset.generationSeconds,
      },
      notes,
      results,
      growth,
      transactionsPerRead: { tally: txPerRead, baseline: baselineTx },
      memory: { tally: tallyMemory, baseline: baselineMemory, postgraphile: postgraphileMemory },
      fundFigures: fundFigures ?? null,
      citus: citus ?? null,
      cpu: cpu ?? null,
      targets,
      totalSeconds: Math.round((Date.now() - started) / 1000),
    };
    await mkdir(join(OUT, '..'), { recursive: true });
    await writeFile(OUT, JSON.stringify(report, null, 2) + '\n');
    log(`\nWrote ${OUT} (${report.totalSeconds} s in all)`);
  } finally {
    for (const child of children) await stopProcess(child);
    await pg.stop();
    await rm(home, { recursive: true, force: true }).catch(() => {});
  }
}

main().catch((err) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
