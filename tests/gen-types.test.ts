import { execFile, spawnSync } from 'node:child_process';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packageRoot } from '../gateway/paths.js';
import { listen } from '../gateway/server.js';
import { generateTypes } from '../gateway/typescript-types.js';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import type { WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';

// `tally gen types` writes the Database type supabase-js takes: a program typed with it
// compiles with tsc --strict, its mistakes do not, and it runs against Tally.

let db: TestDatabase, t: TestApp, a: WorkspaceFixture, jwtA: string;
let server: Server;
let dir: string;

beforeAll(async () => {
  ({ db, t, a, jwtA } = await setUpFinance(restEnv(), ['Typed A', 'Typed B']));
  server = await listen(t.app, 0, '127.0.0.1', t.ctx.config);
  dir = await mkdtemp(join(tmpdir(), 'tally-types-'));
  await symlink(join(packageRoot, 'node_modules'), join(dir, 'node_modules'));
});
afterAll(async () => {
  await new Promise((r) => server.close(r));
  await tearDown(db, t);
  await rm(dir, { recursive: true, force: true });
});

const PROGRAM = `
import { createClient } from '@supabase/supabase-js';
import ws from 'ws';
import type { Database, Tables, TablesInsert } from './database.types.js';

const supabase = createClient<Database>(process.env.URL!, process.env.KEY!, {
  global: { headers: { Authorization: 'Bearer ' + process.env.JWT } },
  auth: { persistSession: false, autoRefreshToken: false },
  realtime: { transport: ws },
});

const { data: funds, error } = await supabase
  .from('funds')
  .select('id, name, target_amount, balance, fund_transactions(name, amount), contacts(name)')
  .order('name');
if (error) throw new Error(error.message);
const fund = funds[0]!;
const name: string = fund.name;
const target: number | null = fund.target_amount;
const amounts: number[] = fund.fund_transactions.map((t) => t.amount);
// @ts-expect-error no such column
void fund.no_such_column;

const draft: TablesInsert<'personal_transactions'> = { name: 'Typed', amount: 7.5, category_id: 'other', method_id: 'cash' };
const { data: created, error: failed } = await supabase.from('personal_transactions').insert(draft).select('id, amount').single();
if (failed) throw new Error(failed.message);
const expense: Pick<Tables<'personal_transactions'>, 'id' | 'amount'> = created;
// @ts-expect-error amount is a number
void supabase.from('personal_transactions').insert({ name: 'Wrong', amount: 'seven', category_id: 'other', method_id: 'cash' });
// @ts-expect-error name is required
void supabase.from('personal_transactions').insert({ amount: 1, category_id: 'other', method_id: 'cash' });
// @ts-expect-error an internal table is not in the types
void supabase.from('api_tokens').select('*');

const { data: summary, error: noSummary } = await supabase.rpc('fund_summary', { fund_id: fund.id });
if (noSummary) throw new Error(noSummary.message);
// @ts-expect-error fund_summary takes fund_id
void supabase.rpc('fund_summary', { fund: fund.id });

console.log(JSON.stringify({ name, target, amounts, expense, summary }));
`;

it('types a supabase-js program that compiles with tsc --strict, refuses its mistakes, and runs against Tally', async () => {
  await writeFile(
    join(dir, 'database.types.ts'),
    await generateTypes(db.admin, ['public'], 'api_write', 'workspace_id'),
  );
  await writeFile(join(dir, 'program.ts'), PROGRAM);
  await writeFile(join(dir, 'package.json'), '{"type":"module"}');
  // ws (supabase-js's realtime transport on Node 20) ships no types; only the transport option takes it.
  await writeFile(join(dir, 'ws.d.ts'), "declare module 'ws';\n");
  const tsc = spawnSync(
    join(packageRoot, 'node_modules/.bin/tsc'),
    [
      '--strict',
      '--module',
      'nodenext',
      '--target',
      'es2022',
      '--skipLibCheck',
      '--outDir',
      'out',
      'program.ts',
      'ws.d.ts',
    ],
    { cwd: dir, encoding: 'utf8' },
  );
  expect(tsc.stdout + tsc.stderr).toBe('');
  expect(tsc.status).toBe(0);

  const { port } = server.address() as AddressInfo;
  // Not spawnSync: the server answering the program runs in this process.
  const run = await new Promise<{ stdout: string; stderr: string }>((resolve, reject) =>
    execFile(
      process.execPath,
      ['out/program.js'],
      { cwd: dir, env: { ...process.env, URL: `http://127.0.0.1:${port}`, KEY: TEST_API_KEY, JWT: jwtA } },
      (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve({ stdout, stderr })),
    ),
  );
  expect(run.stderr).toBe('');
  const out = JSON.parse(run.stdout);
  expect(out).toMatchObject({ name: `${a.name} fund`, target: 1000, amounts: [100] });
  expect(out.expense.amount).toBe(7.5);
  expect(await db.admin`SELECT 1 FROM public.personal_transactions WHERE id = ${out.expense.id}`).toHaveLength(1);
  expect(out.summary).toMatchObject({ balance: 100 });
}, 120_000);

it('describes only what the role may read', async () => {
  const anon = await generateTypes(db.admin, ['public'], 'anon', 'workspace_id');
  expect(anon).not.toContain('personal_transactions');
  const writer = await generateTypes(db.admin, ['public'], 'api_write', 'workspace_id');
  expect(writer).toContain('"personal_transactions": {');
  expect(writer).not.toContain('api_tokens');
  expect(writer).toContain('PostgrestVersion: "13"');
  // Functions as the role may execute them: undo_change is the write role's.
  expect(writer).toContain('"undo_change": {');
  expect(await generateTypes(db.admin, ['public'], 'api_read', 'workspace_id')).not.toContain('undo_change');
  expect(anon).not.toContain('fund_summary');
});
