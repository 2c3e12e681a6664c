import { spawn } from 'node:child_process';
import postgres from 'postgres';
import { packageRoot } from '../../gateway/paths.js';
import { freePort } from '../../gateway/db/free-port.js';
import { splitStatements } from '../../gateway/db/sql-statements.js';
import { TENANT_TABLES } from '../harness/fixtures.js';
import { tally } from '../harness/cli.js';
import { section } from '../harness/docs.js';
import { startCitusCluster, type CitusCluster, type PgNode } from './harness/citus.js';

// The Citus steps of docs/deployment.md, run as written on a new three-node cluster whose roles
// log in with passwords, as in a deployment: its SQL block on the nodes and databases its comments
// name, then its shell block, which ends by serving. Only the addresses are rewritten
// (coordinator, worker-1 and worker-2 on port 5432 become this cluster's servers). The server it
// starts must then answer a workspace's requests: its login's password is the one `tally migrate`
// gave it, and the API roles reach the workers with theirs.

let cluster: CitusCluster;

beforeAll(async () => {
  cluster = await startCitusCluster({ workers: 2, passwords: true });
});
afterAll(() => cluster?.stop());

/** The fenced blocks of `lang` in the "## Citus" section of docs/deployment.md, in order. */
function citusBlocks(lang: string): string[] {
  const text = section('docs/deployment.md', '## Citus');
  return [...text.matchAll(new RegExp('^```' + lang + '\\n([\\s\\S]*?)^```', 'gm'))].map((m) => m[1]!);
}

/** The "places every table" table: its tables by the placement's first words, sorted. */
function placementTable(): Record<string, string[]> {
  const text = section('docs/deployment.md', '## Citus');
  const rows = text.slice(text.indexOf('places every table')).split('\n\n')[1]!.split('\n').slice(2);
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

/**
 * The SQL block's statements with where each runs: a comment line "On every node …" or "On the
 * coordinator …", "… in the database NAME", sets the place of the statements under it.
 */
function placedStatements(block: string): { everyNode: boolean; database: string; statement: string }[] {
  const placed: { everyNode: boolean; database: string; statement: string }[] = [];
  let where: { everyNode: boolean; database: string } | undefined;
  for (const part of block.split(/^(?=--)/m)) {
    const [comment, ...rest] = part.split('\n');
    const m = /^-- On (every node|the coordinator)\b.*\bin the database (\w+):$/.exec(comment!.trim());
    if (!m) throw new Error(`a statement of the Citus block without a comment saying where it runs: ${part}`);
    where = { everyNode: m[1] === 'every node', database: m[2]! };
    for (const statement of splitStatements(rest.join('\n'))) placed.push({ ...where, statement });
  }
  return placed;
}

describe('the Citus steps of docs/deployment.md', () => {
  it('make a Citus deployment of Tally on a new cluster, as written, which serves a workspace', async () => {
    const [nodesSql] = citusBlocks('sql');
    const [shell] = citusBlocks('sh');
    expect(nodesSql).toBeDefined();
    expect(shell).toBeDefined();
    const hosts: Record<string, PgNode> = {
      coordinator: cluster.coordinator,
      'worker-1': cluster.workers[0]!,
      'worker-2': cluster.workers[1]!,
    };
    const address = (text: string) =>
      text.replace(/'(coordinator|worker-\d)', 5432/g, (_, host: string) => `'127.0.0.1', ${hosts[host]!.port}`);

    const statements = placedStatements(nodesSql!);
    expect(statements.map((s) => [s.everyNode, s.database, s.statement.split(/[ (]/)[1]])).toEqual([
      [true, 'postgres', 'DATABASE'],
      [true, 'tally', 'EXTENSION'],
      [false, 'tally', 'citus_set_coordinator_host'],
      [false, 'tally', 'citus_add_node'],
      [false, 'tally', 'citus_add_node'],
    ]);
    for (const { everyNode, database, statement } of statements) {
      for (const node of everyNode ? Object.values(hosts) : [cluster.coordinator]) {
        const sql = postgres(node.url(database), { max: 1, onnotice: () => {} });
        try {
          await sql.unsafe(address(statement));
        } finally {
          await sql.end();
        }
      }
    }

    const owner = cluster.coordinator.url('tally');
    const commands = shell!
      .replace('postgres://owner@coordinator:5432/tally', owner)
      .replaceAll('@coordinator:5432/', `@127.0.0.1:${cluster.coordinator.port}/`);
    expect(commands).not.toMatch(/coordinator|worker-/);
    const server = serve(commands, { NODE_OPTIONS: '', PORT: String(await freePort()) });
    try {
      const base = await server.ready;
      expect(server.output()).toMatch(/^Tally is up on \S+ \(Postgres at TALLY_DB_URI\)$/m);

      // A workspace's requests, through the server's own login and the API roles on the workers.
      const env = { DATABASE_URL: owner };
      expect((await tally(['workspace', 'create', 'On Citus'], env)).code).toBe(0);
      const made = await tally(['token', 'create', '--workspace', 'On Citus', '--scope', 'write'], env);
      expect(made.lastLine).toMatch(/^tally_ws_/);
      const exchange = await fetch(`${base}/api/v1/token`, {
        method: 'POST',
        headers: { authorization: `Bearer ${made.lastLine}` },
      });
      expect(exchange.status).toBe(200);
      const { access_token } = (await exchange.json()) as { access_token: string };
      const auth = { authorization: `Bearer ${access_token}`, 'content-type': 'application/json' };
      const created = await fetch(`${base}/api/v1/personal_transactions`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({ name: 'Sharded coffee', amount: 3, category_id: 'food-drinks', method_id: 'cash' }),
      });
      expect(created.status).toBe(201);
      const listed = await fetch(`${base}/api/v1/personal_transactions?select=name`, { headers: auth });
      expect(await listed.json()).toEqual([{ name: 'Sharded coffee' }]);
    } finally {
      await server.stop();
    }

    const sql = postgres(owner, { max: 1, onnotice: () => {} });
    try {
      // The placement table, row by row, is what the cluster holds.
      const placed = await sql<{ kind: string; tables: string[] }[]>`
        SELECT CASE WHEN partmethod = 'h' THEN 'hash-distributed' WHEN repmodel = 't' THEN 'reference' ELSE 'Citus local' END AS kind,
               array_agg(logicalrelid::regclass::text ORDER BY logicalrelid::regclass::text) AS tables
          FROM pg_dist_partition GROUP BY 1 ORDER BY 1`;
      const documented = placementTable();
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

/**
 * Runs the shell block, whose last command serves: `ready` resolves with the server's address once
 * it prints its banner, and rejects with the output when the block fails before.
 */
function serve(commands: string, env: Record<string, string>) {
  const child = spawn('bash', ['-euo', 'pipefail', '-c', commands], {
    cwd: packageRoot,
    env: { ...process.env, ...env },
    detached: true, // its own process group: npm and the server it runs stop with it
  });
  let output = '';
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  const ready = new Promise<string>((resolve, reject) => {
    const onData = (d: Buffer): void => {
      output += d;
      const m = /Tally is up on (\S+)/.exec(output);
      if (m) resolve(m[1]!);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('error', reject);
    void closed.then(() => reject(new Error(`the commands ended before serving:\n${output}`)));
  });
  return {
    ready,
    output: () => output,
    async stop(): Promise<void> {
      if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGTERM');
      await closed;
    },
  };
}
