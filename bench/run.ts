// `npm run bench`: Tally side by side with a minimal baseline (bench/baseline.ts), over
// loopback, with autocannon. Starts its own embedded Postgres in a temporary home on a free
// port, generates the data set (bench/data.ts), runs `tally serve` and the baseline as child
// processes (so their peak RSS is their own), drives each case at 1, 16 and 64 connections,
// prints a table and writes bench/results/latest.json.
//
// Knobs (environment): BENCH_SECONDS (per case, default 6), BENCH_CONNECTIONS (default
// 1,16,64), BENCH_MAIN_ROWS (100000), BENCH_OTHER_WORKSPACES (100), BENCH_OTHER_ROWS (10000),
// BENCH_LARGE_ROWS (1000000; 0 skips the growth case), BENCH_CASES (e.g. c,d: only these
// besides the baseline and (a)), BENCH_CPU_PROF=1 (Tally runs with
// --cpu-prof into bench/results/profiles), BENCH_OUT (the JSON file).

import autocannon, { type Result } from 'autocannon';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { adminClient } from '../gateway/db/connect.js';
import { startEmbedded } from '../gateway/db/embedded.js';
import { applyPolicies, migrate } from '../gateway/db/migrate.js';
import { packageRoot } from '../gateway/paths.js';
import { generateDataset, type Dataset } from './data.js';
import { freePort } from '../gateway/db/free-port.js';

const env = process.env;
const num = (name: string, fallback: number): number => (env[name] !== undefined && env[name] !== '' ? Number(env[name]) : fallback);
const SECONDS = num('BENCH_SECONDS', 6);
const CONNECTIONS = (env.BENCH_CONNECTIONS ?? '1,16,64').split(',').map(Number);
const OUT = env.BENCH_OUT ?? join(packageRoot, 'bench', 'results', 'latest.json');

const log = (line: string): void => void process.stdout.write(line + '\n');


/** Peak and current resident set of a process, in MB (Linux /proc). */
function memoryOf(pid: number | undefined): { peakMb: number; rssMb: number } | undefined {
  if (pid === undefined) return undefined;
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
    return { peakMb: Math.round(kb('VmHWM') / 102.4) / 10, rssMb: Math.round(kb('VmRSS') / 102.4) / 10 };
  } catch {
    return undefined;
  }
}

