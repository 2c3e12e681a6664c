// CPU time of processes, from /proc (Linux): what the serving process and Postgres spent.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

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
