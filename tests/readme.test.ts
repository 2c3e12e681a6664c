import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packageRoot } from '../gateway/paths.js';
import { buildIfChanged } from '../gateway/cli/build.mjs';
import { freePort } from '../gateway/db/free-port.js';
import { exited, tallyServer } from './harness/cli.js';
import { readmeBlocks, showsExpected, type Block } from './harness/readme.js';
import { first } from './harness/present.js';

// The examples of the README and of docs/, run as written against a freshly started `tally up`
// (its own home and ports), page by page in the order below. Each page runs in a bash session of
// its own, started with what the README's first request leaves a reader: TALLY_URL, TALLY_TOKEN
// and TALLY_KEY from the banner, and the README's JWT. So a page needs no other page's
// variables, as a reader who opens it after the README has none. In a page, shell blocks run in
// order in that session (so FUND… carry over), each command checked for exit status 0 and for
// the output the page shows under it; each JavaScript block as a module, after the page's
// JavaScript blocks before it (a later snippet continues the program of an earlier one). A `ts`
// or `js` block that names a file on its first line is written as that file, for the page's
// next shell block to compile or run. Nothing is rewritten: the examples use $TALLY_URL.

/** Every page with examples, in the order they run. Every markdown page of the repository's docs is here. */
const PAGES = [
  'README.md',
  'docs/wrapper.md',
  'docs/rest.md',
  'docs/clients.md',
  'docs/activity.md',
  'docs/mcp.md',
  'docs/settings-and-access.md',
  'docs/data-model.md',
  'docs/security-and-limits.md',
  'docs/errors.md',
  'docs/configuration.md',
  'docs/cli.md',
  'docs/deployment.md',
  'docs/performance.md',
  'docs/architecture.md',
];
const READY = /Demo token\s+(tally_ws_\S+)/;

/** The blocks run `npm run tally`, which runs dist/: built first if a source changed, as `npm start` does. */
function ensureBuilt(): void {
  if (buildIfChanged(packageRoot, () => {}).status !== 0)
    throw new Error('npm run build failed (its errors are above)');
}

/** One bash process for all shell blocks; each command is sourced from a file (stdin stays ours). */
class Shell {
  private static n = 0;
  private out = '';
  constructor(
    private readonly bash: ChildProcessWithoutNullStreams,
    private readonly dir: string,
  ) {
    bash.stdout.on('data', (d) => (this.out += d));
    bash.stderr.on('data', (d) => (this.out += d));
  }

