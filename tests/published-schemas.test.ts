import { Validator } from '@cfworker/json-schema';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import request from 'supertest';
import { packageRoot } from '../gateway/paths.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown, type FinanceSuite } from './harness/suite.js';

// Every schema Tally publishes for what a client sends (each tool's input schema in tools/list,
// the request bodies of /api/v1's and /rest/v1's OpenAPI documents), judged by validators with
// their default settings, as a client that checks its arguments before sending them would:
// ajv (with ajv-formats: a plain Ajv refuses to compile any schema with a format), the
// independent @cfworker/json-schema (the MCP SDK's other validator), and Python's jsonschema
// where the machine has it. Each must accept every amount from 0.01 to 999.99 and give the
// examples of the README and docs/ the verdict the page shows: a multipleOf computed in floating point refused
// 26,977 of those amounts (19.99, 0.3, 42.15, 2.8 among them).

type Schema = Record<string, unknown>;
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;
/** OpenAPI 3.1's own keywords of its Schema Object, beside JSON Schema 2020-12's. */
const OPENAPI_KEYWORDS = ['example', 'discriminator', 'xml', 'externalDocs'];

let s: FinanceSuite;
/** Every published request schema, by where it is published, self-contained (its document's components as $defs). */
const schemas = new Map<string, Schema>();

/** An OpenAPI schema with the document's components inlined as $defs, so that it stands alone. */
function standalone(schema: unknown, components: Record<string, unknown>): Schema {
  const text = JSON.stringify({ ...(schema as Schema), $defs: components }).replaceAll(
    '"#/components/schemas/',
    '"#/$defs/',
  );
  return JSON.parse(text) as Schema;
}

function requestSchemas(where: string, doc: { paths: Record<string, Record<string, unknown>>; components: Schema }) {
  const components = (doc.components.schemas ?? {}) as Record<string, unknown>;
  for (const [path, operations] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(operations)) {
      const body = (op as { requestBody?: { content?: Record<string, { schema?: unknown }> } }).requestBody;
      const schema = body?.content?.['application/json']?.schema;
      if (schema) schemas.set(`${where} ${method.toUpperCase()} ${path}`, standalone(schema, components));
    }
}

