import fc from 'fast-check';
import request from 'supertest';
import type { GatewayCall, GatewayMethod, AuthContext } from '../gateway/engine/call.js';
import { GATEWAY_OPTIONS } from '../gateway/deployment.js';
import { ApiError } from '../gateway/errors.js';
import { createGateway } from '../gateway/engine/run.js';
import { OPERATOR_NAMES } from '../gateway/engine/operators.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { accessToken, startTestApp, type TestApp } from './harness/app.js';
import { tokenFor, workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { first, present } from './harness/present.js';

// Seeded property-based fuzzing of the gateway with PostgREST-shaped (and mis-shaped) query
// strings, headers and write bodies, as workspace A. Properties: never a 5xx (a 500 is a bug),
// never a row of workspace B in a response, never a change to workspace B's rows.

// Run counts and the per-test timeout are sized so the file passes on a loaded 2-core machine
// (two busy loops beside the suite): each property takes well under a minute when idle.
const SEED = 20240601;
const READ_RUNS = 2500;
const WRITE_RUNS = 1500;
const HTTP_RUNS = 600;
const TIMEOUT_MS = 300_000;

describe('fuzzing the gateway', () => {
  let db: TestDatabase;
  let t: TestApp;
  let call: GatewayCall;
  let a: WorkspaceFixture;
  let b: WorkspaceFixture;
  let auth: AuthContext;
  let jwtA: string;
  let snapshotB: () => Promise<string>;

  beforeAll(async () => {
    db = await createTestDatabase();
    a = await workspaceWithData(db.admin, 'alpha');
    b = await workspaceWithData(db.admin, 'beta');
    const tok = await tokenFor(db.admin, a.id, 'write');
    const claims = {
      role: 'api_write',
      workspace_id: a.id,
      scope: 'write' as const,
      sub: tok.id,
      exp: Math.floor(Date.now() / 1000) + 3600,
    };
    jwtA = await accessToken(claims);
    auth = { role: 'api_write', claims };
    t = startTestApp(db.url, restEnv());
    call = createGateway(t.ctx, GATEWAY_OPTIONS);
    snapshotB = async () =>
      JSON.stringify(
        await db.admin.unsafe(`
      SELECT 'pt' AS t, row_to_json(x)::text AS r FROM public.personal_transactions x WHERE workspace_id = '${b.id}'
      UNION ALL SELECT 'f', row_to_json(x)::text FROM public.funds x WHERE workspace_id = '${b.id}'
      UNION ALL SELECT 'ft', row_to_json(x)::text FROM public.fund_transactions x WHERE workspace_id = '${b.id}'
      UNION ALL SELECT 'c', row_to_json(x)::text FROM public.contacts x WHERE workspace_id = '${b.id}'
      UNION ALL SELECT 'fp', row_to_json(x)::text FROM public.fund_participants x WHERE workspace_id = '${b.id}'
      ORDER BY 1, 2`),
      );
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  const tables = [
    'personal_transactions',
    'funds',
    'fund_transactions',
    'contacts',
    'fund_participants',
    'categories',
    'payment_methods',
    'workspaces',
    'api_tokens',
    'nope',
  ];
  const columns = [
    'id',
    'name',
    'amount',
    'note',
    'workspace_id',
    'fund_id',
    'contact_id',
    'category_id',
    'method_id',
    'occurred_at',
    'target_amount',
    'status',
    'balance',
    'description',
    'phone',
    'for_expenses',
    'nope',
    '"we""ird"',
    'name->a',
    'description->>b',
  ];
  const embeds = [
    'funds',
    'fund_transactions',
    'contacts',
    'fund_participants',
    'categories',
    'payment_methods',
    'workspaces',
    'personal_transactions',
    'nope',
  ];
  // Every operator of the grammar, then modifiers and operators that do not exist.
  const ops = [...OPERATOR_NAMES, 'eq(any)', 'like(all)', 'fts(english)', 'fts(nope)', 'zz'];
  const value = () =>
    fc.oneof(
      fc.constantFrom(
        '',
        'null',
        'not_null',
        'true',
        '1',
        '-1',
        '1e400',
        '3.5',
        '2024-01-01',
        '{a,b}',
        '{1,2}',
        '(1,2)',
        '("a,b",c)',
        '[1,2)',
        '"',
        '\\',
        '*',
        '%',
        '*a*',
        "'; drop table funds;--",
        '→💥',
        'food-drinks',
        'Travel',
        '[',
        ')',
      ),
      fc.constant(() => b.id).map((f) => f()),
      fc.constant(() => b.fundId).map((f) => f()),
      fc.constant(() => a.fundId).map((f) => f()),
      fc.string({ maxLength: 12 }),
    );
  const validColumns: Record<string, string[]> = {
    personal_transactions: ['id', 'name', 'amount', 'note', 'category_id', 'method_id', 'occurred_at', 'workspace_id'],
    funds: ['id', 'name', 'status', 'target_amount', 'description', 'balance', 'workspace_id', 'kind'],
    fund_transactions: ['id', 'name', 'amount', 'fund_id', 'category_id', 'workspace_id'],
    contacts: ['id', 'name', 'phone', 'nickname', 'workspace_id'],
    fund_participants: ['fund_id', 'contact_id', 'workspace_id'],
    categories: ['id', 'name', 'for_expenses'],
    payment_methods: ['id', 'name'],
    workspaces: ['id', 'name'],
    api_tokens: ['id'],
    nope: ['id'],
  };
  let current = 'funds';
  const columnsNow = (): string[] => present(validColumns[current], `the columns of ${current}`);
  const col = () =>
    fc.oneof(
      {
        weight: 5,
        arbitrary: fc.nat(20).map((i) => {
          const columns = columnsNow();
          return present(columns[i % columns.length]);
        }),
      },
      { weight: 1, arbitrary: fc.constantFrom(...columns) },
    );
  const goodValue = () =>
    fc.oneof(
      {
        weight: 3,
        arbitrary: fc.constantFrom(
          '1',
          '3.5',
          '100',
          'alpha fund',
          'food-drinks',
          'cash',
          'Upcoming',
          '2024-01-01',
          'true',
        ),
      },
      { weight: 1, arbitrary: fc.constant(() => a.fundId).map((f) => f()) },
      { weight: 1, arbitrary: fc.constant(() => b.id).map((f) => f()) },
      { weight: 2, arbitrary: value() },
    );
  const filter = () =>
    fc
      .tuple(
        col(),
        fc.boolean(),
        fc.oneof(
          { weight: 3, arbitrary: fc.constantFrom('eq', 'neq', 'gt', 'lt', 'in', 'is', 'like', 'ilike') },
          { weight: 1, arbitrary: fc.constantFrom(...ops) },
        ),
        goodValue(),
      )
      .map(
        ([c, not, op, v]) =>
          `${c}=${not ? 'not.' : ''}${op}.${op === 'in' ? `(${v},x)` : op === 'is' ? (v.length % 2 ? 'null' : 'not_null') : v}`,
      );
  const logic: fc.Arbitrary<string> = fc.letrec<{ node: string }>((tie) => ({
    node: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      fc
        .tuple(col(), fc.constantFrom('eq', 'neq', 'gt', 'lt', 'like', ...ops), goodValue())
        .map(([c, op, v]) => `${c}.${op}.${v.replace(/[,()]/g, '')}`),
      fc
        .tuple(fc.constantFrom('and', 'or', 'not.and', 'not.or'), fc.array(tie('node'), { minLength: 1, maxLength: 3 }))
        .map(([o, xs]) => `${o}(${xs.join(',')})`),
    ),
  })).node;
  const selectItem: fc.Arbitrary<string> = fc.letrec<{ item: string }>((tie) => ({
    item: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      { weight: 6, arbitrary: col() },
      { weight: 1, arbitrary: fc.constantFrom('*', 'x:name', 'amount::text', 'id::nope', 'balance', 'name->>a') },
      fc
        .tuple(
          fc.constantFrom(...embeds),
          fc.constantFrom('', '!inner', '!left', '!fund_transactions_fund_id_fkey', '!nope'),
          fc.array(tie('item'), { maxLength: 3 }),
        )
        .map(([e, h, xs]) => `${e}${h}(${xs.join(',')})`),
      { weight: 1, arbitrary: fc.constantFrom('(', ')', ',', 'a!(', '...funds(*)') },
    ),
  })).item;
  const query = () =>
    fc
      .tuple(
        fc.option(fc.array(selectItem, { minLength: 1, maxLength: 3 }).map((xs) => `select=${xs.join(',')}`)),
        fc.array(filter(), { maxLength: 2 }),
        fc.option(
          fc
            .tuple(fc.constantFrom('or', 'and', 'not.or'), fc.array(logic, { minLength: 1, maxLength: 3 }))
            .map(([o, xs]) => `${o}=(${xs.join(',')})`),
          { freq: 3 },
        ),
        fc.option(
          fc
            .tuple(
              col(),
              fc.constantFrom('', '.asc', '.desc', '.nullsfirst', '.desc.nullslast', '.asc.nullslast', '.x'),
            )
            .map(([c, d]) => `order=${c}${d}`),
        ),
        fc.option(
          fc.constantFrom(
            'limit=0',
            'limit=2',
            'offset=1',
            'limit=2&offset=1',
            'limit=-1',
            'offset=99',
            'fund_transactions.limit=1',
            'funds.order=name.desc',
            'fund_transactions.amount=gt.0',
          ),
        ),
      )
      .map((parts) =>
        parts
          .flat()
          .filter((p): p is string => typeof p === 'string')
          .join('&'),
      );
  /** Well-formed queries (valid names, operators and values) so that most runs reach Postgres. */
  const wellFormed = () =>
    fc
      .tuple(
        fc.subarray(columnsNow(), { minLength: 1 }).map((cs) => cs.join(',')),
        fc.option(
          fc.constantFrom(
            ...((
              {
                funds: ['fund_transactions(*)', 'contacts(name)', 'fund_transactions!inner(amount)'],
                fund_transactions: ['funds(name,balance)'],
                personal_transactions: ['categories(name)', 'payment_methods(*)'],
                fund_participants: ['funds(*),contacts(*)'],
                contacts: ['funds(name)'],
              } as Record<string, string[]>
            )[current] ?? ['*']),
          ),
          { nil: undefined },
        ),
        fc
          .array(
            fc.tuple(
              fc.constantFrom(...columnsNow()),
              fc.constantFrom('eq', 'neq', 'not.eq', 'is', 'in', 'gt', 'like'),
              fc.constantFrom('1', 'cash', 'alpha fund', '*a*', '2024-01-01'),
            ),
            { maxLength: 2 },
          )
          .map((fs) =>
            fs.map(([c, op, v]) =>
              ['id', 'workspace_id', 'fund_id', 'contact_id'].includes(c)
                ? `${c}=${op === 'is' ? 'is.null' : `eq.${a.fundId}`}`
                : ['amount', 'target_amount', 'balance'].includes(c)
                  ? `${c}=${op === 'like' ? 'gt' : op === 'is' ? 'not.is' : op === 'in' ? 'in' : op}.${op === 'is' ? 'null' : op === 'in' ? '(1,100)' : '10'}`
                  : `${c}=${op === 'is' ? 'is.null' : op === 'in' ? `in.(${v},x)` : `${op}.${v}`}`,
            ),
          ),
        fc.option(
          fc
            .tuple(fc.constantFrom(...columnsNow()), fc.constantFrom('asc', 'desc.nullslast'))
            .map(([c, d]) => `order=${c}.${d}`),
          { nil: undefined },
        ),
        fc.option(fc.constantFrom('limit=1', 'limit=5&offset=1', 'offset=0'), { nil: undefined }),
      )
      .map(([sel, emb, fs, ord, lim]) =>
        [`select=${sel}${emb ? ',' + emb : ''}`, ...fs, ord, lim].filter((x) => x !== undefined).join('&'),
      );
  const headers = () =>
    fc.record({
      prefer: fc.option(
        fc.constantFrom(
          'count=exact',
          'count=planned',
          'count=estimated',
          'return=representation',
          'return=minimal',
          'handling=strict, max-affected=1',
          'tx=rollback',
          'resolution=merge-duplicates',
          'missing=default',
          'handling=strict, nope',
          'count=exact, tx=rollback, return=representation',
        ),
        { nil: undefined },
      ),
      accept: fc.option(
        fc.constantFrom(
          'application/json',
          'application/vnd.pgrst.object+json',
          'text/csv',
          '*/*',
          'application/xml',
          'text/*;q=0.5',
        ),
        { nil: undefined },
      ),
      range: fc.option(fc.constantFrom('0-1', '1-', '5-2', 'items=0-0', 'x'), { nil: undefined }),
    });

  /** Runs one request; returns the body text of a success, fails the property on a 5xx or a non-ApiError. */
  const stats = { ok: 0, client: 0, codes: {} as Record<string, number> };
  async function run(
    method: GatewayMethod,
    relation: string,
    qs: string,
    h: Record<string, string | undefined>,
    body?: unknown,
  ): Promise<string> {
    try {
      const res = await call({ method, relation, query: new URLSearchParams(qs), headers: h, body }, auth);
      expect(res.status).toBeLessThan(500);
      stats.ok++;
      return res.body ?? '';
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      if (err.status >= 500)
        throw new Error(
          `${method} /${relation}?${qs} ${JSON.stringify(h)} → ${err.status} ${err.code} ${err.message}`,
          { cause: err },
        );
      stats.client++;
      stats.codes[err.code] = (stats.codes[err.code] ?? 0) + 1;
      if (process.env.FUZZ_DEBUG && err.code === process.env.FUZZ_DEBUG && (stats.codes[err.code] ?? 0) < 15)
        console.log(qs, err.message);
      return '';
    }
  }

  it(
    `reads: ${READ_RUNS} generated queries, no 5xx, no row of another workspace`,
    async () => {
      const tableAndQuery = fc.constantFrom(...tables).chain((x) => {
        current = x;
        return fc.oneof(query(), wellFormed(), wellFormed()).map((q) => [x, q] as const);
      });
      const friendly = fc.record({
        prefer: fc.constantFrom(undefined, 'count=exact', 'count=planned'),
        accept: fc.constantFrom(undefined, 'text/csv', 'application/json'),
      });
      await fc.assert(
        fc.asyncProperty(tableAndQuery, fc.oneof(headers(), friendly, friendly), async ([tbl, qs], h) => {
          const text = await run(qs.length % 10 === 0 ? 'HEAD' : 'GET', tbl, qs, h);
          expect(text).not.toContain(b.id);
          expect(text).not.toContain('beta');
        }),
        { numRuns: READ_RUNS, seed: SEED, endOnFailure: true },
      );
      // The fuzz must reach the database, not only the parser: a good share of queries succeed.
      if (process.env.FUZZ_DEBUG)
        console.log(`fuzz reads: ${stats.ok} answered, ${stats.client} refused with 4xx`, JSON.stringify(stats.codes));
      expect(stats.ok).toBeGreaterThan(READ_RUNS * 0.25);
    },
    TIMEOUT_MS,
  );

  it(
    `writes: ${WRITE_RUNS} generated bodies and filters, no 5xx, workspace B untouched`,
    async () => {
      const before = await snapshotB();
      const bodyValue = fc.oneof(
        value(),
        fc.integer(),
        fc.double({ noNaN: true }),
        fc.constant(null),
        fc.boolean(),
        fc.constant({ a: 1 }),
        fc.constant([1]),
      );
      const body = fc.oneof(
        fc.dictionary(
          fc.constantFrom(
            'name',
            'amount',
            'note',
            'workspace_id',
            'id',
            'fund_id',
            'contact_id',
            'category_id',
            'method_id',
            'status',
            'phone',
            'nope',
          ),
          bodyValue,
          { maxKeys: 5 },
        ),
        fc.array(
          fc.dictionary(fc.constantFrom('name', 'amount', 'category_id', 'method_id', 'workspace_id'), bodyValue, {
            maxKeys: 4,
          }),
          { maxLength: 3 },
        ),
        fc.constantFrom('not json', 42, null, [1, 2]),
      );
      const tableAndQuery = fc.constantFrom(...tables).chain((x) => {
        current = x;
        return query().map((q) => [x, q] as const);
      });
      const anyWrite = fc.tuple(
        fc.constantFrom('POST', 'PATCH', 'DELETE', 'PUT') as fc.Arbitrary<GatewayMethod>,
        tableAndQuery,
        headers(),
        body,
      );
      // Mostly well-formed writes, so that the properties are checked on writes that reach the
      // tables (and RLS), not only on refusals: valid rows, and changes by id, some aimed at B.
      const amount = fc.integer({ min: 1, max: 100_000 }).map((c) => c / 100);
      const text = fc.string({ minLength: 1, maxLength: 40 }).filter((x) => x.trim() === x && x !== '');
      const targetId = fc
        .constantFrom(
          () => a.expenseId,
          () => a.fundId,
          () => b.fundId,
          () => a.contactId,
        )
        .map((f) => f());
      const prefer = fc.constantFrom(
        undefined,
        'return=representation',
        'return=minimal',
        'count=exact, return=representation',
      );
      const validWrite = fc
        .oneof(
          fc.tuple(
            fc.constant('POST' as GatewayMethod),
            fc.constant(['personal_transactions', ''] as const),
            prefer,
            fc.record({
              name: text,
              amount,
              category_id: fc.constantFrom('food-drinks', 'essentials', 'local-transport'),
              method_id: fc.constantFrom('cash', 'credit-card'),
              note: fc.option(text, { nil: undefined }),
            }),
          ),
          fc.tuple(
            fc.constant('POST' as GatewayMethod),
            fc.constant(['funds', ''] as const),
            prefer,
            fc.record({
              name: text,
              kind: fc.constantFrom('Travel', 'Badminton'),
              target_amount: amount,
              status: fc.constantFrom('Upcoming', 'In Progress', 'Completed'),
            }),
          ),
          fc.tuple(
            fc.constant('POST' as GatewayMethod),
            fc.constant(['contacts', ''] as const),
            prefer,
            fc.record({ name: text, phone: fc.option(text, { nil: undefined }) }),
          ),
          fc.tuple(
            fc.constant('PATCH' as GatewayMethod),
            fc
              .tuple(fc.constantFrom('personal_transactions', 'funds', 'contacts'), targetId)
              .map(([t0, id]) => [t0, `id=eq.${id}`] as const),
            prefer,
            fc.record({ name: text }),
          ),
          fc.tuple(
            fc.constant('DELETE' as GatewayMethod),
            fc
              .tuple(fc.constantFrom('personal_transactions', 'contacts'), text)
              .map(([t0, n]) => [t0, `name=eq.${encodeURIComponent(n)}`] as const),
            prefer,
            fc.constant(undefined),
          ),
        )
        .map(
          ([method, rel, p, b0]) =>
            [method, rel, { prefer: p }, b0] as [
              GatewayMethod,
              readonly [string, string],
              Record<string, string | undefined>,
              unknown,
            ],
        );
      const okBefore = stats.ok;
      await fc.assert(
        fc.asyncProperty(
          fc.oneof({ weight: 3, arbitrary: validWrite }, { weight: 1, arbitrary: anyWrite }),
          async ([method, [tbl, qs], h, b0]) => {
            const text0 = await run(
              method,
              tbl,
              qs,
              { ...h, 'content-type': 'application/json' },
              method === 'DELETE' ? undefined : b0,
            );
            expect(text0).not.toContain(b.id);
          },
        ),
        { numRuns: WRITE_RUNS, seed: SEED + 1, endOnFailure: true },
      );
      // The share of writes that succeeded: most of them, or the fuzz only exercises refusals.
      expect(stats.ok - okBefore).toBeGreaterThan(WRITE_RUNS * 0.5);
      expect(await snapshotB()).toBe(before);
      const row = first(
        await db.admin`SELECT count(*)::int AS n FROM public.personal_transactions WHERE workspace_id NOT IN (${a.id}, ${b.id})`,
      );
      expect(row.n).toBe(0);
    },
    TIMEOUT_MS,
  );

  it(
    `HTTP: ${HTTP_RUNS} generated requests through the express app, no 5xx`,
    async () => {
      const agent = request.agent(t.app);
      const tableAndQuery = fc.constantFrom(...tables).chain((x) => {
        current = x;
        return query().map((q) => [x, q] as const);
      });
      await fc.assert(
        fc.asyncProperty(tableAndQuery, headers(), async ([table, qs], h) => {
          const set: Record<string, string> = { apikey: TEST_API_KEY, Authorization: `Bearer ${jwtA}` };
          for (const [k, v] of Object.entries(h)) if (v !== undefined) set[k] = v;
          const res = await agent.get(`/rest/v1/${table}?${encodeURI(qs).replace(/#/g, '%23')}`).set(set);
          expect(res.status).toBeLessThan(500);
          if (res.status < 300) expect(res.text).not.toContain(b.id);
        }),
        { numRuns: HTTP_RUNS, seed: SEED + 2, endOnFailure: true },
      );
    },
    TIMEOUT_MS,
  );
});