  async run(command: string): Promise<{ status: number; output: string }> {
    const n = ++Shell.n;
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

  async close(): Promise<void> {
    this.bash.stdin.end();
    await exited(this.bash);
  }
}

describe('the examples of the README and docs/', () => {
  let dir: string;
  let server: Awaited<ReturnType<typeof tallyServer>>;
  let env: Record<string, string | undefined>;
  let port: number;
  let pages: { page: string; blocks: Block[] }[];

  beforeAll(async () => {
    pages = await Promise.all(
      PAGES.map(async (page) => ({ page, blocks: readmeBlocks(await readFile(join(packageRoot, page), 'utf8')) })),
    );
    ensureBuilt();
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
      '```ts',
      '// program.ts',
      'const x: number = 1;',
      '```',
    ].join('\n');
    const parsed = readmeBlocks(md);
    expect(parsed.map((b) => [b.lang, b.file])).toEqual([
      ['sh', undefined],
      ['js', undefined],
      ['ts', 'program.ts'],
    ]);
    expect(first(parsed).commands).toEqual([
      { text: 'X=$(echo \'{"a":\n  1}\')   # a note', expected: ['{"a":…}'] },
      { text: 'cat <<EOF\nx\nEOF', expected: [] },
    ]);
    expect(showsExpected('noise\n{"a":1}\n', ['{"a":…}'])).toBe(true);
    expect(showsExpected('{"b":1}', ['{"a":…}'])).toBe(false);
    expect(showsExpected('Location: /x/12ab', ['Location: /x/<id>'])).toBe(true);
  });

  it('runs every page of docs/, and the examples are written against $TALLY_URL', async () => {
    const docs = (await readdir(join(packageRoot, 'docs'))).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`);
    expect(PAGES.filter((p) => p.startsWith('docs/')).sort()).toEqual(docs.sort());
    const all = pages.flatMap((p) => p.blocks);
    expect(all.filter((b) => b.lang === 'sh').length).toBeGreaterThanOrEqual(10);
    expect(all.filter((b) => b.lang === 'js').length).toBeGreaterThanOrEqual(3);
    expect(all.filter((b) => b.lang === 'ts').length).toBeGreaterThanOrEqual(1);
    expect(all.some((b) => b.code.includes('npm start'))).toBe(false); // marked: the test starts the service itself
    // The README is the front door: a reader gets to the first request within 300 lines.
    expect((await readFile(join(packageRoot, 'README.md'), 'utf8')).split('\n').length).toBeLessThanOrEqual(300);
    // One variable, set once: no example names the banner's address itself.
    expect(all.filter((b) => /\b(localhost|127\.0\.0\.1):3000\b/.test(b.code)).map((b) => b.code)).toEqual([]);
    for (const block of all.filter((b) => b.lang === 'ts'))
      expect([block.line, block.file]).toEqual([block.line, expect.any(String)]);
  });

  it('prints a demo sign-in for the settings page that signs in, and the page says how to connect', async () => {
    const [, email = '', password = ''] = /demo sign-in: (\S+), password (\S+)\)/.exec(server.output) ?? [];
    expect(email).toBe('demo@example.com');
    const base = `http://127.0.0.1:${port}`;
    expect(server.output).toContain(`Tally is up on ${base} `);
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

  it('runs every shell, JavaScript and TypeScript example in order, with the outputs the pages show', async () => {
    expect(server.output).toMatch(
      /^ {2}Rate limit {7}600 requests a minute per token \(the embedded database's default;/m,
    );
    const reader = {
      // What the README's first request has the reader copy from the banner.
      TALLY_URL: `http://127.0.0.1:${port}`,
      TALLY_TOKEN: READY.exec(server.output)![1]!,
      TALLY_KEY: /Publishable key\s+(\S+)/.exec(server.output)![1]!,
      // A port for the docs' own example servers (a front end's backend), free on this machine.
      APP_PORT: String(await freePort()),
    };
    // The reader's folder: inside the package, so that the examples' imports resolve.
    await mkdir(join(packageRoot, 'node_modules/.cache'), { recursive: true });
    const scratch = await mkdtemp(join(packageRoot, 'node_modules/.cache/tally-docs-'));
    const failures: string[] = [];
    let jwt: string | undefined;
    try {
      for (const { page, blocks } of pages) {
        const shell = new Shell(
          spawn('bash', ['--noprofile', '--norc'], {
            cwd: scratch,
            env: { ...process.env, NODE_OPTIONS: '', ...env, ...reader, JWT: jwt } as NodeJS.ProcessEnv,
          }),
          dir,
        );
        try {
          failures.push(...(await runPage(page, blocks, shell, scratch)));
          if (page === 'README.md') jwt = (await shell.run('printf %s "$JWT"')).output;
        } finally {
          await shell.close();
        }
      }
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
    expect(jwt).toMatch(/^eyJ/);
    expect(failures).toEqual([]);
  }, 600_000);
});

/** One page's blocks in its shell session: the failures, each with the page and line. */
async function runPage(page: string, blocks: Block[], shell: Shell, scratch: string): Promise<string[]> {
  const failures: string[] = [];
  const js: string[] = [];
  for (const block of blocks) {
    const at = `${page}:${block.line}`;
    if (block.file) {
      await writeFile(join(scratch, block.file), block.code + '\n');
    } else if (block.lang === 'sh') {
      for (const command of block.commands) {
        const { status, output } = await shell.run(command.text);
        if (status !== 0) failures.push(`${at}: exit ${status}\n${command.text}\n${output}`);
        else if (command.expected.length && !showsExpected(output, command.expected)) {
          failures.push(
            `${at}: the output differs from the page\n${command.text}\npage:\n${command.expected.join('\n')}\nactual:\n${output}`,
          );
        }
      }
    } else if (block.lang === 'js') {
      js.push(block.code);
      const file = join(scratch, `example-${block.line}.mjs`);
      await writeFile(file, js.join(`\nconsole.log('@@example@@');\n`));
      const { status, output } = await shell.run(`node ${file}`);
      await rm(file);
      if (status !== 0) failures.push(`${at}: exit ${status}\n${block.code}\n${output.split('@@example@@').pop()}`);
    } else {
      failures.push(`${at}: a ts block names the file it is on its first line (// program.ts)`);
    }
  }
  return failures;
}
