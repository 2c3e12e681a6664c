// `npm run bench:flood`: what one client address can take from everyone else. Another
// workspace reads at a steady rate from an address of its own (127.0.0.2) while one address
// (127.0.0.1) floods the server, and its latency and errors are compared with the same reads on
// a quiet server:
//
//   (a) 32 keep-alive connections with no valid credential: reads with a new unknown apikey
//       each time, reads with a bad JWT, token exchanges with a new unknown token, /readyz;
//   (b) one socket that sends 500 pipelined GET /readyz every 0.5 s;
//   (m) 256 connections that each ask for a large answer and never read it: Tally's resident
//       memory before, while they are open, and once the server has given up on them.
//
// Starts its own embedded Postgres in a temporary home and `tally serve` (the build in dist/)
// with its defaults for an embedded database (600 requests a minute per token or address), so
// the flood meets the limits a deployment has. The victim spreads its reads over five tokens
// to stay under its own limit. Writes bench/results/flood-latest.json.
//
// Knobs (environment): BENCH_SECONDS (victim window per case, default 20), BENCH_VICTIM_RATE
// (victim reads a second, default 40), BENCH_FLOOD_CASES (e.g. a,m; default quiet,a,b,m),
// BENCH_ANSWER_KB (size of (m)'s answer, default 8192: more than the kernel's socket buffers hold), BENCH_HOLDERS (default 256),
// BENCH_OUT (the JSON file).

import autocannon from 'autocannon';
import { randomBytes } from 'node:crypto';
import { Agent, request } from 'node:http';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { adminClient } from '../gateway/db/connect.js';
import { startEmbedded } from '../gateway/db/embedded.js';
import { migrate } from '../gateway/db/migrate.js';
import { freePort } from '../gateway/db/free-port.js';
import { packageRoot } from '../gateway/paths.js';
import { createWorkspace } from '../gateway/admin/workspaces.js';
import { createToken } from '../gateway/admin/tokens.js';
import { createKey } from '../gateway/admin/keys.js';
import { jwtKeys, signAccessToken } from '../gateway/auth/jwt.js';
import { newPublishableKey, newWorkspaceToken } from '../gateway/secrets.js';
import { generateExpenses } from './data.js';
import { memoryOf, startProcess, stopProcess, waitReady } from './proc.js';

const env = process.env;
const num = (name: string, fallback: number): number =>
  env[name] !== undefined && env[name] !== '' ? Number(env[name]) : fallback;
const SECONDS = num('BENCH_SECONDS', 20);
const VICTIM_RATE = num('BENCH_VICTIM_RATE', 40);
const ANSWER_KB = num('BENCH_ANSWER_KB', 8192);
const HOLDERS = num('BENCH_HOLDERS', 256);
const CASES = new Set((env.BENCH_FLOOD_CASES ?? 'quiet,a,b,m').split(','));
const OUT = env.BENCH_OUT ?? join(packageRoot, 'bench', 'results', 'flood-latest.json');
const VICTIM_ADDRESS = '127.0.0.2';
const READ = '/rest/v1/personal_transactions?select=*&order=occurred_at.desc&limit=20';

const log = (line: string): void => void process.stdout.write(line + '\n');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Victim {
  requests: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Answers that were not 200, by status (0: no answer within 30 s or a dropped connection). */
  failures: Record<string, number>;
}

/**
 * The victim: VICTIM_RATE reads a second for `seconds`, sent on schedule whatever the answers
 * do (an open loop), each timed from when it was due, from VICTIM_ADDRESS.
 */
