// `BENCH_AGAINST=<a built checkout of another commit> npm run bench`: what a request costs in
// this build against that one, side by side on one Postgres, in CPU time per request (Tally's
// process, and Postgres's backends of its database, read from /proc) rather than in requests a
// second, which a machine shared with other work moves by ±20 %. Each build has its own
// database in the one cluster (migrated and filled by that build's own code) and its own
// `tally serve`; their windows alternate (this, that, then that, this) within the same minutes, so
// a drift of the machine's load weighs on both, and every window's figure is kept to show the
// spread. Beside the CPU: what Postgres ran per request, counted on the wire by a proxy in front
// of each server's database connections (statements, parses, round trips, commits) and by
// pg_stat_statements with track_planning (nested statements, planning and execution time).
// The request kinds, and how their writes keep finding rows, are bench/kinds.ts's. With this
// build alone (measureBuilds), the same figures for bench/cpu.ts, which sets them against the
// committed baseline.

import autocannon from 'autocannon';
import { execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import postgres, { type Sql } from 'postgres';
import { startEmbedded } from '../gateway/db/embedded.js';
import { freePort } from '../gateway/db/free-port.js';
import { oneRow } from '../gateway/engine/invariant.js';
import { packageRoot } from '../gateway/paths.js';
import { wireProxy, type WireCounts, type WireProxy } from '../tests/harness/wire.js';
import { KIND_TITLES, requestsFor, type Request } from './kinds.js';
import { cpuMsOf, startProcess, stopProcess, waitReady } from './proc.js';

export interface MeasureOptions {
  rows: number;
  seconds: number;
  rounds: number;
  connections: number;
  /** The request kinds to measure (bench/kinds.ts's ids). */
  kinds: string[];
  log: (line: string) => void;
}

export interface AgainstOptions extends MeasureOptions {
  /** The other build: a checkout with `dist/` built (npm ci && npm run build). */
  against: string;
}

interface Build {
  name: string;
  dir: string;
  database: string;
  ownerUrl: string;
  proxy: WireProxy;
  child: ChildProcess;
  base: string;
  /** The build's database as its owner: the rows a DELETE takes are inserted through it. */
  owner: Sql;
  cases: Map<string, Request>;
}

/** One window of load on one build's case: what it cost, per answered request. */
interface CostWindow {
  requests: number;
  non2xx: number;
  tallyCpuMs: number;
  /** The backends of the build's database. */
  postgresCpuMs: number;
  /** Every other process of the cluster (checkpointer, WAL writer, autovacuum, the other build's backends). */
  postgresOtherCpuMs: number;
  wire: WireCounts;
  /** Statements run inside functions and triggers (pg_stat_statements, track = all). */
  nestedStatements: number;
  planMs: number;
  executeMs: number;
  plans: number;
}

export interface CaseCost {
  build: string;
  case: string;
  windows: CostWindow[];
}

const WATCH = 'tally-changes';
const notWatch = (name: string): boolean => name !== WATCH;

/** CPU (ms) of a cluster's processes so far: its backends of `database`, and everything else. */
function clusterCpu(dataDir: string, database: string): { own: number; other: number } {
  const postmaster = readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]!.trim();
  let own = 0;
  let other = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const fields = readFileSync(`/proc/${entry}/stat`, 'utf8')
        .replace(/^.*\) /s, '')
        .split(' ');
      if (fields[1] !== postmaster) continue;
      const cpu = (Number(fields[11]) + Number(fields[12])) * 10;
      // A backend's title: "postgres: <user> <database> <address> <state>".
      const title = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (title.split(' ')[2] === database) own += cpu;
      else other += cpu;
    } catch {
      // ended meanwhile
    }
  }
  return { own, other };
}

interface StatementStats {
  nested: number;
  planMs: number;
  executeMs: number;
  plans: number;
}