beforeAll(async () => {
  s = await setUpFinance(restEnv());
  const tools = await request(s.t.app)
    .post(`/mcp?token=${s.tokenA}`)
    .set({ Accept: 'application/json, text/event-stream', 'Content-Type': 'application/json' })
    .send({ jsonrpc: '2.0', id: 1, method: 'tools/list' })
    .expect(200);
  for (const t of tools.body.result.tools as { name: string; inputSchema: Schema }[])
    schemas.set(`tool ${t.name}`, t.inputSchema);
  requestSchemas('/api/v1', (await request(s.t.app).get('/api/v1/openapi.json').expect(200)).body);
  const rest = await request(s.t.app)
    .get('/rest/v1/')
    .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${s.jwtA}`, accept: 'application/vnd.oai.openapi+json' })
    .expect(200);
  requestSchemas('/rest/v1', JSON.parse(rest.text));
});
afterAll(() => tearDown(s.db, s.t));

/** A validator: compiles every schema, then answers whether each value is valid. */
type Judge = (cases: { schema: string; value: unknown }[]) => boolean[];

const ajvJudge: Judge = (cases) => {
  const ajv = new Ajv2020();
  addFormats(ajv);
  ajv.addVocabulary(OPENAPI_KEYWORDS);
  const compiled = new Map([...schemas].map(([k, v]) => [k, ajv.compile(v)]));
  return cases.map((c) => compiled.get(c.schema)!(c.value));
};

const cfworkerJudge: Judge = (cases) => {
  const compiled = new Map([...schemas].map(([k, v]) => [k, new Validator(v as never, '2020-12', false)]));
  return cases.map((c) => compiled.get(c.schema)!.validate(c.value).valid);
};

const PYTHON = `
import json, sys
from jsonschema import Draft202012Validator
data = json.load(sys.stdin)
validators = {k: Draft202012Validator(v) for k, v in data["schemas"].items()}
json.dump([validators[c["schema"]].is_valid(c["value"]) for c in data["cases"]], sys.stdout)
`;
const hasPythonJsonschema = spawnSync('python3', ['-c', 'import jsonschema']).status === 0;
const pythonJudge: Judge = (cases) => {
  const input = JSON.stringify({ schemas: Object.fromEntries(schemas), cases });
  const run = spawnSync('python3', ['-c', PYTHON], { input, maxBuffer: 1 << 28 });
  if (run.status !== 0) throw new Error(String(run.stderr));
  return JSON.parse(String(run.stdout)) as boolean[];
};

const judges: [string, Judge][] = [
  ['ajv', ajvJudge],
  ['@cfworker/json-schema', cfworkerJudge],
  ...(hasPythonJsonschema ? [['python jsonschema', pythonJudge] as [string, Judge]] : []),
];

/** The schema of each property `amount` of a schema (at its top or in the items of an array of it). */
function amountSchemas(schema: Schema): Schema[] {
  const defs = (schema.$defs ?? {}) as Record<string, Schema>;
  const resolve = (x: Schema): Schema =>
    typeof x.$ref === 'string' ? resolve(defs[x.$ref.replace('#/$defs/', '')] ?? {}) : x;
  const found: Schema[] = [];
  const visit = (x: Schema): void => {
    const r = resolve(x);
    const props = (r.properties ?? {}) as Record<string, Schema>;
    if (props.amount) found.push(resolve(props.amount));
    if (r.items) visit(r.items as Schema);
    for (const k of ['oneOf', 'anyOf'] as const) for (const alt of (r[k] ?? []) as Schema[]) visit(alt);
    for (const p of Object.values(props)) if ((resolve(p).type as unknown) === 'array') visit(resolve(p));
  };
  visit(schema);
  return found;
}

describe.each(judges)('the published request schemas, by %s with its default settings', (_name, judge) => {
  it('compile, and accept every amount from 0.01 to 999.99', () => {
    const amounts = Array.from({ length: 99_999 }, (_, i) => Number(((i + 1) / 100).toFixed(2)));
    // Each distinct amount schema once (most places publish the same one), named by its first place.
    const distinct = new Map<string, string>();
    for (const [where, schema] of schemas)
      for (const amount of amountSchemas(schema)) {
        const text = JSON.stringify(amount);
        if (!distinct.has(text)) distinct.set(text, `${where} amount`);
      }
    const withAmount = [...distinct].map(([text, key]) => [key, JSON.parse(text) as Schema] as const);
    // The expense's and the fund transaction's at least, in the tools and both documents.
    expect(withAmount.length).toBeGreaterThanOrEqual(3);
    for (const [key, amount] of withAmount) schemas.set(key, amount);
    try {
      const cases = withAmount.flatMap(([key]) => amounts.map((value) => ({ schema: key, value })));
      const verdicts = judge(cases);
      const refused = cases.filter((_, i) => !verdicts[i]).map((c) => `${c.schema}: ${c.value}`);
      expect({ refused: refused.length, first: refused.slice(0, 5) }).toEqual({ refused: 0, first: [] });
    } finally {
      for (const [key] of withAmount) schemas.delete(key);
    }
  });

  it('give the examples of the README and docs/ the verdict the page shows', () => {
    const examples = docExamples();
    // The /api/v1 writes of the quick tour and the MCP calls at least.
    expect(examples.length).toBeGreaterThanOrEqual(10);
    expect(examples.filter((e) => !e.valid).length).toBeGreaterThanOrEqual(2);
    const verdicts = judge(examples.map((e) => ({ schema: e.schema, value: e.value })));
    const wrong = examples
      .filter((e, i) => verdicts[i] !== e.valid)
      .map((e) => `${e.where}: ${JSON.stringify(e.value)}`);
    expect(wrong).toEqual([]);
  });
});

// ---- The examples of the documentation ------------------------------------------------------

interface Example {
  where: string;
  schema: string;
  value: unknown;
  /** The page shows it accepted (no error under it). */
  valid: boolean;
}

const SOME_ID = '00000000-0000-4000-8000-000000000000';

/** The markdown files that document the surfaces. */
function docs(): [string, string][] {
  const dir = join(packageRoot, 'docs');
  const files = [
    'README.md',
    ...readdirSync(dir)
      .filter((f) => f.endsWith('.md'))
      .map((f) => join('docs', f)),
  ];
  return files.map((f) => [f, readFileSync(join(packageRoot, f), 'utf8')]);
}

/** Each shell command of the docs' sh blocks, continuation lines joined, with the comment lines under it. */
function commands(): { where: string; text: string; shown: string }[] {
  const out: { where: string; text: string; shown: string }[] = [];
  for (const [file, md] of docs()) {
    for (const block of md.matchAll(/^```sh\n([\s\S]*?)^```/gm)) {
      const start = md.slice(0, block.index).split('\n').length;
      const lines = block[1]!.split('\n');
      for (let i = 0; i < lines.length; i++) {
        if (/^\s*(#|$)/.test(lines[i]!)) continue;
        let text = lines[i]!;
        const first = i;
        // A backslash continues the command; so does an open single quote.
        while ((/\\$/.test(text) || (text.match(/'/g)?.length ?? 0) % 2 === 1) && i + 1 < lines.length)
          text = text.replace(/\\$/, '') + '\n' + lines[++i]!;
        let shown = '';
        while (i + 1 < lines.length && /^\s*#/.test(lines[i + 1]!)) shown += lines[++i]! + '\n';
        out.push({ where: `${file}:${start + first + 1}`, text, shown });
      }
    }
  }
  return out;
}

/** A shell word's value: '…' as is, "…" with its escapes, $VARIABLES as some id. */
const unquote = (word: string): string =>
  (word.startsWith("'")
    ? word.slice(1, -1)
    : word.startsWith('"')
      ? word.slice(1, -1).replace(/\\(.)/g, '$1')
      : word
  ).replace(/\$\{?[A-Z_]+\}?/g, SOME_ID);

const WORD = `'[^']*'|"(?:[^"\\\\]|\\\\.)*"|\\S+`;

function docExamples(): Example[] {
  const out: Example[] = [];
  for (const { where, text, shown } of commands()) {
    // /api/v1 and /rest/v1 writes with a JSON body.
    const route = /-X (POST|PATCH) "?(?:\$TALLY_URL)?[\w:./]*?\/(api|rest)\/v1\/([a-z_]+)(\/\$\w+)?/.exec(text);
    const body = new RegExp(`-d (${WORD})`).exec(text);
    if (route && body) {
      const path = `/${route[3]}${route[4] ? '/{id}' : ''}`;
      const key = [...schemas.keys()].find((k) => k === `/${route[2]}/v1 ${route[1]} ${path}`);
      if (key)
        out.push({ where, schema: key, value: JSON.parse(unquote(body[1]!)), valid: !/"code":"PGRST1/.test(shown) });
    }
    // MCP tool calls: the Inspector's --tool-arg k=v (a value read as JSON where it is), or a JSON-RPC tools/call.
    const tool = /--tool-name (\w+)/.exec(text);
    if (tool) {
      const args: Record<string, unknown> = {};
      for (const m of text.matchAll(new RegExp(`--tool-arg (${WORD})`, 'g'))) {
        const [k, ...v] = unquote(m[1]!).split('=');
        const raw = v.join('=');
        try {
          args[k!] = JSON.parse(raw);
        } catch {
          args[k!] = raw;
        }
      }
      out.push({ where, schema: `tool ${tool[1]}`, value: args, valid: !/"isError": true/.test(shown) });
    }
    const rpc = /"method":"tools\/call","params":(\{.*\})\}'/.exec(text);
    if (rpc) {
      const params = JSON.parse(rpc[1]!) as { name: string; arguments: unknown };
      out.push({ where, schema: `tool ${params.name}`, value: params.arguments, valid: !/"isError":true/.test(shown) });
    }
  }
  return out;
}

it("says the bound of an amount's decimals in words wherever it is published", () => {
  const amounts = [...schemas].flatMap(([where, schema]) => amountSchemas(schema).map((a) => [where, a] as const));
  const silent = amounts.filter(([, a]) => !/at most 4 decimals/.test(String(a.description))).map(([w]) => w);
  expect(silent).toEqual([]);
});
