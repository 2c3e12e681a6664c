import request from 'supertest';
import { CONSTRAINT_MESSAGES, DECIMALS, financeFields, type JsonSchema } from '../gateway/fields.js';
import type { Lookups } from '../gateway/lookups.js';
import { createAjv } from '../gateway/wrapper/validate.js';
import { asRole } from './harness/db.js';
import { TENANT_TABLES } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown, type FinanceSuite } from './harness/suite.js';

// One rule per finance field, held twice: as JSON Schema in gateway/fields.ts (what /api/v1 and
// MCP check first) and as a constraint in the database (all that /rest/v1 has). This file holds
// the two together: every bound or pattern of fields.ts has its constraint in pg_constraint and
// every constraint its rule in fields.ts; the same value gets the same verdict from both; and
// the three surfaces answer the same input alike.

let s: FinanceSuite;
let fields: ReturnType<typeof financeFields>;

/** The field group of fields.ts for each finance table, with a row the database accepts. */
const TABLES = {
  personal_transactions: {
    group: 'expense',
    valid: { name: 'Lunch', amount: 10, category_id: 'food-drinks', method_id: 'cash' },
  },
  fund_transactions: {
    group: 'fundTransaction',
    valid: { name: 'Deposit', amount: 10, category_id: 'fund-income', method_id: 'cash' },
  },
  // A complete contribution schedule, so that each of its three fields can be probed alone.
  funds: {
    group: 'fund',
    valid: { name: 'Trip', contribution_amount: 10, contribution_frequency: 'monthly', contribution_due_day: 5 },
  },
  contacts: { group: 'contact', valid: { name: 'Ann' } },
} as const;
type Table = keyof typeof TABLES;

/** Strings every pattern of fields.ts is tried with. */
const PATTERN_PROBES = [
  'ann@example.com',
  'zoë@example.com',
  'ann@localhost',
  'ann@mail.example.co.uk',
  'ann smith@example.com',
  'ann@exa mple.com',
  '@example.com',
  'ann@',
  'ann@example.',
  'ann@.com',
  'ann@@example.com',
  'not-an-email',
  '+44 20 7946 0958',
  '(555) 123-4567',
  '12',
  'call me',
  'EUR',
  'eur',
  'EURO',
  '',
];

/** Values at each edge of a field's JSON Schema: inside, on and past every bound it states. */
function probes(schema: JsonSchema): unknown[] {
  const out: unknown[] = [];
  const n = (k: string) => schema[k] as number | undefined;
  if (Array.isArray(schema.enum)) out.push(...(schema.enum as unknown[]), 'Nope');
  if (n('maxLength') !== undefined)
    out.push('x'.repeat(n('maxLength')!), 'ë'.repeat(n('maxLength')!), 'x'.repeat(n('maxLength')! + 1));
  if (n('minLength') !== undefined) out.push('x'.repeat(n('minLength')!), 'x'.repeat(Math.max(0, n('minLength')! - 1)));
  if (schema.pattern !== undefined) out.push(...PATTERN_PROBES);
  for (const k of ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum']) {
    const v = n(k);
    if (v !== undefined) out.push(v, v + 1, v - 1);
  }
  if (n(DECIMALS) !== undefined) out.push(1 + 10 ** -n(DECIMALS)!, 1 + 10 ** -(n(DECIMALS)! + 1), 19.99, 0.3);
  if (schema.not !== undefined) out.push((schema.not as { const?: unknown }).const);
  if (schema.format === 'date-time') out.push('2026-03-14T18:30:00Z', 'infinity');
  if (schema.format === 'date') out.push('2026-03-14', 'infinity');
  return out.filter((v) => v !== undefined);
}

/**
 * Whether the database takes the row with `field` set to `value` (as api_write, rolled back).
 * Values reach Postgres as JSON, converted by Postgres itself (json_populate_record), so that
 * the driver does not judge them first (it cannot send 'infinity' as a timestamp).
 */
async function databaseTakes(table: Table, field: string, value: unknown): Promise<boolean> {
  const row: Record<string, unknown> = { ...TABLES[table].valid, [field]: value };
  if (table === 'fund_transactions') row.fund_id = s.a.fundId;
  const columns = Object.keys(row);
  const relation = `public.${table}`;
  try {
    await asRole(
      s.db.admin,
      'api_write',
      { workspace_id: s.a.id },
      (tx) =>
        tx`INSERT INTO ${tx(relation)} (${tx(columns)})
           SELECT ${tx(columns)} FROM json_populate_record(NULL::${tx(relation)}, ${JSON.stringify(row)}::text::json)`,
    );
    return true;
  } catch (err) {
    const code = (err as { code?: string }).code ?? '';
    if (/^2[23]/.test(code)) return false; // a constraint, or a value of the wrong type or range
    throw err;
  }
}

/** The CHECK constraints of a table: name, the columns it reads, and its definition. */
async function checks(table: Table): Promise<{ name: string; columns: string[]; definition: string }[]> {
  return s.db.admin<{ name: string; columns: string[]; definition: string }[]>`
    SELECT c.conname AS name, pg_get_constraintdef(c.oid) AS definition,
           array(SELECT a.attname FROM pg_attribute a
                 WHERE a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey) ORDER BY a.attnum)::text[] AS columns
    FROM pg_constraint c
    WHERE c.conrelid = ${`public.${table}`}::regclass AND c.contype = 'c'
    ORDER BY c.conname`;
}

const BOUNDS = [
  'maxLength',
  'minLength',
  'pattern',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  DECIMALS,
  'not',
];
const FIXED_ENUMS = (schema: JsonSchema) =>
  Array.isArray(schema.enum) && !String(schema.description).includes('live list');