async function statementStats(admin: Sql, database: string): Promise<StatementStats> {
  const row = oneRow(
    await admin<{ nested: string; plan_ms: number; execute_ms: number; plans: string }[]>`
      SELECT coalesce(sum(calls) FILTER (WHERE NOT toplevel), 0)::text AS nested,
             coalesce(sum(total_plan_time) FILTER (WHERE toplevel), 0)::float8 AS plan_ms,
             coalesce(sum(total_exec_time) FILTER (WHERE toplevel), 0)::float8 AS execute_ms,
             coalesce(sum(plans) FILTER (WHERE toplevel), 0)::text AS plans
        FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
       WHERE d.datname = ${database}`,
    'pg_stat_statements',
  );
  return { nested: Number(row.nested), planMs: row.plan_ms, executeMs: row.execute_ms, plans: Number(row.plans) };
}

/** The commit a checkout is at, for the report. */
function commitOf(dir: string): string {
  try {
    const git = (...args: string[]) => execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8' }).trim();
    // A checkout with changes not committed is that commit and more.
    return git('rev-parse', '--short', 'HEAD') + (git('status', '--porcelain', '--untracked-files=no') ? '+' : '');
  } catch {
    return basename(dir);
  }
}

interface GeneratedData {
  main: { id: string; jwt: string; token: string };
  apikey: string;
}

