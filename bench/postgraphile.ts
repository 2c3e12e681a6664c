// The benchmark's second reference: PostGraphile 5 with its Amber preset on the same database,
// with the same JWT → role and claims as Tally (verified HS256 JWT; `role` claim as the role,
// all claims as request.jwt.claims), logging in as `authenticator`, pool of 10. It has no
// pre-request function. Run as its own process: DATABASE_URL (authenticator's login), PORT,
// TALLY_JWT_SECRET. PostGraphile is no dependency of the project (it wants Node 22, and only
// the benchmark uses it): run.ts installs it into a folder of its own and runs this file from
// there, so its imports name packages TypeScript does not see, typed here by what is used.

// Node 20 has no Promise.withResolvers, which PostGraphile 5 uses: the standard shim.
const P = Promise as unknown as {
  withResolvers?: <T>() => { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void };
};
P.withResolvers ??= <T>() => {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
};

const { createServer } = await import('node:http');
type Server = ReturnType<typeof createServer>;
const { createHmac, timingSafeEqual } = await import('node:crypto');
const pg = (await import('pg')).default;
/** A package of the benchmark's own folder, by a name TypeScript does not resolve. */
const load = <T>(name: string): Promise<T> => import(name) as Promise<T>;
const { postgraphile } = await load<{
  postgraphile(preset: unknown): {
    createServ(grafserv: unknown): { addTo(server: Server): Promise<void> };
    release(): unknown;
  };
}>('postgraphile');
const { PostGraphileAmberPreset } = await load<{ PostGraphileAmberPreset: unknown }>('postgraphile/presets/amber');
const { makePgService } = await load<{ makePgService(options: unknown): unknown }>('postgraphile/adaptors/pg');
const { grafserv } = await load<{ grafserv: unknown }>('postgraphile/grafserv/node');

const url = process.env.DATABASE_URL;
const secret = process.env.TALLY_JWT_SECRET;
if (!url || !secret) throw new Error('DATABASE_URL and TALLY_JWT_SECRET are required');

/** HS256 JWT verification (signature and expiry), synchronous as pgSettings must be. */
function verify(token: string): Record<string, unknown> {
  const [head = '', body = '', sig = ''] = token.split('.');
  const expected = createHmac('sha256', secret!).update(`${head}.${body}`).digest();
  const given = Buffer.from(sig, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new Error('invalid JWT signature');
  if (JSON.parse(Buffer.from(head, 'base64url').toString('utf8')).alg !== 'HS256')
    throw new Error('unexpected JWT algorithm');
  const claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Record<string, unknown>;
  if (typeof claims.exp === 'number' && claims.exp * 1000 < Date.now()) throw new Error('JWT expired');
  return claims;
}

const pool = new pg.Pool({ connectionString: url, max: 10 });

const preset = {
  extends: [PostGraphileAmberPreset],
  pgServices: [
    makePgService({
      pool,
      schemas: ['public'],
      pgSettings: (requestContext: unknown): Record<string, string> => {
        const ctx = requestContext as { node?: { req?: { headers: Record<string, string | undefined> } } };
        const header = ctx.node?.req?.headers.authorization ?? '';
        const token = /^Bearer (.+)$/.exec(header)?.[1];
        if (!token) return { role: 'anon' };
        const claims = verify(token);
        return { role: String(claims.role), 'request.jwt.claims': JSON.stringify(claims) };
      },
    }),
  ],
  grafserv: { graphqlPath: '/graphql', graphiql: false },
};

const pgl = postgraphile(preset as never);
const serv = pgl.createServ(grafserv);
const server = createServer();
serv.addTo(server).catch((err: unknown) => {
  process.stderr.write(`postgraphile failed: ${String(err)}\n`);
  process.exit(1);
});
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1');

const stop = (): void => {
  server.close();
  void Promise.resolve(pgl.release())
    .then(() => pool.end())
    .then(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