beforeAll(async () => {
  s = await setUpFinance(restEnv());
  const lookups: Lookups = {
    expenseCategories: (await s.db.admin`SELECT id FROM public.categories WHERE for_expenses ORDER BY id`).map(
      (r) => r.id as string,
    ),
    fundCategories: (await s.db.admin`SELECT id FROM public.categories WHERE for_funds ORDER BY id`).map(
      (r) => r.id as string,
    ),
    paymentMethods: (await s.db.admin`SELECT id FROM public.payment_methods ORDER BY id`).map((r) => r.id as string),
    fundKinds: (await s.db.admin`SELECT id FROM public.fund_kinds ORDER BY id`).map((r) => r.id as string),
  };
  fields = financeFields(lookups);
});
afterAll(() => tearDown(s.db, s.t));

it('holds every tenant table a client writes whose columns have a CHECK: a new one fails here until it has its rules', async () => {
  const constrained = await s.db.admin<{ table: string }[]>`
    SELECT DISTINCT c.conrelid::regclass::text AS table FROM pg_constraint c
     WHERE c.conrelid = ANY (${TENANT_TABLES.map((t) => `public.${t}`)}::regclass[])
       AND has_table_privilege('api_write', c.conrelid, 'INSERT, UPDATE') AND c.contype = 'c'
     ORDER BY 1`;
  expect(constrained.map((r) => r.table)).toEqual(Object.keys(TABLES).sort());
});

describe.each(Object.keys(TABLES) as Table[])('the field rules of %s and its constraints', (table) => {
  const rules = () => fields[TABLES[table].group] as Record<string, JsonSchema>;

  it('are the same rules: a bound of fields.ts has a constraint on its column, a constraint a rule of fields.ts', async () => {
    const constraints = await checks(table);
    const constrained = new Set(constraints.flatMap((c) => c.columns));
    const bounded = Object.entries(rules())
      .filter(([, schema]) => BOUNDS.some((k) => k in schema) || FIXED_ENUMS(schema))
      .map(([field]) => field);
    expect(bounded.filter((f) => !constrained.has(f))).toEqual([]);
    // A constraint on one column checks a field fields.ts has a rule for (rules on several
    // columns, such as a schedule given whole, are the database's alone, with a sentence).
    const unruled = constraints.filter((c) => c.columns.length === 1 && !bounded.includes(c.columns[0]!));
    expect(unruled.filter((c) => !/isfinite/.test(c.definition)).map((c) => c.name)).toEqual([]);
    for (const c of constraints) expect(CONSTRAINT_MESSAGES[c.name]).toBeDefined();
    // A pattern is the very same regular expression in both.
    for (const [field, schema] of Object.entries(rules())) {
      if (schema.pattern === undefined) continue;
      const defs = constraints.filter((c) => c.columns.includes(field)).map((c) => c.definition);
      expect(defs.some((d) => d.includes(`${field} ~ '${String(schema.pattern)}'`))).toBe(true);
    }
  });

  it('give every value at their edges the same verdict', async () => {
    const ajv = createAjv();
    const disagreements: string[] = [];
    for (const [field, schema] of Object.entries(rules())) {
      const validate = ajv.compile({ type: 'object', properties: { [field]: schema } });
      for (const value of probes(schema)) {
        const ruled = validate({ [field]: value });
        const stored = await databaseTakes(table, field, value);
        if (ruled !== stored)
          disagreements.push(
            `${field}=${JSON.stringify(value)}: fields.ts ${ruled ? 'accepts' : 'refuses'}, the database ${stored ? 'accepts' : 'refuses'}`,
          );
      }
    }
    expect(disagreements).toEqual([]);
  });
});

describe('the three surfaces answer the same value alike', () => {
  const rest = (table: string, body: object) =>
    request(s.t.app)
      .post(`/rest/v1/${table}`)
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${s.jwtA}`, Prefer: 'return=representation' })
      .send(body);
  const wrapper = (table: string, body: object) =>
    request(s.t.app).post(`/api/v1/${table}`).set('Authorization', `Bearer ${s.jwtA}`).send(body);
  const mcp = async (tool: string, args: object) => {
    const res = await request(s.t.app)
      .post(`/mcp?token=${s.tokenA}`)
      .set({ Accept: 'application/json, text/event-stream', 'Content-Type': 'application/json' })
      .send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: tool, arguments: args } });
    return res.body as { result?: { isError?: boolean; content: { text: string }[] }; error?: unknown };
  };

  /** Whether each surface created the record: [/rest/v1, /api/v1, MCP]. */
  async function verdicts(table: string, tool: string, body: Record<string, unknown>): Promise<boolean[]> {
    const r = await rest(table, body);
    const w = await wrapper(table, body);
    const m = await mcp(tool, body);
    return [r.status === 201, w.status === 201, m.result !== undefined && m.result.isError !== true];
  }

  it.each([
    ['ann@example.com', true],
    ['zoë@example.com', true],
    ['ann@localhost', false],
    ['ann smith@example.com', false],
  ])('a contact with email %s: created %s on every surface', async (email, created) => {
    expect(await verdicts('contacts', 'create_contact', { name: 'Ann', email })).toEqual([created, created, created]);
  });

  it.each([
    [999_999_999_999, true],
    [1e12, false],
    [-1, false],
  ])('a fund with target_amount %d: created %s on every surface', async (target_amount, created) => {
    expect(await verdicts('funds', 'create_fund', { name: 'Trip', target_amount })).toEqual([
      created,
      created,
      created,
    ]);
  });
});
