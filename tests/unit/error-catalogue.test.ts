import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ApiError, catalogue as engineCatalogue, type Entry } from '../../gateway/engine/errors/catalogue.js';
import { appCatalogue, catalogue, toApiError } from '../../gateway/errors.js';
import { packageRoot as root } from '../../gateway/paths.js';
import { toApiError as engineToApiError, isConnectionError } from '../../gateway/engine/errors/translate.js';
import { constraintMessage } from '../../gateway/fields.js';
import { page } from '../harness/docs.js';

// The catalogues are the one list of errors: the engine's (PostgREST's) and the app's own. The
// table of docs/errors.md says the same, each PostgREST code has PostgREST's status, and nothing else
// makes an ApiError.

const entries: Entry[] = [...Object.values(engineCatalogue), ...Object.values(appCatalogue)];

/** Code → the statuses its entries answer, as docs/errors.md writes them ("406, 415"). */
function statusesByCode(): Map<string, string> {
  const by = new Map<string, Set<string>>();
  for (const e of entries) by.set(e.code, (by.get(e.code) ?? new Set()).add(String(e.status)));
  return new Map([...by].map(([code, s]) => [code, [...s].sort().join(', ')]));
}

/** The rows of the table of docs/errors.md: code → status cell. */
function documentedTable(): Map<string, string> {
  const rows = new Map<string, string>();
  for (const line of page('docs/errors.md').split('\n')) {
    const m = /^\| `([^`]+)` \| ([^|]+?) \|/.exec(line);
    const [, code, status] = m ?? [];
    if (code !== undefined && status !== undefined) rows.set(code, status.trim());
  }
  return rows;
}

// PostgREST's status of each of its codes (src/PostgREST/Error.hs); PGRST107 is 415 for the
// Content-Type and 406 for Accept.
const POSTGREST_STATUS: Record<string, string> = {
  PGRST000: '503',
  PGRST001: '503',
  PGRST002: '503',
  PGRST003: '504',
  PGRST100: '400',
  PGRST101: '405',
  PGRST102: '400',
  PGRST103: '416',
  PGRST105: '405',
  PGRST106: '406',
  PGRST107: '406, 415',
  PGRST108: '400',
  PGRST109: '400',
  PGRST111: '500',
  PGRST112: '500',
  PGRST114: '400',
  PGRST115: '400',
  PGRST116: '406',
  PGRST117: '405',
  PGRST118: '400',
  PGRST120: '400',
  PGRST121: '500',
  PGRST122: '400',
  PGRST123: '400',
  PGRST124: '400',
  PGRST125: '404',
  PGRST126: '404',
  PGRST127: '400',
  PGRST128: '400',
  PGRST200: '400',
  PGRST201: '300',
  PGRST202: '404',
  PGRST203: '300',
  PGRST204: '400',
  PGRST205: '404',
  PGRST300: '500',
  PGRST301: '401',
  PGRST302: '401',
  PGRST303: '401',
};

describe('the error catalogue', () => {
  it('is the table of docs/errors.md: every code with the same status, and no other row', () => {
    expect(documentedTable()).toEqual(statusesByCode());
  });

  it("gives PostgREST's codes PostgREST's statuses, and every code a known family", () => {
    for (const [code, statuses] of statusesByCode()) {
      if (code.startsWith('PGRST')) expect([code, statuses]).toEqual([code, POSTGREST_STATUS[code]]);
      else if (code.startsWith('PT')) expect([code, statuses]).toEqual([code, code.slice(2)]);
      else expect(code).toMatch(/^(TLY\d{3}|[0-9][0-9A-Z]{4}|SQLSTATE|custom)$/);
    }
  });

  it('has one PGRST102 builder with one message template', () => {
    expect(entries.filter((e) => e.code === 'PGRST102')).toHaveLength(1);
    expect(catalogue.invalidBody('Empty or invalid json').body()).toEqual({
      code: 'PGRST102',
      message: 'Empty or invalid json',
      details: null,
      hint: null,
    });
  });

  it('keeps a bug (TLY000, 500) apart from a database that cannot be reached (PGRST000, 503)', () => {
    expect([catalogue.internal().status, catalogue.internal().code]).toEqual([500, 'TLY000']);
    const away = catalogue.couldNotConnect();
    expect([away.status, away.code, away.headers]).toEqual([503, 'PGRST000', { 'Retry-After': '2' }]);
  });

  it("answers the database's own code and status for database errors", () => {
    const e = catalogue.database(409, '23505', 'duplicate key', null, null, {});
    expect([e.status, e.code]).toEqual([409, '23505']);
    const raised = catalogue.raised(402, 'PAY01', 'Pay first', null, null, { 'X-Pay': '1' });
    expect([raised.status, raised.code, raised.headers]).toEqual([402, 'PAY01', { 'X-Pay': '1' }]);
  });

  it("keeps the app's errors out of the engine's catalogue, with one entry per name", () => {
    const app = Object.keys(appCatalogue);
    expect(app.filter((name) => name in engineCatalogue)).toEqual([]);
    expect(Object.values(engineCatalogue).filter((e) => /^TLY[12]/.test(e.code))).toEqual([]);
    expect(Object.keys(catalogue).length).toBe(Object.keys(engineCatalogue).length + app.length);
  });

  it('makes errors only through the catalogue: the constructor refuses anyone else', () => {
    const Construct = ApiError as unknown as new (...args: unknown[]) => ApiError;
    expect(() => new Construct(Symbol('error catalogue'), 400, 'X', 'm')).toThrow(TypeError);
  });

  it('is the only place in the sources that constructs an ApiError', () => {
    const offenders: string[] = [];
    const walk = (dir: string): void => {
      for (const d of readdirSync(join(root, dir), { withFileTypes: true })) {
        const path = `${dir}/${d.name}`;
        if (d.isDirectory()) walk(path);
        else if (
          path.endsWith('.ts') &&
          path !== 'gateway/engine/errors/catalogue.ts' &&
          /new ApiError\b/.test(readFileSync(join(root, path), 'utf8'))
        )
          offenders.push(path);
      }
    };
    walk('gateway');
    walk('mcp');
    expect(offenders).toEqual([]);
  });
});

describe('toApiError, the one way anything thrown on a surface becomes an answer', () => {
  const answer = (err: unknown) => {
    const { error, unexpected } = toApiError(err);
    return { status: error.status, code: error.code, unexpected };
  };

  it('keeps an ApiError and maps a lost database to 503', () => {
    expect(answer(catalogue.singular(2))).toEqual({ status: 406, code: 'PGRST116', unexpected: false });
    expect(answer(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))).toEqual({
      status: 503,
      code: 'PGRST000',
      unexpected: false,
    });
    expect(answer(Object.assign(new Error('socket'), { code: 'ECONNRESET' }))).toEqual({
      status: 503,
      code: 'PGRST001',
      unexpected: false,
    });
  });

  it('answers anything else as a 500 that says nothing internal, for the caller to log', () => {
    const { error, unexpected } = toApiError(new Error('SELECT secret FROM internals'));
    expect(unexpected).toBe(true);
    expect([error.status, error.body()]).toEqual([
      500,
      { code: 'TLY000', message: 'Internal server error', details: null, hint: expect.any(String) },
    ]);
    expect(JSON.stringify(error.body())).not.toMatch(/secret|SELECT/);
  });
});

describe("a connection failure: the database's own, or of a node behind it", () => {
  // As postgres.js gives a server's ErrorResponse: its severity says whether the session ended.
  const pgError = (code: string, severity: string, message: string) =>
    Object.assign(new Error(message), { name: 'PostgresError', code, severity, message });
  const answer = (err: unknown) => ({ code: toApiError(err).error.code, lost: isConnectionError(err) });
  const workerDown = 'connection to the remote node 127.0.0.1:9702 failed with the following error: Connection refused';

  it('keeps the connection that reports a Citus worker it cannot reach (an ERROR), and names the node: TLY006', () => {
    expect(answer(pgError('08006', 'ERROR', workerDown))).toEqual({ code: 'TLY006', lost: false });
    expect(answer(pgError('08001', 'ERROR', 'could not connect to server "remote"'))).toEqual({
      code: 'TLY006',
      lost: false,
    });
    // A worker refusing the request's role stays an operator's fault of its own.
    const refused = `connection to the remote node 127.0.0.1:9702 failed with the following error: FATAL:  password authentication failed for user "api_read"`;
    expect(answer(pgError('08006', 'ERROR', refused))).toEqual({ code: 'TLY004', lost: false });
  });

  it('gives up a connection whose session ended (FATAL), and a refused login is "could not connect"', () => {
    expect(answer(pgError('08006', 'FATAL', 'connection failure'))).toEqual({ code: 'PGRST001', lost: true });
    expect(answer(pgError('57P01', 'FATAL', 'terminating connection due to administrator command'))).toEqual({
      code: 'PGRST001',
      lost: true,
    });
    expect(answer(pgError('28P01', 'FATAL', 'password authentication failed for user "authenticator"'))).toEqual({
      code: 'PGRST000',
      lost: true,
    });
  });
});

describe('a constraint error raised on a Citus shard', () => {
  // What a coordinator passes on of a worker's error: SQLSTATE, message and detail, no
  // constraint or table field, and the shard's names in the message.
  const fromShard = (code: string, message: string) =>
    Object.assign(new Error(message), { name: 'PostgresError', code, message });
  const context = {
    anonymous: false,
    readOnlyWrite: false,
    readOnlyTransaction: false,
    statementTimeoutMs: 1000,
    describeConstraint: constraintMessage,
  };
  const answer = (err: unknown) => {
    const body = engineToApiError(err, context).error.body();
    return [body.message, body.details];
  };

  it("gets the deployment's sentence for its check constraint, as on one Postgres", () => {
    expect(
      answer(
        fromShard(
          '23514',
          'new row for relation "funds_102086" violates check constraint "funds_contribution_schedule_complete"',
        ),
      ),
    ).toEqual([
      constraintMessage({ code: '23514', message: '', constraint_name: 'funds_contribution_schedule_complete' }),
      'constraint: funds_contribution_schedule_complete',
    ]);
  });

  it("names an index-backed or foreign-key constraint without the shard's suffix", () => {
    expect(
      answer(
        fromShard(
          '23503',
          'insert or update on table "personal_transactions_102040" violates foreign key constraint "personal_transactions_category_id_fkey_102040"',
        ),
      ),
    ).toEqual([
      'category_id must be one of the expense categories (see the live list)',
      'constraint: personal_transactions_category_id_fkey',
    ]);
  });
});