async function victimReads(port: number, apikey: string, jwts: string[], seconds: number): Promise<Victim> {
  const agent = new Agent({ keepAlive: true, maxSockets: 32 });
  const latencies: number[] = [];
  const failures: Record<string, number> = {};
  const one = (i: number, due: number) =>
    new Promise<void>((resolve) => {
      const done = (status: number) => {
        latencies.push(performance.now() - due);
        if (status !== 200) failures[status] = (failures[status] ?? 0) + 1;
        resolve();
      };
      const req = request(
        {
          host: '127.0.0.1',
          port,
          path: READ,
          agent,
          localAddress: VICTIM_ADDRESS,
          headers: { apikey, authorization: `Bearer ${jwts[i % jwts.length]}` },
          timeout: 30_000,
        },
        (res) => {
          res.resume();
          res.on('end', () => done(res.statusCode ?? 0));
          res.on('error', () => done(0));
        },
      );
      req.on('timeout', () => req.destroy());
      req.on('error', () => done(0));
      req.end();
    });
  const n = Math.round(VICTIM_RATE * seconds);
  const start = performance.now();
  const sent: Promise<void>[] = [];
  for (let i = 0; i < n; i++) {
    const due = start + (i * 1000) / VICTIM_RATE;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    sent.push(one(i, due));
  }
  await Promise.all(sent);
  agent.destroy();
  latencies.sort((x, y) => x - y);
  const at = (q: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!);
  return { requests: n, p50Ms: at(0.5), p99Ms: at(0.99), maxMs: at(1), failures };
}

/** Case (a): 32 keep-alive connections from one address, none with a valid credential. */
function keylessFlood(port: number, apikey: string, seconds: number) {
  return autocannon({
    url: `http://127.0.0.1:${port}`,
    connections: 32,
    duration: seconds,
    requests: [
      {
        method: 'GET',
        path: READ,
        setupRequest: (req) => ({ ...req, headers: { apikey: newPublishableKey() } }),
      },
      { method: 'GET', path: READ, headers: { apikey, authorization: 'Bearer not.a.jwt' } },
      {
        method: 'POST',
        path: '/functions/v1/api-token',
        setupRequest: (req) => ({ ...req, headers: { authorization: `Bearer ${newWorkspaceToken()}` } }),
      },
      { method: 'GET', path: '/readyz' },
    ],
  });
}

/** Case (b): one socket, 500 pipelined GET /readyz every 0.5 s; a closed socket is opened again. */
function pipelinedFlood(port: number): { stop: () => { sent: number; answered: number; reconnects: number } } {
  const burst = 'GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'.repeat(500);
  let socket: Socket | undefined;
  let sent = 0;
  let answered = 0;
  let reconnects = 0;
  const open = () => {
    const s = connect(port, '127.0.0.1');
    s.on('data', (d: Buffer) => (answered += d.toString('latin1').split('HTTP/1.1 ').length - 1));
    s.on('error', () => {});
    s.on('close', () => {
      if (socket === s) socket = undefined;
    });
    return s;
  };
  const timer = setInterval(() => {
    if (!socket) {
      if (sent > 0) reconnects++;
      socket = open();
    }
    socket.write(burst);
    sent += 500;
  }, 500);
  return {
    stop: () => {
      clearInterval(timer);
      socket?.destroy();
      return { sent, answered, reconnects };
    },
  };
}

/** The pool's state as /readyz reports it, asked from the victim's address. */
async function poolOf(port: number): Promise<{ size: number; free: number; waiting: number } | undefined> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/readyz', localAddress: VICTIM_ADDRESS }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () =>
        resolve((JSON.parse(text) as { pool?: { size: number; free: number; waiting: number } }).pool),
      );
    });
    req.on('error', () => resolve(undefined));
    req.end();
  });
}

interface Holders {
  connections: number;
  rssBeforeMb: number;
  rssHeldMb: number;
  peakMb: number;
  rssAfterMb: number;
  /** What each connection got once read at the end: the status of its answer, or closed with nothing. */
  outcomes: Record<string, number>;
}

/**
 * Case (m): HOLDERS connections each ask for a large answer and never read it. They are sent a
 * few at a time, each wave once the pool is idle again, so every answer is built (a burst would
 * be refused by the workspace's share of the pool instead); then Tally's memory is read, again
 * after a minute, and each connection is finally read to see what it was answered.
 */
