// The benchmark's floor: a minimal node:http server that verifies the HS256 JWT and runs the
// very SQL transaction Tally runs for a case through postgres.js, with the same pool size, and
// returns the body Postgres serialised. No routing framework, no parsing of PostgREST's grammar
// or of the JSON body, no apikey, no rate limit: what any Node gateway in front of this
// database pays at least for that request. One route per measured case whose SQL differs from
// the list read: GET / is case (a)'s list read, GET /funds case (c)'s embed, POST /write case
// (d)'s insert. Run as its own process: DATABASE_URL (logging in as `authenticator`, as Tally's
// server does), PORT and TALLY_JWT_SECRET.

import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import postgres from 'postgres';
import { keepDriverClassesFast } from '../gateway/engine/driver-classes.js';
import { oneRow } from '../gateway/engine/invariant.js';

// The statements Tally's gateway generates (gateway/engine/query), captured from its server
// with the parameters it sends as text. Every statement answers the columns of Tally's reads
// and writes: total_result_set, page_total, body (and location for a write).
const ANSWER =
  'SELECT NULL::text AS total_result_set, pg_catalog.count("_postgrest_t")::int AS page_total, ' +
  'coalesce(pg_catalog.json_agg("_postgrest_t"), \'[]\')::text AS body FROM pgrst_rows AS "_postgrest_t"';

interface Route {
  statement: string;
  /** The statement's one parameter, from the request's body. */
  param: (body: string) => string;
  readOnly: boolean;
  /** The response: status and headers from the statement's row. */
  answer: (row: Record<string, unknown>) => { status: number; headers: Record<string, string>; body: string };
}

/** A read: `rows` (the CTE pgrst_rows, with its one parameter `value`) answered as Tally's JSON body. */
const read = (rows: string, value: string): Route => ({
  statement: `WITH pgrst_rows AS (${rows}) ${ANSWER}`,
  param: () => value,
  readOnly: true,
  answer: (row) => ({
    status: 200,
    headers: { 'Content-Type': 'application/json; charset=utf-8' },
    body: row.body as string,
  }),
});

const ROUTES: Record<string, Route> = {
  // GET /rest/v1/personal_transactions?select=*&order=occurred_at.desc&limit=20
  'GET /': read(
    'SELECT "pgrst_0".* FROM "public"."personal_transactions" AS "pgrst_0" ORDER BY "pgrst_0"."occurred_at" DESC LIMIT $1::text::int8',
    '20',
  ),
  // GET /rest/v1/funds?select=*,fund_transactions(*)&status=eq.In%20Progress
  'GET /funds': read(
    'SELECT "pgrst_0".*, coalesce("pgrst_2"."fund_transactions", \'[]\'::json) AS "fund_transactions" ' +
      'FROM "public"."funds" AS "pgrst_0" LEFT JOIN LATERAL (SELECT pg_catalog.json_agg("pgrst_t") AS "fund_transactions" ' +
      'FROM (SELECT "pgrst_1".* FROM "public"."fund_transactions" AS "pgrst_1" WHERE "pgrst_1"."workspace_id" = "pgrst_0"."workspace_id" ' +
      'AND "pgrst_1"."fund_id" = "pgrst_0"."id") AS "pgrst_t") AS "pgrst_2" ON TRUE WHERE "pgrst_0"."status" = $1::text::pg_catalog.text',
    'In Progress',
  ),
  // POST /rest/v1/personal_transactions, one JSON object, Prefer: return=minimal
  'POST /write': {
    statement:
      'WITH pgrst_source AS (INSERT INTO "public"."personal_transactions" AS "pgrst_0" ("name", "amount", "category_id", "method_id") ' +
      'SELECT "pgrst_rec"."name", "pgrst_rec"."amount", "pgrst_rec"."category_id", "pgrst_rec"."method_id" ' +
      'FROM pg_catalog.jsonb_array_elements($1::text::pg_catalog.jsonb) WITH ORDINALITY AS "pgrst_body"("elem", "ord") ' +
      'CROSS JOIN LATERAL pg_catalog.jsonb_populate_record(NULL::"public"."personal_transactions", "pgrst_body"."elem") AS "pgrst_rec" ' +
      'ORDER BY "pgrst_body"."ord" RETURNING "pgrst_0" AS "pgrst_row") ' +
      'SELECT pg_catalog.count(*)::text AS total_result_set, pg_catalog.count(*)::int AS page_total, NULL::text AS body, ' +
      '(SELECT pg_catalog.json_agg(pg_catalog.json_build_array((("pgrst_src"."pgrst_row")."workspace_id")::text, (("pgrst_src"."pgrst_row")."id")::text))::text ' +
      'FROM pgrst_source AS "pgrst_src") AS location FROM pgrst_source',
    param: (body) => `[${body}]`,
    readOnly: false,
    answer: (row) => {
      const [[workspaceId, id]] = JSON.parse(row.location as string) as [[string, string]];
      return {
        status: 201,
        headers: { Location: `/personal_transactions?workspace_id=eq.${workspaceId}&id=eq.${id}` },
        body: '',
      };
    },
  },
};