async function waitReady(url: string, child: ChildProcess, output: () => string, anyAnswer = false): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode}:\n${output()}`);
    try {
      const res = await fetch(url);
      await res.arrayBuffer();
      if (res.ok || anyAnswer) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`not ready at ${url} after 60 s:\n${output()}`);
}

function startProcess(args: string[], childEnv: Record<string, string>): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, args, { cwd: packageRoot, env: { ...env, NODE_OPTIONS: '', ...childEnv }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
  return { child, output: () => stderr };
}

function stopProcess(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

interface Case {
  id: string;
  title: string;
  target: 'tally' | 'baseline';
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: string;
  /** Compared with the baseline's figure at the same connections. */
  comparable: boolean;
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
  tallyPeakRssMb: number | null;
}

/** The first body a case answered with a tool error (MCP answers those with HTTP 200). */
const toolErrors = new Map<string, string>();

async function drive(base: string, c: Case, connections: number, seconds: number): Promise<Result> {
  return autocannon({
    // An MCP tool error is a 200: count it as a mismatch, not a success.
    verifyBody: c.id === 'e' ? (raw) => {
      const body = String(raw ?? '');
      const ok = !body.includes('"isError":true');
      if (!ok && !toolErrors.has(c.id)) toolErrors.set(c.id, body.slice(0, 400));
      return ok;
    } : undefined,
    url: base + c.path,
    method: c.method,
    headers: c.headers,
    body: c.body,
    connections,
    duration: seconds,
    pipelining: 1,
  });
}

function cases(d: Dataset, wrapperPresent: boolean, mcpToken: string): Case[] {
  const rest = { apikey: d.apikey, authorization: `Bearer ${d.main.jwt}` };
  const list: Case[] = [
    { id: 'baseline', title: 'baseline: node:http + postgres.js, same transaction as (a)', target: 'baseline', method: 'GET', path: '/', headers: { authorization: `Bearer ${d.main.jwt}` }, comparable: false },
    { id: 'a', title: 'GET /rest/v1/personal_transactions?select=*&order=occurred_at.desc&limit=20', target: 'tally', method: 'GET', path: '/rest/v1/personal_transactions?select=*&order=occurred_at.desc&limit=20', headers: rest, comparable: true },
  ];
  if (wrapperPresent) {
    list.push({ id: 'b', title: 'GET /api/v1/personal_transactions (wrapper)', target: 'tally', method: 'GET', path: '/api/v1/personal_transactions', headers: { authorization: `Bearer ${d.main.jwt}` }, comparable: true });
  }
  list.push(
    { id: 'c', title: 'GET /rest/v1/funds?select=*,fund_transactions(*)&status=eq.In%20Progress', target: 'tally', method: 'GET', path: '/rest/v1/funds?select=*,fund_transactions(*)&status=eq.In%20Progress', headers: rest, comparable: true },
    {
      id: 'd', title: 'POST /rest/v1/personal_transactions (one row, return=minimal)', target: 'tally', method: 'POST', path: '/rest/v1/personal_transactions',
      headers: { ...rest, 'content-type': 'application/json', prefer: 'return=minimal' },
      body: JSON.stringify({ name: 'Bench write', amount: 12.5, category_id: 'essentials', method_id: 'cash' }), comparable: true,
    },
    {
      id: 'e', title: 'MCP tools/call list_expenses (Streamable HTTP, stateless)', target: 'tally', method: 'POST', path: `/mcp?token=${encodeURIComponent(mcpToken)}`,
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_expenses', arguments: { limit: 20 } } }), comparable: true,
    },
  );
  return list;
}

/** Transactions Postgres committed per request of case (a): the round trips a read costs. */
async function transactionsPerRead(ownerUrl: string, base: string, c: Case): Promise<number> {
  const admin = adminClient(ownerUrl);
  try {
    const count = async (): Promise<number> => {
      // An idle backend flushes its statistics within PGSTAT_IDLE_INTERVAL (10 s).
      await new Promise((r) => setTimeout(r, 11_000));
      const [row] = await admin<{ n: string }[]>`
        SELECT (xact_commit + xact_rollback)::text AS n FROM pg_stat_database WHERE datname = current_database()`;
      await admin`SELECT pg_stat_clear_snapshot()`;
      return Number(row.n);
    };
    const before = await count();
    const n = 200;
    for (let i = 0; i < n; i++) {
      const res = await fetch(base + c.path, { headers: c.headers });
      if (!res.ok) throw new Error(`case ${c.id} answered ${res.status}: ${await res.text()}`);
      await res.arrayBuffer();
    }
    const after = await count();
    // The two statistics reads above are transactions of their own.
    return Math.round(((after - before - 2) / n) * 100) / 100;
  } finally {
    await admin.end();
  }
}

const fmt = (n: number, digits = 1): string => n.toFixed(digits);

async function main(): Promise<void> {
  const started = Date.now();
  const home = await mkdtemp(join(tmpdir(), 'tally-bench-'));
  await chmod(home, 0o755); // the embedded server runs as the user postgres when we are root
  const pgPort = await freePort();
  const jwtSecret = randomBytes(48).toString('base64url');
  log(`Tally benchmark: ${cpus().length} cores, load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}, ${SECONDS} s per case`);
  log(`Embedded Postgres in ${home} on port ${pgPort}; generating data…`);
  const pg = await startEmbedded({ home, port: pgPort });
  const children: ChildProcess[] = [];
  try {
    await migrate(pg.url);
    await applyPolicies(pg.url);
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
    const profile = env.BENCH_CPU_PROF === '1' ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
    const tally = startProcess([...profile, 'dist/gateway/cli/main.js', 'serve'], {
      TALLY_HOME: home,
      TALLY_EMBEDDED_PG_PORT: String(pgPort),
      PORT: String(tallyPort),
      HOST: '127.0.0.1',
      TALLY_JWT_SECRET: jwtSecret,
      // The benchmark sends far more than a client may: the limit is raised by configuration.
      TALLY_RATE_LIMIT_PER_MINUTE: '10000000',
      LOG_LEVEL: env.LOG_LEVEL ?? 'info',
    });
    children.push(tally.child);
    const baseline = startProcess(['dist/bench/baseline.js'], { DATABASE_URL: pg.url, PORT: String(baselinePort) });
    children.push(baseline.child);
    const tallyBase = `http://127.0.0.1:${tallyPort}`;
    const baselineBase = `http://127.0.0.1:${baselinePort}`;
    await waitReady(`${tallyBase}/readyz`, tally.child, tally.output);
    await waitReady(baselineBase + '/', baseline.child, baseline.output, true); // any answer: it has no health route

    const probe = await fetch(`${tallyBase}/api/v1/personal_transactions`, { headers: { authorization: `Bearer ${dataset.main.jwt}` } });
    const wrapperPresent = probe.status !== 404;
    await probe.arrayBuffer();
    if (!wrapperPresent) log('  note: /api/v1 is not served by this build; case (b) is skipped');

    const only = env.BENCH_CASES ? new Set(env.BENCH_CASES.split(',')) : undefined;
    const all = cases(dataset, wrapperPresent, dataset.main.token).filter((c) => !only || only.has(c.id) || c.id === 'baseline' || c.id === 'a');
    // Every case must answer 2xx before it is measured: a benchmark of errors measures nothing.
    for (const c of all) {
      const res = await fetch((c.target === 'tally' ? tallyBase : baselineBase) + c.path, { method: c.method, headers: c.headers, body: c.body });
      const text = await res.text();
      if (!res.ok) throw new Error(`case ${c.id} answered ${res.status}: ${text.slice(0, 300)}`);
      if (c.id === 'e' && /"isError":true/.test(text)) throw new Error(`case e returned a tool error: ${text.slice(0, 300)}`);
    }

    const results: Measurement[] = [];
    const baselineRps = new Map<number, number>();
    for (const c of all) {
      const base = c.target === 'tally' ? tallyBase : baselineBase;
      await drive(base, c, 4, 1); // warm-up: JIT, prepared statements, pool connections
      for (const connections of CONNECTIONS) {
        const r = await drive(base, c, connections, SECONDS);
        const rps = r.requests.average;
        if (c.id === 'baseline') baselineRps.set(connections, rps);
        const ratio = c.comparable && baselineRps.get(connections) ? rps / baselineRps.get(connections)! : null;
        const m: Measurement = {
          case: c.id, title: c.title, target: c.target, connections, seconds: SECONDS,
          requests: r.requests.total, reqPerSec: Math.round(rps), p50Ms: r.latency.p50, p99Ms: r.latency.p99,
          non2xx: r.non2xx, errors: r.errors + r.timeouts + (r.mismatches ?? 0),
          ratioToBaseline: ratio === null ? null : Math.round(ratio * 100) / 100,
          tallyPeakRssMb: memoryOf(tally.child.pid)?.peakMb ?? null,
        };
        results.push(m);
        log(`  ${c.id.padEnd(8)} ${String(connections).padStart(3)} conn  ${String(m.reqPerSec).padStart(6)} req/s  p50 ${fmt(m.p50Ms)} ms  p99 ${fmt(m.p99Ms)} ms`
          + `${m.ratioToBaseline !== null ? `  ${fmt(m.ratioToBaseline, 2)}× baseline` : ''}${m.non2xx || m.errors ? `  (${m.non2xx} non-2xx, ${m.errors} errors)` : ''}`);
      }
    }

    for (const [id, body] of toolErrors) log(`  note: case ${id} answered tool errors, e.g. ${body}`);

    // Cost as data grows: case (a) on a 10,000-row and a large workspace, one connection (latency).
    const growth: { rows: number; p50Ms: number; p99Ms: number; meanMs: number; reqPerSec: number; non2xx: number }[] = [];
    for (const ws of [dataset.small, dataset.large]) {
      if (!ws) continue;
      const c: Case = { ...all[1], id: `a@${ws.rows}`, headers: { apikey: dataset.apikey, authorization: `Bearer ${ws.jwt}` } };
      const probe = await fetch(tallyBase + c.path, { headers: c.headers });
      const text = await probe.text();
      if (!probe.ok) throw new Error(`growth case on ${ws.rows} rows answered ${probe.status}: ${text.slice(0, 300)}`);
      await drive(tallyBase, c, 1, 1);
      const r = await drive(tallyBase, c, 1, SECONDS);
      // autocannon's histogram has millisecond resolution, too coarse for a sub-millisecond
      // mean; with one connection (a closed loop) the mean latency is 1 s / throughput.
      const meanMs = Math.round((1000 / r.requests.average) * 1000) / 1000;
      growth.push({ rows: ws.rows, p50Ms: r.latency.p50, p99Ms: r.latency.p99, meanMs, reqPerSec: Math.round(r.requests.average), non2xx: r.non2xx });
      log(`  growth   (a) on ${ws.rows.toLocaleString('en')} rows: ${Math.round(r.requests.average)} req/s, mean ${fmt(meanMs, 3)} ms, p99 ${fmt(r.latency.p99)} ms`
        + `${r.non2xx ? `  (${r.non2xx} non-2xx)` : ''}`);
    }

    const txPerRead = await transactionsPerRead(pg.url, tallyBase, all[1]);
    const baselineTx = await transactionsPerRead(pg.url, baselineBase, all[0]);
    log(`  Postgres transactions per read (a): Tally ${txPerRead}, baseline ${baselineTx}`);

    const tallyMemory = memoryOf(tally.child.pid);
    const baselineMemory = memoryOf(baseline.child.pid);
    const at16 = results.find((m) => m.case === 'a' && m.connections === 16);
    const growthRatio = growth.length === 2 ? Math.round((growth[1].meanMs / growth[0].meanMs) * 100) / 100 : null;
    const targets = {
      readThroughputVsBaselineAt16: { target: '>= 0.8', measured: at16?.ratioToBaseline ?? null, met: (at16?.ratioToBaseline ?? 0) >= 0.8 },
      readP99At16Ms: { target: '< 15', measured: at16?.p99Ms ?? null, met: (at16?.p99Ms ?? Infinity) < 15 },
      peakRssMb: { target: '< 200', measured: tallyMemory?.peakMb ?? null, met: (tallyMemory?.peakMb ?? Infinity) < 200 },
      postgresTransactionsPerRead: { target: '1', measured: txPerRead, met: txPerRead <= 1.05 },
      latencyGrowthLargeVsSmall: { target: '<= 1.5', measured: growthRatio, met: growthRatio !== null && growthRatio <= 1.5 },
    };

    log('');
    log('| case | conn | req/s | p50 ms | p99 ms | × baseline | Tally peak RSS MB |');
    log('|---|---:|---:|---:|---:|---:|---:|');
    for (const m of results) {
      log(`| ${m.case} | ${m.connections} | ${m.reqPerSec} | ${fmt(m.p50Ms)} | ${fmt(m.p99Ms)} | ${m.ratioToBaseline === null ? '' : fmt(m.ratioToBaseline, 2)} | ${m.target === 'tally' ? m.tallyPeakRssMb ?? '' : ''} |`);
    }
    log('');
    log(`Peak RSS: Tally ${tallyMemory?.peakMb} MB, baseline ${baselineMemory?.peakMb} MB`);
    for (const [name, t] of Object.entries(targets)) log(`Target ${name}: ${t.target}, measured ${t.measured} → ${t.met ? 'met' : 'NOT met'}`);

    const report = {
      measuredAt: new Date().toISOString(),
      machine: { cores: cpus().length, model: cpus()[0]?.model, loadAverageAtStart: loadavg(), node: process.version },
      settings: { secondsPerCase: SECONDS, connections: CONNECTIONS, tallyPool: 10, baselinePool: 10, logLevel: env.LOG_LEVEL ?? 'info' },
      data: { mainRows: dataset.main.rows, otherWorkspaces: dataset.others, otherRows: dataset.small.rows, largeRows: dataset.large?.rows ?? 0, generationSeconds: dataset.generationSeconds },
      results,
      growth,
      transactionsPerRead: { tally: txPerRead, baseline: baselineTx },
      memory: { tally: tallyMemory, baseline: baselineMemory },
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
