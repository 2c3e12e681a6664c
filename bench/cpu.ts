// The bench's figure of what a request costs: CPU time per request, Tally's process and its
// Postgres backends (read from /proc), for the list read, the one-row read, the insert and MCP
// list_expenses (or the kinds BENCH_CPU_KINDS names, bench/kinds.ts), each as a ratio to the
// committed baseline, bench/cpu-baseline.json, where it has the kind. CPU per
// request moves less than requests a second on a machine shared with other work, but it still
// moves (±10–15 % between windows at a load average of 10): the ratio is a trend to read over
// runs, the counts per request (tests/request-costs.md) are the guard. It is measured as the
// baseline was, by bench/against.ts, this build alone on a Postgres of its own.
//
// The baseline holds 7c98383's figures, the commit before the list read lost its 36 %, as a
// `BENCH_AGAINST=<a checkout of 7c98383>` run measured them beside this build; to move it, run
// that again and copy the other build's figures from bench/results/against.json (perRequest).

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../gateway/paths.js';
import { measureBuilds, perRequest, type MeasureOptions, type PerRequest } from './against.js';
import { KIND_TITLES } from './kinds.js';

interface CpuBaseline {
  commit: string;
  measuredAt: string;
  how: string;
  loadavg: number[];
  cases: Record<string, { tallyMs: number; postgresMs: number }>;
}

export interface CpuReport {
  baseline: { commit: string; measuredAt: string };
  measured: Record<string, PerRequest>;
  /** This build's CPU per request over the baseline's: Tally's, Postgres's, and their sum. */
  ratios: Record<string, { tally: number; postgres: number; sum: number }>;
}

/** The cases whose sum must be at most TARGET of the baseline's; the others are for information. */
export const CPU_TARGETS: Record<string, number> = { list: 0.9, mcp: 0.9 };

const readCpuBaseline = (): CpuBaseline =>
  JSON.parse(readFileSync(join(packageRoot, 'bench', 'cpu-baseline.json'), 'utf8')) as CpuBaseline;

const r2 = (n: number) => Math.round(n * 100) / 100;

/** Measures this build's CPU per request and sets it against the committed baseline. */
export async function cpuAgainstBaseline(o: MeasureOptions): Promise<CpuReport> {
  const baseline = readCpuBaseline();
  const report = await measureBuilds([packageRoot], o);
  const measured: CpuReport['measured'] = {};
  const ratios: CpuReport['ratios'] = {};
  for (const c of report.costs) {
    const now = perRequest(c);
    const then = baseline.cases[c.case];
    measured[c.case] = now;
    if (!then) continue;
    ratios[c.case] = {
      tally: r2(now.tallyMs / then.tallyMs),
      postgres: r2(now.postgresMs / then.postgresMs),
      sum: r2((now.tallyMs + now.postgresMs) / (then.tallyMs + then.postgresMs)),
    };
  }
  const result = { baseline: { commit: baseline.commit, measuredAt: baseline.measuredAt }, measured, ratios };
  printCpu(result, o.log);
  return result;
}

function printCpu(r: CpuReport, log: (line: string) => void): void {
  log('');
  log(`CPU per request against the committed baseline (${r.baseline.commit}, bench/cpu-baseline.json):`);
  log('| case | Tally CPU ms/req (×) | Postgres CPU ms/req (×) | sum × | statements | round trips | commits |');
  log('|---|---:|---:|---:|---:|---:|---:|');
  for (const [id, m] of Object.entries(r.measured)) {
    const x = r.ratios[id];
    log(
      `| ${id}: ${KIND_TITLES[id]} | ${m.tallyMs} (${x?.tally ?? '?'}×) | ${m.postgresMs} (${x?.postgres ?? '?'}×) | ` +
        `${x?.sum ?? '?'}× | ${m.statements} | ${m.roundTrips} | ${m.commits} |`,
    );
  }
}
