import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import request from 'supertest';
import { tools } from '../mcp/tools.js';
import { accessToken, type TestApp } from './harness/app.js';
import { COST_FIELDS as FIELDS, costMeter, type Cost, type CostMeter } from './harness/costs.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { tokenFor, workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { callEveryTool, toolCaller } from './harness/mcp-tools.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';

// What one request of each kind costs the database, counted on the wire between the server and
// Postgres (tests/harness/wire.ts), never timed: the statements it ran, the round trips the
// server waited for, the transactions Postgres committed, and the statements Postgres had to
// parse; and by pg_stat_statements (tracking this file's database alone), the statements that
// functions and triggers ran inside them. The figures are held to tests/request-costs.md: a
// request that costs more than its line says fails here, and so does one that costs less, so
// that the table stays the true figure.
//
// Each kind is sent a few times and its figure is the least of its sends: the first send of a
// statement on a connection parses it, and a send may meet the start of a rate-limit window or
// the minute after which a workspace token is looked up again. The change watch's connection is
// counted apart: its poll is a cost per second, not per request.

const TABLE = new URL('./request-costs.md', import.meta.url);
const HEADINGS = ['statements', 'round trips', 'commits', 'parses', 'statements in functions and triggers'];
const SENDS = 4;

/** The table's lines: request → its figures. */
function committedTable(): Map<string, Cost> {
  const table = new Map<string, Cost>();
  for (const line of readFileSync(TABLE, 'utf8').split('\n')) {
    const cells = line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim());
    if (cells.length !== FIELDS.length + 1 || !/^\d+$/.test(cells[1]!)) continue;
    const [name, ...figures] = cells as [string, ...string[]];
    table.set(name.replace(/^`|`$/g, ''), Object.fromEntries(FIELDS.map((f, i) => [f, Number(figures[i])])) as Cost);
  }
  return table;
}

const tableLine = (name: string, c: Cost) => `| \`${name}\` | ${FIELDS.map((f) => c[f]).join(' | ')} |`;

