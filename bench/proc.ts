// The benchmarks' processes: started and stopped as children, and what they spent, from /proc
// (Linux): the serving process's and Postgres's CPU time, resident memory.

import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../gateway/paths.js';

/**
 * A process's parent and its CPU time (user + system) so far, in ms, from /proc/<pid>/stat
 * (Linux; clock ticks of 10 ms); undefined once the process has ended.
 */
function statOf(pid: number | string): { parent: string; cpuMs: number } | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8')
      .replace(/^.*\) /s, '')
      .split(' ');
    return { parent: fields[1]!, cpuMs: (Number(fields[11]) + Number(fields[12])) * 10 };
  } catch {
    return undefined;
  }
}

/** CPU time a process has used so far, in ms. */
export const cpuMsOf = (pid: number | undefined): number => (pid === undefined ? NaN : (statOf(pid)?.cpuMs ?? NaN));

/**
 * CPU time (ms) used so far by the processes a postmaster started (its backends and background
 * workers), from its data directory's postmaster.pid: what Postgres spent, beside the server's own.
 */
export function postgresCpuMsOf(dataDir: string): number {
  let postmaster: string;
  try {
    postmaster = readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]!.trim();
  } catch {
    return NaN;
  }
  let total = 0;
  for (const entry of readdirSync('/proc')) {
    const stat = /^\d+$/.test(entry) ? statOf(entry) : undefined;
    if (stat?.parent === postmaster) total += stat.cpuMs;
  }
  return total;
}

/** Peak and current resident set of a process, in MB (Linux /proc). */
export function memoryOf(pid: number | undefined): { peakMb: number; rssMb: number } | undefined {
  if (pid === undefined) return undefined;
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
    return { peakMb: Math.round(kb('VmHWM') / 102.4) / 10, rssMb: Math.round(kb('VmRSS') / 102.4) / 10 };
  } catch {
    return undefined;
  }
}

export async function waitReady(
  url: string,
  child: ChildProcess,
  output: () => string,
  anyAnswer = false,
): Promise<void> {
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

export function startProcess(
  args: string[],
  childEnv: Record<string, string>,
): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, args, {
    cwd: packageRoot,
    env: { ...process.env, NODE_OPTIONS: '', ...childEnv },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
  return { child, output: () => stderr };
}

export function stopProcess(child: ChildProcess): Promise<void> {
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
