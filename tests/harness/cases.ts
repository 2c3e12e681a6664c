import request from 'supertest';
import type { BlogSuite } from './suite.js';
import { TEST_API_KEY } from './rest.js';

// PostgREST's behaviours as a table: each case is a request to /rest/v1 and what PostgREST
// answers to it (tests/rest-conformance-read.test.ts, tests/rest-conformance-write.test.ts).

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'HEAD';

export interface Case {
  name: string;
  method: Method;
  path: string;
  prefer?: string;
  headers?: Record<string, string>;
  /** A value is sent as JSON; a string is sent as it is (with the headers' Content-Type). */
  body?: unknown;
  status: number;
  /** The JSON body expected, or the text body (a string) for CSV. */
  json?: unknown;
  text?: string;
  /** Headers expected; null: the header must be absent. */
  out?: Record<string, string | null>;
  /** Afterwards, a GET of `path` answers `json`. */
  then?: { path: string; json: unknown };
}

export const JSON_TYPE = 'application/json; charset=utf-8';

const isError = (v: unknown): v is { hint: unknown } => typeof v === 'object' && v !== null && 'hint' in v;

/** Sends a case's request to the suite's app, and checks a case's answer. */
export function caseRunner(suite: () => BlogSuite) {
  function send(c: {
    method: Method;
    path: string;
    prefer?: string;
    headers?: Record<string, string>;
    body?: unknown;
  }) {
    const agent = request(suite().t.app);
    const method = c.method === 'HEAD' ? 'head' : (c.method.toLowerCase() as 'get');
    const r = agent[method](`/rest/v1/${c.path}`).set({
      apikey: TEST_API_KEY,
      ...(c.prefer ? { Prefer: c.prefer } : {}),
      ...c.headers,
    });
    if (c.body === undefined) return r;
    if (typeof c.body === 'string')
      return r.set('Content-Type', c.headers?.['Content-Type'] ?? 'application/json').send(c.body);
    return r.send(c.body as object);
  }

  async function check(c: Case) {
    const res = await send(c);
    const got: Record<string, unknown> = { status: res.status };
    const want: Record<string, unknown> = { status: c.status };
    if (c.json !== undefined) {
      got.body = res.text === '' ? '' : JSON.parse(res.text);
      want.body = c.json;
      // Tally adds a hint where PostgREST has none (docs/rest.md: "Differences from PostgREST").
      if (isError(c.json) && c.json.hint === null && isError(got.body)) want.body = { ...c.json, hint: got.body.hint };
    }
    if (c.text !== undefined) {
      got.text = res.text;
      want.text = c.text;
    }
    for (const [k, v] of Object.entries(c.out ?? {})) {
      got[k] = res.headers[k.toLowerCase()] ?? null;
      want[k] = v;
    }
    if (c.status === 204 || (c.json === undefined && c.text === undefined && c.status < 300)) {
      got.empty = !res.text; // supertest leaves the text of a HEAD undefined
      want.empty = true;
    }
    expect(got).toEqual(want);
    if (c.then) {
      const after = await send({ method: 'GET', path: c.then.path });
      expect(after.body).toEqual(c.then.json);
    }
  }

  return { send, check };
}