describe('what each request costs the database', () => {
  let db: TestDatabase;
  let meter: CostMeter;
  let t: TestApp;
  let exact: TestApp;
  let a: WorkspaceFixture;
  let jwt: string;
  /** Of another token: rate limits count per token, and the two apps count differently. */
  let exactJwt: string;
  let workspaceToken: string;
  /** Every send's cost, by request kind. */
  const sends = new Map<string, Cost[]>();

  beforeAll(async () => {
    db = await createTestDatabase();
    meter = await costMeter(db);
    a = await workspaceWithData(db.admin, 'costs');
    const write = await tokenFor(db.admin, a.id, 'write');
    workspaceToken = write.token;
    jwt = await accessToken({ role: 'api_write', workspace_id: a.id, scope: 'write', sub: write.id });
    const other = await tokenFor(db.admin, a.id, 'write');
    exactJwt = await accessToken({ role: 'api_write', workspace_id: a.id, scope: 'write', sub: other.id });
    // A pool of two: a request's statements meet a connection that has prepared them already.
    t = meter.app(restEnv({ TALLY_DB_POOL: '2' }));
    // Under 1,000 requests a minute the limit is counted in the database at every request.
    exact = meter.app(restEnv({ TALLY_DB_POOL: '2', TALLY_RATE_LIMIT_PER_MINUTE: '600' }));
  });
  afterAll(async () => {
    await meter.close();
    await db.drop();
  });

  /** Sends one request and records what it cost. */
  async function measure<T>(kind: string, send: () => Promise<T>): Promise<T> {
    const { result, cost } = await meter.measure(send);
    sends.set(kind, [...(sends.get(kind) ?? []), cost]);
    return result;
  }

  const rest = { apikey: TEST_API_KEY, authorization: () => `Bearer ${jwt}` };
  const get = (app: TestApp, path: string, headers: Record<string, string> = {}) =>
    request(app.app)
      .get(`/rest/v1/${path}`)
      .set({
        apikey: rest.apikey,
        authorization: app === exact ? `Bearer ${exactJwt}` : rest.authorization(),
        ...headers,
      })
      .expect((res) => expect(res.status).toBe(200));
  const send = (method: 'post' | 'patch' | 'delete', path: string, body?: object, prefer = 'return=minimal') => {
    const app = request(t.app);
    return app[method](`/rest/v1/${path}`)
      .set({ apikey: rest.apikey, authorization: rest.authorization(), prefer })
      .send(body)
      .expect((res) => expect(res.status).toBeLessThan(300));
  };

  /** An expense of workspace A, made by the owner (not through the proxy). */
  async function newExpense(): Promise<string> {
    const id = randomUUID();
    await db.admin`INSERT INTO public.personal_transactions (workspace_id, id, name, amount, category_id, method_id)
                   VALUES (${a.id}, ${id}, 'cost', 3, 'other', 'cash')`;
    return id;
  }

  const expense = (n: number) => ({ name: `cost ${n}`, amount: 3, category_id: 'other', method_id: 'cash' });

  /**
   * The requests, each sent SENDS times: a function that makes what the request needs and
   * answers the request to measure.
   */
  const KINDS: Record<string, () => Promise<() => Promise<unknown>>> = {
    'GET /rest/v1/personal_transactions?select=*&order=occurred_at.desc&limit=20': async () => () =>
      get(t, 'personal_transactions?select=*&order=occurred_at.desc&limit=20'),
    'GET /rest/v1/personal_transactions?id=eq.… (one row)': async () => () =>
      get(t, `personal_transactions?id=eq.${a.expenseId}`, { accept: 'application/vnd.pgrst.object+json' }),
    'GET /rest/v1/funds?select=*,fund_transactions(*)': async () => () => get(t, 'funds?select=*,fund_transactions(*)'),
    'GET /rest/v1/funds?select=id,summary': async () => () => get(t, 'funds?select=id,summary'),
    'GET /rest/v1/rpc/fund_summaries': async () => () => get(t, 'rpc/fund_summaries'),
    'POST /rest/v1/personal_transactions (one row)': async () => () =>
      send('post', 'personal_transactions', expense(1)),
    'POST /rest/v1/personal_transactions (three rows)': async () => () =>
      send('post', 'personal_transactions', [expense(1), expense(2), expense(3)]),
    'POST /rest/v1/personal_transactions (upsert)': async () => {
      const id = await newExpense();
      return () =>
        send('post', 'personal_transactions', { id, ...expense(4) }, 'return=minimal, resolution=merge-duplicates');
    },
    'PATCH /rest/v1/personal_transactions?id=eq.…': async () => {
      const id = await newExpense();
      return () => send('patch', `personal_transactions?id=eq.${id}`, { note: 'patched' });
    },
    'DELETE /rest/v1/personal_transactions?id=eq.…': async () => {
      const id = await newExpense();
      return () => send('delete', `personal_transactions?id=eq.${id}`);
    },
    'GET /api/v1/personal_transactions': async () => () =>
      request(t.app).get('/api/v1/personal_transactions').set('authorization', rest.authorization()).expect(200),
    'POST /api/v1/token (token exchange)': async () => () =>
      request(t.app).post('/api/v1/token').set('authorization', `Bearer ${workspaceToken}`).expect(200),
    'GET /rest/v1/personal_transactions?… with the rate limit counted exactly (under 1,000 a minute)': async () => () =>
      get(exact, 'personal_transactions?select=*&order=occurred_at.desc&limit=20'),
  };

  it('each request costs what tests/request-costs.md says, no more and no less', async () => {
    for (let i = 0; i < SENDS; i++)
      for (const [kind, prepare] of Object.entries(KINDS)) await measure(kind, await prepare());
    // Every MCP tool of the registry, with a workspace token.
    const caller = toolCaller(
      () => t.app,
      () => workspaceToken,
    );
    for (let i = 0; i < SENDS - 1; i++)
      await callEveryTool(a, async (name, args) => {
        const result = await measure(`MCP tools/call ${name}`, () => caller(name, args));
        if (result.isError) throw new Error(`${name}: ${result.content[0]?.text}`);
        return result.structuredContent;
      });
    expect(tools.every((tool) => sends.has(`MCP tools/call ${tool.name}`))).toBe(true);

    const measured = new Map(
      [...sends].map(([kind, costs]) => [
        kind,
        Object.fromEntries(FIELDS.map((f) => [f, Math.min(...costs.map((c) => c[f]))])) as Cost,
      ]),
    );
    const table = committedTable();
    const problems: string[] = [];
    for (const [kind, cost] of measured) {
      const line = table.get(kind);
      if (!line) {
        problems.push(`${kind}: no line in tests/request-costs.md; add ${tableLine(kind, cost)}`);
        continue;
      }
      for (const [i, f] of FIELDS.entries()) {
        if (cost[f] > line[f])
          problems.push(
            `${kind}: ${cost[f]} ${HEADINGS[i]}, the table says ${line[f]}. A request that costs more is a regression; ` +
              'if it is meant, raise the line and say why in the commit',
          );
        else if (cost[f] < line[f])
          problems.push(
            `${kind}: ${cost[f]} ${HEADINGS[i]}, the table says ${line[f]}: it costs less now, lower the line to ${tableLine(kind, cost)}`,
          );
      }
    }
    for (const kind of table.keys())
      if (!measured.has(kind)) problems.push(`${kind}: in tests/request-costs.md, but no such request is measured`);
    if (problems.length > 0) {
      const all = [...measured].map(([kind, cost]) => tableLine(kind, cost)).join('\n');
      throw new Error(`${problems.join('\n')}\n\nMeasured:\n${all}`);
    }
  });
});
