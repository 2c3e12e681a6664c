import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import packaged from '@sparticuz/chromium';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { createKey } from '../gateway/admin/keys.js';
import { addMember } from '../gateway/admin/members.js';
import { listen } from '../gateway/server.js';
import { startTestApp, type TestApp } from './harness/app.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';

// The settings page end to end, in a real headless Chromium: the one @sparticuz/chromium ships in
// its npm package (unpacked to the temporary folder on first use), so `npm install` is all a fresh
// machine needs: a member signs in, creates a write token and copies it, the
// token is exchanged and lists expenses, the member revokes it on the page, and the next API
// call answers 401 (the exchange, /api/v1 and /rest/v1). Screenshots go to $TALLY_SCREENSHOT_DIR or a temporary folder.

const PASSWORD = 'a passphrase for the browser';
const EMAIL = 'owner@example.com';

describe('settings page in a real browser', () => {
  let db: TestDatabase;
  let t: TestApp;
  let server: Server;
  let origin: string;
  let ws: WorkspaceFixture;
  let publishableKey: string;
  let profile: string;
  let shots: string;
  let context: BrowserContext;
  let page: Page;
  const cspViolations: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    ws = await workspaceWithData(db.admin, 'Browser Travel');
    await addMember(db.admin, ws.id, EMAIL, 'owner', PASSWORD, 'test');
    publishableKey = (await createKey(db.admin, 'e2e', 'test')).key;
    t = startTestApp(db.url);
    server = await listen(t.app, 0, '127.0.0.1', t.ctx.config);
    const address = server.address() as { port: number };
    origin = `http://127.0.0.1:${address.port}`;
    profile = await mkdtemp(join(tmpdir(), 'tally-chromium-'));
    shots = process.env.TALLY_SCREENSHOT_DIR ?? join(tmpdir(), 'tally-settings-screenshots');
    await mkdir(shots, { recursive: true });
    context = await chromium.launchPersistentContext(profile, {
      executablePath: await packaged.executablePath(),
      headless: true,
      args: [
        ...packaged.args,
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
      viewport: { width: 1100, height: 900 },
    });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
    page = context.pages()[0] ?? (await context.newPage());
    page.on('console', (msg) => {
      if (/Content[- ]Security[- ]Policy/i.test(msg.text())) cspViolations.push(msg.text());
    });
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    await t?.close();
    await db?.drop();
    if (profile) await rm(profile, { recursive: true, force: true });
  });

  const exchange = (token: string) =>
    fetch(`${origin}/api/v1/token`, { method: 'POST', headers: { Authorization: `Bearer ${token}` } });

  const listExpenses = (path: string, accessToken: string, headers: Record<string, string> = {}) =>
    fetch(`${origin}${path}`, { headers: { Authorization: `Bearer ${accessToken}`, ...headers } });

  it('signs in, creates and copies a write token, which works until it is revoked on the page', async () => {
    // Sign in with the keyboard only.
    await page.goto(`${origin}/settings/api`);
    await page.waitForURL(`${origin}/settings/login`);
    await page.getByLabel('Email').focus();
    await page.keyboard.type(EMAIL);
    await page.keyboard.press('Tab');
    await page.keyboard.type(PASSWORD);
    await page.keyboard.press('Enter');
    await page.waitForURL(`${origin}/settings/api`);
    await expect(page.getByRole('heading', { level: 1 }).textContent()).resolves.toContain('Browser Travel');
    // The stylesheet and the script, both same-origin files, were applied and ran.
    // (Browser code as strings: the project's TypeScript has no DOM library.)
    expect(await page.evaluate('getComputedStyle(document.querySelector(".top")).display')).toBe('flex');

    // Create a read-write token.
    await page.getByLabel('Label').fill('browser e2e');
    await page.getByLabel('Read-write').check();
    await page.getByRole('button', { name: 'Create token' }).click();
    await page.getByRole('heading', { name: /New read-write token/ }).waitFor();
    const token = await page.locator('#new-token').inputValue();
    expect(token).toMatch(/^tally_ws_[0-9A-Za-z]{40}$/);
    await expect(page.locator('#curl-line').textContent()).resolves.toBe(
      `curl -X POST ${origin}/api/v1/token -H "Authorization: Bearer ${token}"`,
    );
    await page.getByRole('button', { name: 'Copy token' }).click();
    await page.locator('.copy-status').filter({ hasText: /./ }).waitFor(); // the page's own timeout, as every wait here
    await expect(page.locator('.copy-status').textContent()).resolves.toBe('Copied to the clipboard.');
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(token);
    await page.screenshot({ path: join(shots, 'settings-api-token-created.png'), fullPage: true });

    // The token exchanges for an access token that lists the workspace's expenses.
    const exchanged = await exchange(token);
    expect(exchanged.status).toBe(200);
    const { access_token: accessToken, scope } = (await exchanged.json()) as { access_token: string; scope: string };
    expect(scope).toBe('write');
    const expected = [expect.objectContaining({ id: ws.expenseId, name: `${ws.name} lunch` })];
    const wrapper = await listExpenses('/api/v1/personal_transactions', accessToken);
    expect(wrapper.status).toBe(200);
    expect(await wrapper.json()).toEqual(expected);
    const rest = await listExpenses('/rest/v1/personal_transactions', accessToken, { apikey: publishableKey });
    expect(rest.status).toBe(200);
    expect(await rest.json()).toEqual(expected);

    // Revoke it on the page, by keyboard, through the confirmation step.
    await page.goto(`${origin}/settings/api`);
    await page
      .getByRole('row', { name: /browser e2e/ })
      .getByRole('link', { name: /Revoke/ })
      .focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Revoke token “browser e2e”?' }).waitFor();
    await page.getByRole('button', { name: 'Revoke token' }).focus();
    await page.keyboard.press('Enter');
    await page.getByText('The token is revoked.').waitFor();
    await expect(page.getByRole('row', { name: /browser e2e/ }).textContent()).resolves.toContain('Revoked');
    await page.screenshot({ path: join(shots, 'settings-api-token-revoked.png'), fullPage: true });

    // The very next API calls answer 401: the exchange, and the access token minted before.
    expect((await exchange(token)).status).toBe(401);
    expect((await listExpenses('/api/v1/personal_transactions', accessToken)).status).toBe(401);
    expect((await listExpenses('/rest/v1/personal_transactions', accessToken, { apikey: publishableKey })).status).toBe(
      401,
    );

    // Sign out: the session is gone and the page asks to sign in again.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${origin}/settings/login`);
    await page.goto(`${origin}/settings/api`);
    await page.waitForURL(`${origin}/settings/login`);
    expect(cspViolations).toEqual([]);
  }, 120_000);
});