async function holders(port: number, pid: number, apikey: string, jwt: string, rows: number): Promise<Holders> {
  const rssBeforeMb = memoryOf(pid)?.rssMb ?? NaN;
  const sockets: { socket: Socket; text: string; closed: boolean }[] = [];
  const ask = `GET /rest/v1/personal_transactions?select=*&limit=${rows} HTTP/1.1\r\nHost: 127.0.0.1\r\napikey: ${apikey}\r\nAuthorization: Bearer ${jwt}\r\n\r\n`;
  for (let i = 0; i < HOLDERS; i += 4) {
    for (let j = i; j < Math.min(HOLDERS, i + 4); j++) {
      const socket = connect(port, '127.0.0.1');
      const held = { socket, text: '', closed: false };
      socket.setNoDelay(true);
      socket.pause(); // never read: the answer waits in Tally's buffers
      socket.on('error', () => {});
      socket.on('close', () => (held.closed = true));
      socket.write(ask);
      sockets.push(held);
    }
    await sleep(50);
    for (let k = 0; k < 600; k++) {
      const pool = await poolOf(port);
      if (pool && pool.free === pool.size && pool.waiting === 0) break;
      await sleep(50);
    }
    if ((i + 4) % 64 === 0) log(`  m        ${i + 4} connections asked, RSS ${memoryOf(pid)?.rssMb} MB`);
  }
  const rssHeldMb = memoryOf(pid)?.rssMb ?? NaN;
  log(`  m        ${HOLDERS} connections asked for ${ANSWER_KB} kB each and read nothing: RSS ${rssHeldMb} MB`);
  await sleep(60_000);
  const rssAfterMb = memoryOf(pid)?.rssMb ?? NaN;
  const peakMb = memoryOf(pid)?.peakMb ?? NaN;
  const outcomes: Record<string, number> = {};
  for (const held of sockets) {
    held.socket.on('data', (d: Buffer) => {
      if (held.text.length < 64) held.text += d.toString('latin1');
    });
    held.socket.resume();
  }
  await sleep(2000);
  for (const held of sockets) {
    const status = /^HTTP\/1\.1 (\d{3})/.exec(held.text)?.[1] ?? (held.closed ? 'closed' : 'nothing');
    outcomes[status] = (outcomes[status] ?? 0) + 1;
    held.socket.destroy();
  }
  return { connections: HOLDERS, rssBeforeMb, rssHeldMb, peakMb, rssAfterMb, outcomes };
}

interface Setup {
  apikey: string;
  victimJwts: string[];
  bigJwt: string;
  bigRows: number;
}

/** Workspace B (the victim, five tokens) and C (rows of ~1 kB for (m)'s large answer). */
async function populate(ownerUrl: string, secret: string): Promise<Setup> {
  const owner = adminClient(ownerUrl);
  try {
    const jwtFor = async (workspace: string) => {
      const { id } = await createToken(owner, workspace, 'read', 'bench flood', 'bench');
      return signAccessToken(jwtKeys(secret), { role: 'api_read', workspace_id: workspace, scope: 'read', sub: id });
    };
    const b = await createWorkspace(owner, 'Bench victim', 'USD', 'bench');
    const c = await createWorkspace(owner, 'Bench large answers', 'USD', 'bench');
    const bigRows = Math.max(1, Math.round((ANSWER_KB * 1024) / 1100));
    await owner.begin(async (tx) => {
      await tx`SET LOCAL session_replication_role = replica`;
      await generateExpenses(tx, b.id, 10_000);
      await generateExpenses(tx, c.id, bigRows);
      await tx`UPDATE public.personal_transactions SET note = repeat('x', 900) WHERE workspace_id = ${c.id}`;
    });
    await owner`VACUUM ANALYZE`;
    const victimJwts = await Promise.all(Array.from({ length: 5 }, () => jwtFor(b.id)));
    return { apikey: (await createKey(owner, 'bench', 'bench')).key, victimJwts, bigJwt: await jwtFor(c.id), bigRows };
  } finally {
    await owner.end();
  }
}

