// Case (k) of `npm run bench`: Tally on a Citus coordinator (two workers, Debian's PostgreSQL 15
// with Citus, all on this machine) against Tally on one plain PostgreSQL 15 with the same data:
// the list read of case (a), the one-row insert of case (d), and the figures of 2,000 funds of
// case (f). The plain server is started like the cluster's nodes (Citus's library loaded, the
// extension not created in its database: Postgres as a deployment without Citus has it). Each
// pair runs interleaved (plain, Citus, Citus, plain) at the same connections. At one connection the difference of the mean latencies
// is what the coordinator's hop to a worker costs a request.

import autocannon, { type Result } from 'autocannon';
import { spawn, type ChildProcess } from 'node:child_process';
import postgres from 'postgres';
import { adminClient } from '../gateway/db/connect.js';
import { freePort } from '../gateway/db/free-port.js';
import { migrate } from '../gateway/db/migrate.js';
import { packageRoot } from '../gateway/paths.js';
import { citusMissing, startCitusCluster, type PgNode } from '../tests/scale/harness/citus.js';
import { generateDataset, type BenchWorkspace, type Dataset } from './data.js';
import { FUND_FIGURES_FUNDS, fundsWorkspace, timeFundFigures } from './funds.js';
import { cpuMsOf, postgresCpuMsOf } from './proc.js';

interface CitusFigures {
  case: string;
  connections: number;
  plainReqPerSec: number;
  citusReqPerSec: number;
  /** Citus over plain, each the mean of its two runs. */
  ratio: number;
  plainMeanMs: number;
  citusMeanMs: number;
  /**
   * CPU ms per answered request, over the same runs: the Tally process's and Postgres's on the
   * plain server; on Citus, Tally's, the coordinator's and the workers' (together).
   */
  plainCpuMs: { tally: number; postgres: number };
  citusCpuMs: { tally: number; coordinator: number; workers: number };
}

/** CPU ms of a set of processes so far, by name. */
type Counters = Record<string, () => number>;

/** Runs `run`, and answers its result with the CPU each counter spent per answered request. */
async function perRequest(counters: Counters, run: () => Promise<Result>) {
  const before = Object.fromEntries(Object.entries(counters).map(([k, f]) => [k, f()]));
  const result = await run();
  const answered = result.requests.total - result.non2xx - result.errors;
  const cpu = Object.fromEntries(Object.entries(counters).map(([k, f]) => [k, (f() - before[k]!) / answered]));
  return { result, cpu };
}

export interface CitusReport {
  rows: number;
  /** Case (f)'s requests at 2,000 funds, ms each (bench/funds.ts), on each server. */
  fundFigures: { plain: Record<string, number>; citus: Record<string, number> };
  figures: CitusFigures[];
  /** At one connection: Citus's mean latency minus plain's, per request (list read, insert). */
  hopMs: { read: number; insert: number };
}

const DB = 'tally_bench';

