import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, rm, stat, writeFile, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packageRoot } from '../gateway/paths.js';
import { freePort } from '../gateway/db/free-port.js';
import { exited, tallyServer } from './harness/cli.js';
import { readmeBlocks, showsExpected, type Block } from './harness/readme.js';
import { first } from './harness/present.js';

// The README's examples, run as written against a freshly started `tally up` (its own home and
// ports): the shell blocks in one bash session, in order (so FUND, JWT… carry over), each
// command checked for exit status 0 and for the output the README shows under it; each
// JavaScript block as a module, after the JavaScript blocks before it (a later snippet
// continues the program of an earlier one). Only the address is rewritten: localhost:3000.

const README = join(packageRoot, 'README.md');
const READY = /Demo token\s+(tally_ws_\S+)/;

/** `npm run tally` runs the build: rebuild when a source file is newer than it. */
async function ensureBuilt(): Promise<void> {
  const built = join(packageRoot, 'dist/gateway/cli/main.js');
  const newest = async (dir: string): Promise<number> => {
    let max = 0;
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      max = Math.max(max, entry.isDirectory() ? await newest(path) : (await stat(path)).mtimeMs);
    }
    return max;
  };
  const builtAt = await stat(built).then(
    (s) => s.mtimeMs,
    () => 0,
  );
  if (builtAt < Math.max(await newest(join(packageRoot, 'gateway')), await newest(join(packageRoot, 'mcp')))) {
    const r = spawnSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: packageRoot, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`build failed:\n${r.stdout}${r.stderr}`);
  }
}

/** One bash process for all shell blocks; each command is sourced from a file (stdin stays ours). */
class Shell {
  private out = '';
  private n = 0;
  constructor(
    private readonly bash: ChildProcessWithoutNullStreams,
    private readonly dir: string,
  ) {
    bash.stdout.on('data', (d) => (this.out += d));
    bash.stderr.on('data', (d) => (this.out += d));
  }

  async run(command: string): Promise<{ status: number; output: string }> {
    const n = ++this.n;
    const file = join(this.dir, `command-${n}.sh`);
    await writeFile(file, command + '\n');
    this.out = '';
    this.bash.stdin.write(`source ${file} </dev/null; printf '\\n@@done ${n} %s@@\\n' "$?"\n`);
    const done = new RegExp(`\\n@@done ${n} (\\d+)@@\\n`);
    for (;;) {
      const m = done.exec(this.out);
      if (m) return { status: Number(m[1]), output: this.out.slice(0, m.index) };
      if (this.bash.exitCode !== null) throw new Error(`bash exited during:\n${command}\n${this.out}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

describe('README examples', () => {
  let dir: string;
  let server: Awaited<ReturnType<typeof tallyServer>>;
  let env: Record<string, string | undefined>;
  let port: number;
  let blocks: Block[];

  beforeAll(async () => {
    blocks = readmeBlocks(await readFile(README, 'utf8'));
    await ensureBuilt();
    dir = await mkdtemp(join(tmpdir(), 'tally-readme-'));
    await chmod(dir, 0o755);
    port = await freePort();
    env = {
      DATABASE_URL: undefined,
      TALLY_JWT_SECRET: undefined,
      TALLY_HOME: join(dir, 'home'),
      PORT: String(port),
      TALLY_EMBEDDED_PG_PORT: String(await freePort()),
      // No TALLY_RATE_LIMIT_PER_MINUTE: the examples run at `npm start`'s own limit, as a reader's do.
      TALLY_RATE_LIMIT_PER_MINUTE: undefined,
    };
    server = await tallyServer(['up'], env, READY);
  }, 300_000);

  afterAll(async () => {
    if (server) {
      server.child.kill('SIGTERM');
      await exited(server.child);
    }
    if (dir) await rm(dir, { recursive: true, force: true });
  }, 60_000);

  it('reads blocks, commands and shown outputs from any markdown, skipping marked blocks', () => {
    const md = [
      'Prose.',
      '<!-- not run: needs Docker -->',
      '```sh',
      'docker compose up',
      '```',
      '',
      '| a | table |',
      '',
      '```sh',
      'X=$(echo \'{"a":',
      "  1}')   # a note",
      '# {"a":…}',
      '',
      '# a heading comment',
      'cat <<EOF',
      'x',
      'EOF',
      '```',
      '```json',
      '{}',
      '```',
      '```js',
      'console.log(1);',
      '```',
    ].join('\n');
    const parsed = readmeBlocks(md);
    expect(parsed.map((b) => b.lang)).toEqual(['sh', 'js']);
    expect(first(parsed).commands).toEqual([
      { text: 'X=$(echo \'{"a":\n  1}\')   # a note', expected: ['{"a":…}'] },
      { text: 'cat <<EOF\nx\nEOF', expected: [] },
    ]);
    expect(showsExpected('noise\n{"a":1}\n', ['{"a":…}'])).toBe(true);
    expect(showsExpected('{"b":1}', ['{"a":…}'])).toBe(false);
    expect(showsExpected('Location: /x/12ab', ['Location: /x/<id>'])).toBe(true);
  });