const line = (name: string, v: Victim): string =>
  `  ${name.padEnd(8)} victim ${v.requests} reads: p50 ${v.p50Ms} ms, p99 ${v.p99Ms} ms, max ${v.maxMs} ms` +
  `${Object.keys(v.failures).length ? `, not 200: ${JSON.stringify(v.failures)}` : ', every one 200'}`;

async function main(): Promise<void> {
  const home = await mkdtemp(join(tmpdir(), 'tally-flood-'));
  await chmod(home, 0o755);
  const pgPort = await freePort();
  const secret = randomBytes(48).toString('base64url');
  const pg = await startEmbedded({ home, port: pgPort, create: true });
  const report: Record<string, unknown> = { measuredAt: new Date().toISOString(), seconds: SECONDS };
  let tally: ReturnType<typeof startProcess> | undefined;
  try {
    await migrate(pg.url);
    const setup = await populate(pg.url, secret);
    const port = await freePort();
    tally = startProcess(['dist/gateway/cli/main.js', 'serve'], {
      TALLY_HOME: home,
      TALLY_EMBEDDED_PG_PORT: String(pgPort),
      HOST: '127.0.0.1',
      PORT: String(port),
      TALLY_JWT_SECRET: secret,
      LOG_LEVEL: 'warn',
    });
    await waitReady(`http://127.0.0.1:${port}/readyz`, tally.child, tally.output);
    await victimReads(port, setup.apikey, setup.victimJwts, 3); // warm-up
    await sleep(61_000); // the warm-up's requests out of the victim's rate-limit windows
    const victims: Record<string, Victim> = {};
    if (CASES.has('quiet')) {
      victims.quiet = await victimReads(port, setup.apikey, setup.victimJwts, SECONDS);
      log(line('quiet', victims.quiet));
      await sleep(61_000);
    }
    if (CASES.has('a')) {
      const flood = keylessFlood(port, setup.apikey, SECONDS + 5);
      await sleep(3000);
      victims.a = await victimReads(port, setup.apikey, setup.victimJwts, SECONDS);
      const f = await flood;
      log(line('a', victims.a));
      log(
        `  a        the flood: ${f.requests.total} requests, statuses ${JSON.stringify(f.statusCodeStats)}, ${f.errors} errors`,
      );
      report.floodA = { requests: f.requests.total, statuses: f.statusCodeStats, errors: f.errors };
      await sleep(61_000);
    }
    if (CASES.has('b')) {
      const flood = pipelinedFlood(port);
      await sleep(3000);
      victims.b = await victimReads(port, setup.apikey, setup.victimJwts, SECONDS);
      const f = flood.stop();
      log(line('b', victims.b));
      log(
        `  b        the flood: ${f.sent} pipelined /readyz sent, ${f.answered} answered, ${f.reconnects} reconnections`,
      );
      report.floodB = f;
      await sleep(61_000);
    }
    report.victims = victims;
    if (CASES.has('m')) {
      const m = await holders(port, tally.child.pid!, setup.apikey, setup.bigJwt, setup.bigRows);
      log(
        `  m        RSS ${m.rssBeforeMb} MB before, ${m.rssHeldMb} MB with ${m.connections} answers unread, peak ${m.peakMb} MB, ` +
          `${m.rssAfterMb} MB a minute later; answers ${JSON.stringify(m.outcomes)}`,
      );
      report.holders = m;
    }
    await mkdir(join(OUT, '..'), { recursive: true });
    await writeFile(OUT, JSON.stringify(report, null, 2) + '\n');
    log(`Wrote ${OUT}`);
  } finally {
    if (tally) await stopProcess(tally.child);
    await pg.stop();
    await rm(home, { recursive: true, force: true }).catch(() => {});
  }
}

main().catch((err) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
