import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import packaged from '@sparticuz/chromium';
import { build } from 'esbuild';
import { chromium, type BrowserContext } from 'playwright-core';
import { createKey } from '../gateway/admin/keys.js';
import { createToken } from '../gateway/admin/tokens.js';
import { freePort } from '../gateway/db/free-port.js';
import { packageRoot } from '../gateway/paths.js';
import { listen } from '../gateway/server.js';
import { startTestApp, type TestApp } from './harness/app.js';
import { exited } from './harness/cli.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { section } from './harness/docs.js';
import { workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { waitFor } from './harness/wait.js';

// The browser front end of docs/clients.md, in a real headless Chromium (the one
// @sparticuz/chromium ships). The page's backend (backend.mjs, as written) holds a read token
// and hands its JWT to a signed-in user; the page's supabase-js code (as written, its two
// placeholders filled in, bundled by esbuild as a front end's build would) asks it for the JWT
// and reads Tally from another origin, through CORS. The workspace token never reaches the browser.

interface Snippets {
  backend: string;
  browser: string;
}

/** The two js blocks of the page's "## A browser front end": the backend's file, then the browser's code. */
function snippets(): Snippets {
  const blocks = [...section('docs/clients.md', '## A browser front end').matchAll(/^```js\n([\s\S]*?)^```/gm)].map(
    (m) => m[1]!,
  );
  const [backend, browser] = blocks;
  if (!backend?.startsWith('// backend.mjs') || !browser) throw new Error('the backend and browser blocks moved');
  return { backend, browser };
}

describe('a browser front end, as docs/clients.md has it', () => {
  let db: TestDatabase;
  let t: TestApp;
  let tally: Server;
  let page: Server;
  let backend: ChildProcess;
  let context: BrowserContext;
  let dir: string;
  let ws: WorkspaceFixture;
  let token: string;
  let pageOrigin: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    ws = await workspaceWithData(db.admin, 'Front End');
    token = (await createToken(db.admin, ws.id, 'read', 'front end', 'test')).token;
    const key = (await createKey(db.admin, 'front end', 'test')).key;
    t = startTestApp(db.url);
    tally = await listen(t.app, 0, '127.0.0.1', t.ctx.config);
    const tallyOrigin = `http://127.0.0.1:${(tally.address() as { port: number }).port}`;
    dir = await mkdtemp(join(tmpdir(), 'tally-front-end-'));

    // The backend, as written, on a port of its own.
    const { backend: backendCode, browser } = snippets();
    await writeFile(join(dir, 'backend.mjs'), backendCode);
    const appPort = await freePort();
    backend = spawn(process.execPath, ['backend.mjs'], {
      cwd: dir,
      env: { ...process.env, NODE_OPTIONS: '', TALLY_URL: tallyOrigin, TALLY_TOKEN: token, APP_PORT: String(appPort) },
      stdio: 'inherit',
    });
    await waitFor(
      () =>
        new Promise<boolean>((resolve) => {
          const socket = connect(appPort, '127.0.0.1', () => resolve(socket.end() && true));
          socket.on('error', () => resolve(false));
        }),
      'the backend to listen',
    );

    // The browser's code, as a front end's build makes it, and a page to run it on.
    const code =
      browser.replace('https://tally.example.com', tallyOrigin).replace('tally_pk_…', key) +
      "\nwindow.result = await supabase.from('funds').select('name');\n";
    const bundle = await build({
      stdin: { contents: code, resolveDir: packageRoot, loader: 'js' },
      bundle: true,
      format: 'esm',
      platform: 'browser',
      write: false,
      logLevel: 'error',
    });
    const script = bundle.outputFiles[0]!.text;
    page = createServer((req, res) => {
      if (req.url === '/tally-token') {
        // The app's own origin serves its backend's routes: here, by passing them on.
        void fetch(`http://127.0.0.1:${appPort}/tally-token`, { headers: { cookie: req.headers.cookie ?? '' } }).then(
          async (r) => res.writeHead(r.status, { 'content-type': 'application/json' }).end(await r.text()),
        );
      } else if (req.url === '/app.js') {
        res.writeHead(200, { 'content-type': 'text/javascript' }).end(script);
      } else {
        res.writeHead(200, { 'content-type': 'text/html' }).end('<script type="module" src="/app.js"></script>');
      }
    });
    await new Promise<void>((resolve) => page.listen(0, '127.0.0.1', resolve));
    pageOrigin = `http://127.0.0.1:${(page.address() as { port: number }).port}`;

    context = await chromium.launchPersistentContext(join(dir, 'profile'), {
      executablePath: await packaged.executablePath(),
      headless: true,
      args: [...packaged.args, '--disable-quic', '--no-first-run', '--disable-background-networking'],
    });
  }, 180_000);

  afterAll(async () => {
    await context?.close();
    if (backend) {
      backend.kill('SIGTERM');
      await exited(backend);
    }
    for (const server of [page, tally])
      await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    await t?.close();
    await db?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('reads the workspace from another origin with the JWT the backend hands a signed-in user, never the workspace token', async () => {
    await context.addCookies([{ name: 'session', value: 'signed-in', url: pageOrigin }]);
    const tab = await context.newPage();
    const requests: string[] = [];
    tab.on('request', (r) => requests.push(`${r.url()} ${JSON.stringify(r.headers())}`));
    await tab.goto(pageOrigin);
    await tab.waitForFunction("'result' in window", undefined, { timeout: 60_000 });
    const result = await tab.evaluate('window.result');
    expect(result).toMatchObject({ error: null, data: [{ name: 'Front End fund' }] });
    // The page asked its backend, then Tally, across origins; the workspace token went nowhere.
    expect(requests.some((r) => r.startsWith(`${pageOrigin}/tally-token`))).toBe(true);
    expect(requests.some((r) => r.includes('/rest/v1/funds'))).toBe(true);
    expect(requests.filter((r) => r.includes(token))).toEqual([]);
    await tab.close();
  });

  it('gives a visitor who is not signed in no JWT, so no data', async () => {
    await context.clearCookies();
    const tab = await context.newPage();
    const answer = await tab.goto(`${pageOrigin}/tally-token`);
    expect(answer?.status()).toBe(401);
    await tab.close();
  });
});