async function serve(ownerUrl: string, jwtSecret: string): Promise<{ base: string; child: ChildProcess }> {
  const port = await freePort();
  const login = new URL(ownerUrl);
  login.username = 'authenticator';
  login.password = 'bench-login-password';
  const child = spawn(process.execPath, ['dist/gateway/cli/main.js', 'serve'], {
    cwd: packageRoot,
    env: {
      ...process.env,
      DATABASE_URL: ownerUrl,
      TALLY_DB_URI: login.toString(),
      TALLY_JWT_SECRET: jwtSecret,
      TALLY_RATE_LIMIT_PER_MINUTE: '10000000',
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const ok = await fetch(`${base}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return { base, child };
    if (child.exitCode !== null || i > 600) throw new Error(`tally serve did not start: ${err.slice(-400)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function stop(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

async function load(url: string, ds: Dataset, write: boolean, connections: number, seconds: number): Promise<Result> {
  const headers = { apikey: ds.apikey, authorization: `Bearer ${ds.main.jwt}` };
  return autocannon({
    url: write
      ? `${url}/rest/v1/personal_transactions`
      : `${url}/rest/v1/personal_transactions?select=*&order=occurred_at.desc&limit=20`,
    method: write ? 'POST' : 'GET',
    headers: write ? { ...headers, 'content-type': 'application/json' } : headers,
    body: write
      ? JSON.stringify({ name: 'Bench insert', amount: 4.2, category_id: 'food-drinks', method_id: 'cash' })
      : undefined,
    connections,
    duration: seconds,
    pipelining: 1,
  });
}

/**
 * Runs case (k), or answers the one line saying why it cannot run here (no Citus).
 * `jwtSecret` signs the datasets' access tokens; `seconds` is each run's length.
 */
export async function citusCase(options: {
  jwtSecret: string;
  rows: number;
  seconds: number;
  connections: number[];
  log: (line: string) => void;
}): Promise<CitusReport | string> {
  const missing = citusMissing();
  if (missing) return `${missing}; case (k) skipped`;
  const { log } = options;
  const cluster = await startCitusCluster({ workers: 2 });
  const children: ChildProcess[] = [];
  try {
    const citusUrl = await cluster.createDatabase(DB);
    const plainNode = await cluster.startServer('plain'); // after: not a worker of the cluster
    const admin = postgres(plainNode.url('postgres'), { max: 1, onnotice: () => {} });
    await admin.unsafe(`CREATE DATABASE ${DB}`);
    await admin.end();
    const plainUrl = plainNode.url(DB);
    const datasets: Dataset[] = [];
    const fundWorkspaces: BenchWorkspace[] = [];
    for (const url of [plainUrl, citusUrl]) {
      await migrate(url);
      const owner = adminClient(url);
      try {
        datasets.push(
          await generateDataset(owner, {
            mainRows: options.rows,
            otherWorkspaces: 20,
            otherRows: Math.max(1, Math.floor(options.rows / 10)),
            largeRows: 0,
            jwtSecret: options.jwtSecret,
            log: () => {},
          }),
        );
        fundWorkspaces.push(await fundsWorkspace(owner, options.jwtSecret));
      } finally {
        await owner.end();
      }
    }
    log(
      `  (k) PostgreSQL 15 and a Citus coordinator with 2 workers: ${options.rows.toLocaleString('en')} expenses each`,
    );
    const plain = await serve(plainUrl, options.jwtSecret);
    children.push(plain.child);
    const citus = await serve(citusUrl, options.jwtSecret);
    children.push(citus.child);
    const [plainData, citusData] = datasets as [Dataset, Dataset];
    for (const [base, ds] of [
      [plain.base, plainData],
      [citus.base, citusData],
    ] as const) {
      for (const write of [false, true]) {
        const r = await load(base, ds, write, 1, 1);
        if (r.non2xx > 0 || r.errors > 0)
          throw new Error(`case (k) answered errors on ${base} (${write ? 'insert' : 'read'})`);
      }
    }
    const figures: CitusFigures[] = [];
    const postgresOf = (nodes: PgNode[]) => () => nodes.reduce((sum, n) => sum + postgresCpuMsOf(n.dataDir), 0);
    const counters: Record<'plain' | 'citus', Counters> = {
      plain: { tally: () => cpuMsOf(plain.child.pid), postgres: postgresOf([plainNode]) },
      citus: {
        tally: () => cpuMsOf(citus.child.pid),
        coordinator: postgresOf([cluster.coordinator]),
        // The plain server was started by the cluster too, after its workers.
        workers: postgresOf(cluster.workers.filter((n) => n !== plainNode)),
      },
    };
    const connections = [1, ...options.connections.filter((c) => c !== 1)];
    for (const write of [false, true]) {
      for (const c of connections) {
        const runs: Record<'plain' | 'citus', { result: Result; cpu: Record<string, number> }[]> = {
          plain: [],
          citus: [],
        };
        for (const which of ['plain', 'citus', 'citus', 'plain'] as const) {
          runs[which].push(
            await perRequest(counters[which], () =>
              load(
                which === 'plain' ? plain.base : citus.base,
                which === 'plain' ? plainData : citusData,
                write,
                c,
                options.seconds,
              ),
            ),
          );
        }
        const rate = (rs: typeof runs.plain) => rs.reduce((s, r) => s + r.result.requests.average, 0) / rs.length;
        const mean = (rs: typeof runs.plain) => rs.reduce((s, r) => s + r.result.latency.average, 0) / rs.length;
        const cpu = (rs: typeof runs.plain, k: string) =>
          Math.round((rs.reduce((s, r) => s + r.cpu[k]!, 0) / rs.length) * 1000) / 1000;
        const f: CitusFigures = {
          case: write ? 'k insert' : 'k read',
          connections: c,
          plainReqPerSec: Math.round(rate(runs.plain)),
          citusReqPerSec: Math.round(rate(runs.citus)),
          ratio: Math.round((rate(runs.citus) / rate(runs.plain)) * 100) / 100,
          plainMeanMs: Math.round(mean(runs.plain) * 100) / 100,
          citusMeanMs: Math.round(mean(runs.citus) * 100) / 100,
          plainCpuMs: { tally: cpu(runs.plain, 'tally'), postgres: cpu(runs.plain, 'postgres') },
          citusCpuMs: {
            tally: cpu(runs.citus, 'tally'),
            coordinator: cpu(runs.citus, 'coordinator'),
            workers: cpu(runs.citus, 'workers'),
          },
        };
        figures.push(f);
        log(
          `  ${f.case} @${c}: plain ${f.plainReqPerSec} req/s (${f.plainMeanMs} ms), Citus ${f.citusReqPerSec} req/s (${f.citusMeanMs} ms) → ${f.ratio}×; ` +
            `CPU ms/request: plain Tally ${f.plainCpuMs.tally}, Postgres ${f.plainCpuMs.postgres}; ` +
            `Citus Tally ${f.citusCpuMs.tally}, coordinator ${f.citusCpuMs.coordinator}, workers ${f.citusCpuMs.workers}`,
        );
      }
    }
    // Case (f) on both: the figures of 2,000 funds, plain first.
    const [plainFunds, citusFunds] = fundWorkspaces as [BenchWorkspace, BenchWorkspace];
    const fundFigures = {
      plain: await timeFundFigures(plain.base, plainFunds, plainData.apikey),
      citus: await timeFundFigures(citus.base, citusFunds, citusData.apikey),
    };
    for (const name of Object.keys(fundFigures.plain))
      log(
        `  (f) ${name} at ${FUND_FIGURES_FUNDS.toLocaleString('en')} funds: plain ${fundFigures.plain[name]} ms, Citus ${fundFigures.citus[name]} ms`,
      );
    const hop = (name: string) => {
      const f = figures.find((x) => x.case === name && x.connections === 1);
      return f ? Math.round((f.citusMeanMs - f.plainMeanMs) * 100) / 100 : NaN;
    };
    return { rows: options.rows, fundFigures, figures, hopMs: { read: hop('k read'), insert: hop('k insert') } };
  } finally {
    for (const child of children) await stop(child);
    await cluster.stop();
  }
}
