// The benchmark's floor: a minimal node:http server that verifies the HS256 JWT and runs the
// very SQL transaction Tally runs for case (a) through postgres.js, with the same pool size,
// and returns the body Postgres serialised. No routing framework, no parsing of PostgREST's
// grammar, no apikey, no rate limit: what any Node gateway in front of this database pays at
// least. Run as its own process: DATABASE_URL (logging in as `authenticator`, as Tally's server
// does), PORT and TALLY_JWT_SECRET.

import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import postgres from 'postgres';
import { oneRow } from '../gateway/engine/invariant.js';

// The statement Tally's gateway generates for
//   GET /rest/v1/personal_transactions?select=*&order=occurred_at.desc&limit=20
// captured from gateway/engine/query/read.ts's readStatement (parameter $1 = '20', sent as text):
const QUERY =
  'WITH pgrst_rows AS (SELECT "pgrst_0".* FROM "public"."personal_transactions" AS "pgrst_0" ORDER BY "pgrst_0"."occurred_at" DESC LIMIT $1::text::int8) ' +
  'SELECT NULL::text AS total_result_set, pg_catalog.count("_postgrest_t")::int AS page_total, ' +
  'coalesce(pg_catalog.json_agg("_postgrest_t"), \'[]\')::text AS body FROM pgrst_rows AS "_postgrest_t"';
// And the transaction around it, as gateway/engine/execute.ts pipelines it: one round trip.
const SETUP =
  "SELECT pg_catalog.set_config('role', $1, true), pg_catalog.set_config('request.jwt.claims', $2, true), pg_catalog.set_config('statement_timeout', $3, true)";
const PRE_REQUEST = 'SELECT "tally"."check_request"()';

const url = process.env.DATABASE_URL;
if (!url) throw new Error('DATABASE_URL is required');
const sql = postgres(url, {
  max: 10,
  idle_timeout: 60,
  onnotice: () => {},
  connection: { application_name: 'tally-baseline' },
});

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

const server = createServer((req, res) => {
  void (async () => {
    let claims: Record<string, unknown>;
    try {
      claims = claimsOf(req.headers.authorization);
    } catch {
      res.writeHead(401, { 'Content-Type': 'application/json' });
      return void res.end('{"message":"invalid JWT"}');
    }
    const conn = await sql.reserve();
    try {
      const text = (v: string) => conn.typed(v, 25) as never;
      const settled = await Promise.allSettled([
        conn.unsafe('BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY'),
        conn.unsafe(SETUP, [text(String(claims.role)), text(JSON.stringify(claims)), text('10000')], { prepare: true }),
        conn.unsafe(PRE_REQUEST, [], { prepare: true }),
        conn.unsafe(QUERY, [text('20')], { prepare: true }),
        conn.unsafe('COMMIT'),
      ]);
      const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
      if (failed) throw failed.reason;
      const row = oneRow((settled[3] as PromiseFulfilledResult<Record<string, unknown>[]>).value, 'the read');
      res.writeHead(200, { 'Content-Type': 'application/json; charset=utf-8' });
      res.end(row.body as string);
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