/** A database of the cluster for one build: migrated and filled by that build's own code. */
async function prepareBuild(
  dir: string,
  index: number,
  cluster: { ownerUrl: string; loginPassword: string; jwtSecret: string; rows: number },
  log: (line: string) => void,
): Promise<Omit<Build, 'child' | 'base' | 'owner'> & { data: GeneratedData; loginUrl: string }> {
  const database = `bench_build_${index}`;
  const admin = postgres(cluster.ownerUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`CREATE DATABASE ${database}`);
  } finally {
    await admin.end();
  }
  const ownerUrl = Object.assign(new URL(cluster.ownerUrl), { pathname: '/' + database }).toString();
  const loginUrl = Object.assign(new URL(ownerUrl), {
    username: 'authenticator',
    password: encodeURIComponent(cluster.loginPassword),
  }).toString();
  execFileSync(process.execPath, [join(dir, 'dist/gateway/cli/main.js'), 'migrate'], {
    cwd: dir,
    env: {
      ...process.env,
      NODE_OPTIONS: '',
      DATABASE_URL: ownerUrl,
      TALLY_DB_URI: loginUrl,
      TALLY_JWT_SECRET: cluster.jwtSecret,
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const owner = postgres(ownerUrl, { max: 1, onnotice: () => {} });
  let data: GeneratedData;
  try {
    // The build's own generator: its schema, its admin functions.
    const generator = (await import(pathToFileURL(join(dir, 'dist/bench/data.js')).href)) as {
      generateDataset(sql: Sql, o: Record<string, unknown>): Promise<GeneratedData>;
    };
    data = await generator.generateDataset(owner, {
      mainRows: cluster.rows,
      otherWorkspaces: 5,
      otherRows: 1000,
      largeRows: 0,
      jwtSecret: cluster.jwtSecret,
      log: () => {},
    });
    await owner`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`;
  } finally {
    await owner.end();
  }
  log(
    `  ${commitOf(dir)}: database ${database} migrated by its own code, ${cluster.rows.toLocaleString('en')} expenses`,
  );
  const proxy = await wireProxy(loginUrl);
  return { name: commitOf(dir), dir, database, ownerUrl, proxy, cases: new Map(), data, loginUrl };
}

const subtract = (a: WireCounts, b: WireCounts): WireCounts => ({
  statements: a.statements - b.statements,
  parses: a.parses - b.parses,
  roundTrips: a.roundTrips - b.roundTrips,
  commits: a.commits - b.commits,
  rollbacks: a.rollbacks - b.rollbacks,
});

export interface CostReport {
  builds: string[];
  settings: { rows: number; seconds: number; rounds: number; connections: number };
  costs: CaseCost[];
  /** The change watch of each build: what its poll costs a second, apart from requests. */
  watch: Record<string, { statementsPerSecond: number; commitsPerSecond: number }>;
  /** The kinds a build could not answer (a route or tool it lacks), each with its answer. */
  skipped: Record<string, Record<string, string>>;
}

export interface AgainstReport extends CostReport {
  /** Each build's figures per request, by case (bench/cpu-baseline.json's are copied from these). */
  perRequest: Record<string, Record<string, PerRequest>>;
  /** This build's CPU per request (Tally + its Postgres backends) over the other's, per case. */
  ratios: Record<string, { mean: number; min: number; max: number }>;
}

/** What a request of a case cost a build: CPU ms (Tally's, its Postgres backends'), and per request on the wire. */
export interface PerRequest {
  tallyMs: number;
  postgresMs: number;
  statements: number;
  roundTrips: number;
  commits: number;
  nested: number;
}

const r3 = (n: number) => Math.round(n * 1000) / 1000;

/** A case's windows summed, per answered request. */
export function perRequest(c: CaseCost): PerRequest {
  const n = c.windows.reduce((t, w) => t + w.requests, 0);
  const sum = (f: (w: CostWindow) => number) => r3(c.windows.reduce((t, w) => t + f(w), 0) / n);
  return {
    tallyMs: sum((w) => w.tallyCpuMs),
    postgresMs: sum((w) => w.postgresCpuMs),
    statements: sum((w) => w.wire.statements),
    roundTrips: sum((w) => w.wire.roundTrips),
    commits: sum((w) => w.wire.commits),
    nested: sum((w) => w.nestedStatements),
  };
}

/** Runs the comparison; see the top of this file. */
export async function compareBuilds(o: AgainstOptions): Promise<AgainstReport> {
  const report = await measureBuilds([packageRoot, o.against], o);
  const ratios: AgainstReport['ratios'] = {};
  for (const id of new Set(report.costs.map((c) => c.case))) {
    const [mine, theirs] = report.builds.map((b) => report.costs.find((c) => c.build === b && c.case === id)?.windows);
    if (!mine || !theirs) continue; // a kind the other build cannot answer
    const cpu = (w: CostWindow) => (w.tallyCpuMs + w.postgresCpuMs) / w.requests;
    const each = mine!.map((w, i) => cpu(w) / cpu(theirs![i]!));
    const total = (ws: CostWindow[]) =>
      ws.reduce((t, w) => t + w.tallyCpuMs + w.postgresCpuMs, 0) / ws.reduce((t, w) => t + w.requests, 0);
    const r2 = (n: number) => Math.round(n * 100) / 100;
    ratios[id] = { mean: r2(total(mine!) / total(theirs!)), min: r2(Math.min(...each)), max: r2(Math.max(...each)) };
  }
  const perBuild = (b: string) =>
    Object.fromEntries(report.costs.filter((c) => c.build === b).map((c) => [c.case, perRequest(c)]));
  const compared = { ...report, perRequest: Object.fromEntries(report.builds.map((b) => [b, perBuild(b)])), ratios };
  printReport(compared, o.log);
  return compared;
}

/** BENCH_CPU_PROF=1: each build's server runs with --cpu-prof, its profile written when it stops. */
const profileFlags = (index: number): string[] =>
  process.env.BENCH_CPU_PROF === '1'
    ? [
        '--cpu-prof',
        `--cpu-prof-dir=${join(packageRoot, 'bench', 'results', 'profiles')}`,
        `--cpu-prof-name=build-${index}-${Date.now()}.cpuprofile`,
      ]
    : [];

/** What each case costs each build (a checkout with `dist/` built; the first is usually this one). */
export async function measureBuilds(dirs: string[], o: MeasureOptions): Promise<CostReport> {
  const home = await mkdtemp(join(tmpdir(), 'tally-bench-against-'));
  await chmod(home, 0o755);
  const dataDir = join(home, 'pgdata');
  const port = await freePort();
  let pg = await startEmbedded({ home, port, create: true });
  // pg_stat_statements needs to be loaded at start: set it, then start the server again.
  const setup = postgres(pg.url, { max: 1, onnotice: () => {} });
  try {
    await setup`ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`;
    await setup`ALTER SYSTEM SET pg_stat_statements.track = 'all'`;
    await setup`ALTER SYSTEM SET pg_stat_statements.track_planning = on`;
    await setup`ALTER SYSTEM SET max_connections = 300`;
  } finally {
    await setup.end();
  }
  await pg.stop();
  pg = await startEmbedded({ home, port });
  const jwtSecret = randomBytes(48).toString('base64url');
  const loginPassword = randomBytes(24).toString('base64url');
  const builds: Build[] = [];
  const skipped: CostReport['skipped'] = {};
  const admin = postgres(pg.url, { max: 1, onnotice: () => {} });
  try {
    await admin`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`;
    for (const [i, dir] of dirs.entries()) {
      const prepared = await prepareBuild(dir, i, { ownerUrl: pg.url, loginPassword, jwtSecret, rows: o.rows }, o.log);
      const tallyPort = await freePort();
      const serve = startProcess([...profileFlags(i), join(dir, 'dist/gateway/cli/main.js'), 'serve'], {
        DATABASE_URL: prepared.ownerUrl,
        TALLY_DB_URI: prepared.proxy.url,
        TALLY_JWT_SECRET: jwtSecret,
        PORT: String(tallyPort),
        HOST: '127.0.0.1',
        TALLY_RATE_LIMIT_PER_MINUTE: '10000000',
        // The writes of a run log some 100,000 changes a minute (the bulk insert's), past the
        // activity log's 64 MiB of a workspace, which then refuses every write: the run measures
        // a write, not that bound (a build without the log ignores the setting).
        TALLY_ACTIVITY_BUDGET_BYTES: String(2 ** 40),
        LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
      });
      const base = `http://127.0.0.1:${tallyPort}`;
      await waitReady(`${base}/readyz`, serve.child, serve.output);
      const owner = postgres(prepared.ownerUrl, { max: 1, onnotice: () => {} });
      const build: Build = { ...prepared, child: serve.child, base, owner, cases: new Map() };
      builds.push(build);
      const { main, apikey } = prepared.data;
      build.cases = await requestsFor(owner, { workspace: main.id, apikey, jwt: main.jwt, token: main.token }, o.kinds);
    }
    for (const [i, b] of builds.entries()) skipped[b.name] = await keepAnswering(b, i === 0);
    const caseIds = [...builds[0]!.cases.keys()];
    const drive = (b: Build, id: string, seconds: number) => {
      const c = b.cases.get(id)!;
      const vary = c.vary;
      return autocannon({
        url: b.base + c.path,
        method: c.method,
        headers: c.headers,
        body: c.body,
        requests: vary ? [{ setupRequest: (req) => ({ ...req, ...vary() }) }] : undefined,
        connections: o.connections,
        duration: seconds,
      });
    };
    const measure = async (b: Build, id: string): Promise<CostWindow> => {
      // The rows the window's sends take are made before its CPU is read.
      await b.cases.get(id)!.ready?.(o.seconds);
      const tally0 = cpuMsOf(b.child.pid);
      const pg0 = clusterCpu(dataDir, b.database);
      const wire0 = b.proxy.total(notWatch);
      const stats0 = await statementStats(admin, b.database);
      const r = await drive(b, id, o.seconds);
      const stats1 = await statementStats(admin, b.database);
      const pg1 = clusterCpu(dataDir, b.database);
      const tally1 = cpuMsOf(b.child.pid);
      const wire = subtract(b.proxy.total(notWatch), wire0);
      await b.cases.get(id)!.tidy?.();
      // The two reads of pg_stat_statements are statements of the admin's own (another database).
      return {
        requests: r.requests.total,
        non2xx: r.non2xx,
        tallyCpuMs: tally1 - tally0,
        postgresCpuMs: pg1.own - pg0.own,
        postgresOtherCpuMs: pg1.other - pg0.other,
        wire,
        nestedStatements: stats1.nested - stats0.nested,
        planMs: stats1.planMs - stats0.planMs,
        executeMs: stats1.executeMs - stats0.executeMs,
        plans: stats1.plans - stats0.plans,
      };
    };
    const costs = new Map<string, CaseCost>();
    for (const b of builds)
      for (const id of b.cases.keys()) costs.set(`${b.name} ${id}`, { build: b.name, case: id, windows: [] });
    // Warm-up: the JIT, every pool connection's prepared statements.
    for (const id of caseIds)
      for (const b of builds.filter((b) => b.cases.has(id))) {
        await b.cases.get(id)!.ready?.(3);
        await drive(b, id, 3);
        await b.cases.get(id)!.tidy?.();
      }
    const watchStart = builds.map((b) => ({ at: Date.now(), counts: b.proxy.total((n) => n === WATCH) }));
    for (let round = 0; round < o.rounds; round++) {
      for (const id of caseIds) {
        const order = (round % 2 === 0 ? builds : [...builds].reverse()).filter((b) => b.cases.has(id));
        for (const b of order) {
          const w = await measure(b, id);
          costs.get(`${b.name} ${id}`)!.windows.push(w);
          const per = (n: number) => (w.requests > 0 ? n / w.requests : NaN);
          o.log(
            `  round ${round + 1} ${id.padEnd(6)} ${b.name.padEnd(8)} ${String(w.requests).padStart(6)} req  ` +
              `Tally ${per(w.tallyCpuMs).toFixed(3)} + Postgres ${per(w.postgresCpuMs).toFixed(3)} CPU ms/req  ` +
              `${per(w.wire.statements).toFixed(2)} statements, ${per(w.wire.roundTrips).toFixed(2)} round trips, ` +
              `${per(w.wire.commits).toFixed(2)} commits, ${per(w.wire.parses).toFixed(2)} parses` +
              `${w.non2xx ? `  (${w.non2xx} non-2xx)` : ''}`,
          );
        }
      }
    }
    const watch: AgainstReport['watch'] = {};
    builds.forEach((b, i) => {
      const seconds = (Date.now() - watchStart[i]!.at) / 1000;
      const d = subtract(
        b.proxy.total((n) => n === WATCH),
        watchStart[i]!.counts,
      );
      watch[b.name] = {
        statementsPerSecond: Math.round((d.statements / seconds) * 100) / 100,
        commitsPerSecond: Math.round((d.commits / seconds) * 100) / 100,
      };
    });
    for (const b of builds) o.log(await topStatements(admin, b));
    const report: CostReport = {
      builds: builds.map((b) => b.name),
      settings: { rows: o.rows, seconds: o.seconds, rounds: o.rounds, connections: o.connections },
      costs: [...costs.values()],
      watch,
      skipped,
    };
    return report;
  } finally {
    await admin.end();
    for (const b of builds) {
      await b.owner.end();
      await stopProcess(b.child);
      await b.proxy.close();
    }
    await pg.stop();
    await rm(home, { recursive: true, force: true }).catch(() => {});
  }
}

/**
 * Every kind must answer 2xx (and MCP no tool error) before it is measured. This build must answer
 * all of them; another build (an older commit) is measured without the kinds it cannot answer,
 * which are answered, with the answer, in the report.
 */
async function keepAnswering(b: Build, mustAnswer: boolean): Promise<Record<string, string>> {
  const skipped: Record<string, string> = {};
  for (const [id, c] of b.cases) {
    await c.ready?.(1);
    const sent = { ...c, ...c.vary?.() };
    const res = await fetch(b.base + sent.path, { method: sent.method, headers: sent.headers, body: sent.body });
    const text = await res.text();
    if (res.ok && !text.includes('"isError":true')) continue;
    const answer = `answered ${res.status}: ${text.slice(0, 300)}`;
    if (mustAnswer) throw new Error(`${b.name} case ${id} ${answer}`);
    skipped[id] = answer;
    b.cases.delete(id);
  }
  return skipped;
}

/** The statements of a build's database that took the most time, with their calls, plans and times per call. */
async function topStatements(admin: Sql, b: Build): Promise<string> {
  const rows = await admin<
    { toplevel: boolean; calls: string; plans: string; plan: number; exec: number; query: string }[]
  >`
    SELECT toplevel, calls::text, plans::text, (total_plan_time / greatest(calls, 1))::float8 AS plan,
           (total_exec_time / greatest(calls, 1))::float8 AS exec, left(regexp_replace(query, '\\s+', ' ', 'g'), 160) AS query
      FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
     WHERE d.datname = ${b.database}
       AND calls >= 100 ORDER BY total_plan_time + total_exec_time DESC LIMIT 16`;
  return [
    `Statements of ${b.name} by time (calls, plans, plan and execute ms per call):`,
    ...rows.map(
      (r) =>
        `  ${r.toplevel ? 'top   ' : 'nested'} ${r.calls.padStart(8)} ${r.plans.padStart(8)} ${r.plan.toFixed(3)} ${r.exec.toFixed(3)}  ${r.query}`,
    ),
  ].join('\n');
}

function printReport(r: AgainstReport, log: (line: string) => void): void {
  const f = (n: number, d = 3) => (Number.isFinite(n) ? n.toFixed(d) : '');
  log('');
  const kinds = [...new Set(r.costs.map((c) => c.case))];
  for (const id of kinds) log(`${id}: ${KIND_TITLES[id]}`);
  log(
    '| case | build | Tally CPU ms/req | Postgres CPU ms/req | sum (min–max of windows) | statements | nested | parses | round trips | commits | plan ms/req | execute ms/req |',
  );
  log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const c of kinds.flatMap((id) => r.costs.filter((c) => c.case === id))) {
    const n = c.windows.reduce((t, w) => t + w.requests, 0);
    const sum = (f: (w: CostWindow) => number) => c.windows.reduce((t, w) => t + f(w), 0) / n;
    const each = c.windows.map((w) => (w.tallyCpuMs + w.postgresCpuMs) / w.requests);
    log(
      `| ${c.case} | ${c.build} | ${f(sum((w) => w.tallyCpuMs))} | ${f(sum((w) => w.postgresCpuMs))} | ` +
        `${f(sum((w) => w.tallyCpuMs + w.postgresCpuMs))} (${f(Math.min(...each))}–${f(Math.max(...each))}) | ` +
        `${f(
          sum((w) => w.wire.statements),
          2,
        )} | ${f(
          sum((w) => w.nestedStatements),
          2,
        )} | ${f(
          sum((w) => w.wire.parses),
          2,
        )} | ` +
        `${f(
          sum((w) => w.wire.roundTrips),
          2,
        )} | ${f(
          sum((w) => w.wire.commits),
          2,
        )} | ${f(sum((w) => w.planMs))} | ${f(sum((w) => w.executeMs))} |`,
    );
  }
  log('');
  for (const [build, kinds] of Object.entries(r.skipped))
    for (const [id, answer] of Object.entries(kinds)) log(`Not measured on ${build}: ${id}, which it ${answer}`);
  for (const [build, w] of Object.entries(r.watch))
    log(`Change watch of ${build}: ${w.statementsPerSecond} statements and ${w.commitsPerSecond} commits a second`);
  for (const [id, ratio] of Object.entries(r.ratios))
    log(
      `Target ${id} CPU per request (Tally + Postgres) vs ${r.builds[1]}: ${id === 'list' || id === 'mcp' ? '<= 0.9×' : 'for information'}, measured ${ratio.mean}× (windows ${ratio.min}–${ratio.max}×)` +
        `${id === 'list' || id === 'mcp' ? (ratio.mean <= 0.9 ? ' → met' : ' → NOT met') : ''}`,
    );
}