// And the transaction around it, as gateway/engine/execute.ts pipelines it: one round trip.
const SETUP =
  "SELECT pg_catalog.set_config('role', $1::text, true), pg_catalog.set_config('request.jwt.claims', $2::text, true), " +
  "pg_catalog.set_config('statement_timeout', $3::text, true), pg_catalog.set_config('work_mem', $4::text, true)";
const PRE_REQUEST = 'SELECT "tally"."check_request"()';

const url = process.env.DATABASE_URL;
if (!url) throw new Error('DATABASE_URL is required');
const sql = postgres(url, {
  max: 10,
  idle_timeout: 60,
  onnotice: () => {},
  connection: { application_name: 'tally-baseline' },
});

// The floor gets the driver's V8 fix as Tally's pool does (gateway/engine/driver-classes.ts):
// without it, the floor's postgres.js never finishes optimising either, and Tally would be
// measured against a floor slowed by a flaw Tally avoids.
await keepDriverClassesFast(sql);

const secret = process.env.TALLY_JWT_SECRET;
if (!secret) throw new Error('TALLY_JWT_SECRET is required');

/** The verified claims of `Authorization: Bearer <HS256 JWT>` (signature, algorithm, expiry). */
function claimsOf(authorization: string | undefined): Record<string, unknown> {
  const [head = '', body = '', sig = ''] = (authorization?.split(' ')[1] ?? '').split('.');
  const expected = createHmac('sha256', secret!).update(`${head}.${body}`).digest();
  const given = Buffer.from(sig, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new Error('invalid JWT');
  if (JSON.parse(Buffer.from(head, 'base64url').toString('utf8')).alg !== 'HS256') throw new Error('invalid JWT');
  const claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Record<string, unknown>;
  if (typeof claims.exp === 'number' && claims.exp * 1000 < Date.now()) throw new Error('expired JWT');
  return claims;
}

/** The request's body as text (the write's JSON object, handed to Postgres unparsed). */
async function bodyOf(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

const server = createServer((req, res) => {
  void (async () => {
    const route = ROUTES[`${req.method} ${req.url}`];
    if (!route) {
      res.writeHead(404, { 'Content-Type': 'application/json' });
      return void res.end('{"message":"no such route"}');
    }
    let claims: Record<string, unknown>;
    try {
      claims = claimsOf(req.headers.authorization);
    } catch {
      res.writeHead(401, { 'Content-Type': 'application/json' });
      return void res.end('{"message":"invalid JWT"}');
    }
    const param = route.param(route.readOnly ? '' : await bodyOf(req));
    const conn = await sql.reserve();
    try {
      const text = (v: string) => conn.typed(v, 25) as never;
      const settled = await Promise.allSettled([
        conn.unsafe(
          route.readOnly ? 'BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY' : 'BEGIN ISOLATION LEVEL READ COMMITTED',
        ),
        conn.unsafe(SETUP, [text(String(claims.role)), text(JSON.stringify(claims)), text('10000'), text('4MB')], {
          prepare: true,
        }),
        conn.unsafe(PRE_REQUEST, [], { prepare: true }),
        conn.unsafe(route.statement, [text(param)], { prepare: true }),
        conn.unsafe('COMMIT'),
      ]);
      const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
      if (failed) throw failed.reason;
      const row = oneRow((settled[3] as PromiseFulfilledResult<Record<string, unknown>[]>).value, 'the statement');
      const answer = route.answer(row);
      res.writeHead(answer.status, answer.headers);
      res.end(answer.body);
    } catch (err) {
      res.writeHead(500, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ message: err instanceof Error ? err.message : String(err) }));
    } finally {
      conn.release();
    }
  })();
});

server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`baseline listening on ${typeof address === 'object' && address ? address.port : '?'}\n`);
});

const stop = (): void => {
  server.close();
  void sql.end({ timeout: 2 }).then(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