  it('finds the examples, and skips only blocks marked "not run"', () => {
    expect(blocks.filter((b) => b.lang === 'sh').length).toBeGreaterThanOrEqual(4);
    expect(blocks.filter((b) => b.lang === 'js').length).toBeGreaterThanOrEqual(2);
    expect(blocks.some((b) => b.code.includes('npm start'))).toBe(false); // marked: the test starts the service itself
  });

  it('prints a demo sign-in for the settings page that signs in, and the page says how to connect', async () => {
    const [, email = '', password = ''] = /demo sign-in: (\S+), password (\S+)\)/.exec(server.output) ?? [];
    expect(email).toBe('demo@example.com');
    const base = `http://127.0.0.1:${port}`;
    const cookies = (res: Response): string[] => res.headers.getSetCookie().map((c) => c.split(';')[0]!);
    const login = await fetch(`${base}/settings/login`);
    const pre = cookies(login);
    const csrf = /name="csrf" value="([^"]+)"/.exec(await login.text())?.[1] ?? '';
    const signedIn = await fetch(`${base}/settings/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: pre.join('; '), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ csrf, email, password }),
    });
    expect([302, 303]).toContain(signedIn.status);
    const page = await fetch(`${base}/settings/api`, {
      headers: { cookie: [...pre, ...cookies(signedIn)].join('; ') },
    });
    const text = await page.text();
    expect(page.status).toBe(200);
    expect(text).toContain('Demo');
    expect(text).toContain(`${base}/mcp?token=`);
    expect(text).toContain('<a href="/api/v1/docs/">');
    expect(text).toContain('tally key create');
  });

  it('runs every shell and JavaScript example in order, with the outputs the README shows', async () => {
    expect(server.output).toMatch(
      /^ {2}Rate limit {7}600 requests a minute per token \(the embedded database's default;/m,
    );
    const token = READY.exec(server.output)![1];
    const key = /Publishable key\s+(\S+)/.exec(server.output)![1];
    const local = (code: string) => code.replace(/\b(localhost|127\.0\.0\.1):3000\b/g, `127.0.0.1:${port}`);
    const scratch = join(packageRoot, 'node_modules/.cache/tally-readme'); // inside the package: imports resolve
    await mkdir(scratch, { recursive: true });
    const bash = spawn('bash', ['--noprofile', '--norc'], {
      cwd: packageRoot,
      env: { ...process.env, NODE_OPTIONS: '', ...env, TALLY_TOKEN: token, TALLY_KEY: key } as NodeJS.ProcessEnv,
    });
    const shell = new Shell(bash, dir);
    const failures: string[] = [];
    const js: string[] = [];
    try {
      for (const block of blocks) {
        if (block.lang === 'sh') {
          for (const command of block.commands) {
            const { status, output } = await shell.run(local(command.text));
            if (status !== 0) failures.push(`README.md:${block.line}: exit ${status}\n${command.text}\n${output}`);
            else if (command.expected.length && !showsExpected(output, command.expected)) {
              failures.push(
                `README.md:${block.line}: the output differs from the README\n${command.text}\nREADME:\n${command.expected.join('\n')}\nactual:\n${output}`,
              );
            }
          }
        } else {
          js.push(local(block.code));
          const file = join(scratch, `example-${block.line}.mjs`);
          await writeFile(file, js.join(`\nconsole.log('@@example@@');\n`));
          const { status, output } = await shell.run(`node ${file}`);
          await rm(file);
          if (status !== 0)
            failures.push(
              `README.md:${block.line}: exit ${status}\n${block.code}\n${output.split('@@example@@').pop()}`,
            );
        }
      }
    } finally {
      bash.stdin.end();
      await exited(bash);
    }
    expect(failures).toEqual([]);
  }, 300_000);
});
