import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import postgres from 'postgres';
import { packageRoot } from '../../gateway/paths.js';
import { splitStatements } from '../../gateway/db/sql-statements.js';
import { TENANT_TABLES } from '../harness/fixtures.js';
import { startCitusCluster, type CitusCluster, type PgNode } from './harness/citus.js';

// The README's Citus steps, run as written on a new three-node cluster: its SQL block on the
// nodes it names, then its shell block. Only the addresses are rewritten (coordinator,
// worker-1 and worker-2 on port 5432 become this cluster's servers).

let cluster: CitusCluster;

beforeAll(async () => {
  cluster = await startCitusCluster({ workers: 2 });
});
afterAll(() => cluster?.stop());

/** The fenced blocks of `lang` in the README's "### Citus" section, in order. */
async function citusBlocks(lang: string): Promise<string[]> {
  const readme = await readFile(join(packageRoot, 'README.md'), 'utf8');
  const section = readme.slice(
    readme.indexOf('\n### Citus\n'),
    readme.indexOf('\n## ', readme.indexOf('\n### Citus\n')),
  );
  return [...section.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1]!);
}

/** The README's "places every table" table: its tables by the placement's first words, sorted. */
async function placementTable(): Promise<Record<string, string[]>> {
  const readme = await readFile(join(packageRoot, 'README.md'), 'utf8');
  const rows = readme.slice(readme.indexOf('places every table')).split('\n\n')[1]!.split('\n').slice(2);
  const kinds = ['hash-distributed', 'reference', 'Citus local', 'plain'];
  return Object.fromEntries(
    rows.map((row) => {
      const [tables, placement] = row
        .split('|')
        .slice(1, 3)
        .map((cell) => cell.trim());
      const names = [...tables!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!).sort();
      return [kinds.find((kind) => placement!.startsWith(kind)) ?? placement!, names];
    }),
  );
}

function run(command: string, env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-euo', 'pipefail', '-c', command], {
      cwd: packageRoot,
      env: { ...process.env, ...env },
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

describe("the README's Citus steps", () => {
  it('make a Citus deployment of Tally on a new cluster, as written', async () => {
    const [nodesSql] = await citusBlocks('sql');
    const [shell] = await citusBlocks('sh');
    expect(nodesSql).toBeDefined();
    expect(shell).toBeDefined();
    const hosts: Record<string, PgNode> = {
      coordinator: cluster.coordinator,
      'worker-1': cluster.workers[0]!,
      'worker-2': cluster.workers[1]!,
    };
    const address = (text: string) =>
      text.replace(/'(coordinator|worker-\d)', 5432/g, (_, host: string) => `'127.0.0.1', ${hosts[host]!.port}`);

    // "Tally's database on every node": the user's to create.
    for (const node of Object.values(hosts)) {
      const sql = postgres(node.url(), { max: 1, onnotice: () => {} });
      await sql`CREATE DATABASE tally`;
      await sql.end();
    }
    // The block's statements: CREATE EXTENSION on every node, the rest on the coordinator.
    for (const statement of splitStatements(nodesSql!)) {
      const everyNode = /^(--.*\n)*\s*CREATE EXTENSION/i.test(statement);
      for (const node of everyNode ? Object.values(hosts) : [cluster.coordinator]) {
        const sql = postgres(node.url('tally'), { max: 1, onnotice: () => {} });
        try {
          await sql.unsafe(address(statement));
        } finally {
          await sql.end();
        }
      }
    }
    const commands = shell!.replace('postgres://owner@coordinator:5432/tally', cluster.coordinator.url('tally'));
    const result = await run(commands, { NODE_OPTIONS: '' });
    // The output in the failure message only: what the commands said when they failed.
    expect(result.code === 0 ? { code: 0 } : result).toEqual({ code: 0 });

    const sql = postgres(cluster.coordinator.url('tally'), { max: 1, onnotice: () => {} });
    try {
      // The README's placement table, row by row, is what the cluster holds.
      const placed = await sql<{ kind: string; tables: string[] }[]>`
        SELECT CASE WHEN partmethod = 'h' THEN 'hash-distributed' WHEN repmodel = 't' THEN 'reference' ELSE 'Citus local' END AS kind,
               array_agg(logicalrelid::regclass::text ORDER BY logicalrelid::regclass::text) AS tables
          FROM pg_dist_partition GROUP BY 1 ORDER BY 1`;
      const documented = await placementTable();
      expect(Object.fromEntries(placed.map((p) => [p.kind, p.tables]))).toEqual({
        'hash-distributed': documented['hash-distributed'],
        reference: documented['reference'],
        'Citus local': documented['Citus local'],
      });
      expect(documented['hash-distributed']).toEqual(expect.arrayContaining(TENANT_TABLES));
      const nodes = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_dist_node WHERE groupid <> 0`;
      expect(nodes[0]!.n).toBe(2);
    } finally {
      await sql.end();
    }
  });
});
