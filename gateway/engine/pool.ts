import { connect, type Socket } from 'node:net';
import postgres, { type Options, type ReservedSql, type Row, type RowList, type Sql } from 'postgres';
import { keepDriverClassesFast } from './driver-classes.js';
import { catalogue, type ApiError } from './errors/catalogue.js';
import { isConnectionError, isPgError, loginRefused } from './errors/translate.js';
import { defined } from './invariant.js';
import { errorFields, log } from './log.js';

// The server's pool of database connections, shared by every workspace. postgres.js's own pool
// cannot destroy one reserved connection (its reserve() has release() only), so a connection
// that stalled or broke stayed reserved for good and each such event cost the pool a slot.
// Here each slot is a one-connection postgres.js client: destroying a slot ends that client
// (its queued queries fail, its socket is closed) and a fresh one takes its place at once, so
// the pool is always at full size. Every acquisition has a deadline, and one key (a tenant, as
// execute.ts names it from the claims; a client address or a token, for the statements the
// server makes on its behalf) holds at most `perKey` slots at a time: a key's heavy requests
// queue behind each other, not in front of everyone else's. The server's own statements
// (reserve() without a key: the settings pages, health) are one more key, whose share is
// `reserved` slots that no keyed reservation takes, so the controls an owner needs to stop a
// tenant answer whatever the tenants run, plus `perKey` more. A freed slot goes to the waiting
// key that holds the fewest (the keyless one counting only what it holds beyond its reserved
// slots): several keys at their share leave room for one that holds none, and keyless work
// neither jumps the queue nor fills the pool.

export interface PoolOptions {
  size: number;
  /** How long an acquisition waits for a slot before it fails (504 PGRST003). */
  acquireTimeoutMs: number;
  /** Slots one key may hold at once; the key's further requests wait (429 when that lasts). */
  perKey: number;
  /** Slots no keyed reservation takes, kept for keyless ones (0 by default); keyless ones take at most `perKey` more. */
  reserved?: number;
  /** postgres.js options of each slot's connection. */
  client: Options<Record<string, never>>;
}

/** What a race with a promise that is not settled yet gives (reserve() below). */
const NOT_YET_VALUE = Symbol('not yet');
const NOT_YET = Promise.resolve(NOT_YET_VALUE);

/**
 * Characters of statement text one connection keeps prepared. postgres.js prepares each new
 * statement text once per connection and keeps it for the connection's life, and so does its
 * backend, at about 50 bytes of memory a character: 50 KB for a list read, 2 MB for a read of 49
 * embeds. A client that varies its reads (an alias, a column, a filter) grew a backend by 25 MB
 * every 500 small reads, or 200 MB every 100 large ones, as long as the connection lived. Past
 * this many characters (about 50 MB of the backend's memory), the connection is closed when it
 * is released, and a fresh one takes its slot: an ordinary client's reads take far fewer.
 */
export const MAX_PREPARED_CHARS_PER_CONNECTION = 1_000_000;

/** A reserved connection: release it when its work ended cleanly, destroy it otherwise. */
export interface Lease {
  sql: ReservedSql;
  /** Counts a statement sent prepared on this connection (MAX_PREPARED_CHARS_PER_CONNECTION). */
  prepared(text: string): void;
  release(): void;
  /** Cancels what the backend runs (`pending`: the queries in flight) and drops the connection. */
  destroy(pending?: Iterable<unknown>): void;
}

interface PoolStats {
  size: number;
  free: number;
  waiting: number;
}

/** A single statement outside a request transaction, on a leased connection, with a deadline. */
type Statement = <T extends readonly object[] = Row[]>(
  strings: TemplateStringsArray,
  ...values: unknown[]
) => Promise<RowList<T>>;

interface Slot {
  client: Sql;
  /** Stops the client from ever opening a connection again (see slotClient). */
  retire: () => void;
  busy: boolean;
  /** The texts of the statements prepared on this client's connection, and their characters. */
  prepared: Set<string>;
  preparedChars: number;
}

interface Waiter {
  key: string;
  grant: (slot: Slot) => void;
}

/** The pool is also a tagged template: one keyless statement (the server's own) on a leased connection, with a deadline. */
export interface Pool extends Statement {
  /** A statement the server makes on behalf of `key` (a client address, a token): it counts against that key's share. */
  for(key: string): Statement;
  reserve(key?: string): Promise<Lease>;
  /**
   * How long a request waits for a connection that answers (PoolOptions.acquireTimeoutMs): a
   * transaction's BEGIN unanswered for that long means a connection that is gone (execute.ts).
   */
  readonly acquireTimeoutMs: number;
  stats(): PoolStats;
  /** A client of its own (not a pool slot) for LISTEN and the schema cache's catalog reads. */
  control: Sql;
  /** The change watch's connection (changes.ts), apart from everything else; see WatchClient. */
  watch: WatchClient;
  end(options?: { timeout?: number }): Promise<void>;
}

/**
 * One connection the change watch alone uses, so that its poll never queues behind a schema load
 * on the control connection or behind requests in the pool. `renew()` gives up on the current
 * connection (a poll on it stalled) and makes the next poll on a fresh one.
 */
interface WatchClient {
  readonly sql: Sql;
  renew(): void;
}

/**
 * A connection that answers nothing for this long after its deadline (the statement timeout,
 * which Postgres enforces itself) is taken for lost and destroyed: a stopped or unreachable
 * backend, or postgres.js (3.4.9) never settling queries it queued behind the description of a
 * new prepared statement when the connection closed meanwhile.
 */
export const WATCHDOG_MARGIN_MS = 2000;

/**
 * The change watch's session in pg_stat_activity (see WatchClient): one for each running
 * server, which is how `tally sql` and `tally migrate` count the servers that must reload.
 */
export const WATCH_NAME = 'tally-changes';

/** A single statement outside a request transaction (apikey, counters, settings) gets this long. */
const SIMPLE_STATEMENT_MS = 5000;

/** A refused login is logged at most this often: every request meets it until it is fixed. */
const LOGIN_REFUSED_LOG_MS = 10_000;

export function createPool(url: string, options: PoolOptions): Pool {
  const slots = new Slots(options.size, options.perKey, options.reserved ?? 0, () => slotClient(url, options.client));
  // Without prepared statements (a transaction pooler between), there is nothing to count.
  const counted = options.client.prepare !== false;
  let ended = false;
  let loginRefusedLoggedAt = -Infinity;
  // Requests answer 503 (could not connect) meanwhile; the log says why, in words an operator acts on.
  const logLoginRefused = (err: unknown) => {
    if (Date.now() - loginRefusedLoggedAt < LOGIN_REFUSED_LOG_MS) return;
    loginRefusedLoggedAt = Date.now();
    log.error(
      errorFields(err),
      "the database refused the server's login: no new connection can be made, and requests answer 503 until its password (TALLY_DB_URI) is the role's again",
    );
  };

  async function reserve(key?: string): Promise<Lease> {
    if (ended) throw Object.assign(new Error('the pool has ended'), { code: 'CONNECTION_ENDED' });
    const started = Date.now();
    const slot = await slots.take(key, options.acquireTimeoutMs);
    let conn: ReservedSql;
    try {
      conn = await connectionOf(slot, options.acquireTimeoutMs - (Date.now() - started), options.acquireTimeoutMs);
    } catch (err) {
      slots.free(slot, key, true);
      if (loginRefused(err)) logLoginRefused(err);
      throw err;
    }
    return leaseOf(conn, counted, slot, (destroy) => slots.free(slot, key, destroy));
  }

  const control = controlClient(url, options.client);
  // A server cannot start without its control connection, so this statement's failure is rare;
  // the server then runs as it is, only slower (see driver-classes.ts).
  keepDriverClassesFast(control).catch((err: unknown) => {
    if (!ended) log.warn(errorFields(err), 'could not put the database driver classes in fast mode');
  });
  const newWatch = () => slotClient(url, named(options.client, WATCH_NAME));
  let watch = newWatch();
  return Object.assign(simpleStatement(reserve, undefined), {
    for: (key: string) => simpleStatement(reserve, key),
    reserve,
    acquireTimeoutMs: options.acquireTimeoutMs,
    control,
    watch: {
      get sql() {
        return watch.client;
      },
      renew() {
        if (ended) return;
        watch.retire();
        watch.client.end({ timeout: 0 }).catch(() => {});
        watch = newWatch();
      },
    },
    stats: () => slots.stats(),
    async end(opts: { timeout?: number } = {}) {
      ended = true; // waiters still queued are answered by their timers
      watch.retire();
      await Promise.all([...slots.clients().map((c) => c.end(opts)), control.end(opts), watch.client.end(opts)]);
    },
  }) as Pool;
}

/** The key of the server's own statements (reserve() without a key) among the others. */
const KEYLESS = '\0keyless';

/**
 * Who holds which slot, and who gets the next free one: the waiting key, eligible for a slot,
 * that holds the fewest (the first of them in the queue). No I/O but a destroyed slot's
 * replacement client.
 */
class Slots {
  private readonly slots: Slot[];
  private readonly waiting: Waiter[] = [];
  private readonly held = new Map<string, number>();
  /** Slots held by keyed reservations, at most size - reserved. */
  private keyed = 0;
  private readonly shared: number;

  constructor(
    size: number,
    private readonly perKey: number,
    private readonly reserved: number,
    private readonly newClient: () => Pick<Slot, 'client' | 'retire'>,
  ) {
    this.slots = Array.from({ length: size }, () => ({
      ...newClient(),
      busy: false,
      prepared: new Set<string>(),
      preparedChars: 0,
    }));
    this.shared = size - reserved;
  }

  /**
   * A slot for `key`: a free one at once when it may take one and no waiter may, else the next
   * one given to it (dispatch); after `timeoutMs`, a 429 when the caller waited on its own
   * share, a 504 when it waited on the pool.
   */
  take(key: string | undefined, timeoutMs: number): Slot | Promise<Slot> {
    const k = key ?? KEYLESS;
    const free = this.takeFree(k);
    if (free) return free;
    return new Promise<Slot>((resolve, reject) => {
      // The timer is cleared where the slot is granted: no promise more (a finally) per wait.
      const timer = setTimeout(() => {
        const i = this.waiting.indexOf(waiter);
        if (i < 0) return;
        this.waiting.splice(i, 1);
        reject(k === KEYLESS || this.underShare(k) ? catalogue.poolTimeout(timeoutMs) : tooManyConcurrent(this.perKey));
      }, timeoutMs);
      const waiter: Waiter = {
        key: k,
        grant: (slot) => {
          clearTimeout(timer);
          resolve(slot);
        },
      };
      this.waiting.push(waiter);
      this.dispatch();
    });
  }

  /** Gives a slot back (`destroy`: with a fresh client in place of its own), then to the next waiter. */
  free(slot: Slot, key: string | undefined, destroy: boolean): void {
    if (destroy) {
      const old = slot.client;
      old.end({ timeout: 0 }).catch(() => {});
      slot.retire();
      Object.assign(slot, this.newClient());
      slot.prepared = new Set();
      slot.preparedChars = 0;
    }
    slot.busy = false;
    this.hold(key ?? KEYLESS, -1);
    this.dispatch();
  }

  stats(): PoolStats {
    return {
      size: this.slots.length,
      free: this.slots.filter((s) => !s.busy).length,
      waiting: this.waiting.length,
    };
  }

  clients(): Sql[] {
    return this.slots.map((s) => s.client);
  }

  private hold(key: string, delta: number): void {
    if (key !== KEYLESS) this.keyed += delta;
    const n = (this.held.get(key) ?? 0) + delta;
    if (n > 0) this.held.set(key, n);
    else this.held.delete(key);
  }

  private underShare(key: string): boolean {
    return (this.held.get(key) ?? 0) < this.perKey;
  }

  /** Whether `key` may take one more slot: keyless work within its reserved slots and a share more. */
  private eligible(key: string): boolean {
    if (key === KEYLESS) return (this.held.get(key) ?? 0) < this.reserved + this.perKey;
    return this.keyed < this.shared && this.underShare(key);
  }

  /** What a key holds when waiters are compared: keyless work's reserved slots count for nothing. */
  private weight(key: string): number {
    const n = this.held.get(key) ?? 0;
    return key === KEYLESS ? Math.max(0, n - this.reserved) : n;
  }

  /** The waiter a free slot goes to: of the eligible ones, the first whose key holds the fewest; -1 for none. */
  private next(): number {
    let best = -1;
    let fewest = Infinity;
    for (const [i, { key }] of this.waiting.entries()) {
      if (!this.eligible(key)) continue;
      const n = this.weight(key);
      if (n < fewest) [best, fewest] = [i, n];
    }
    return best;
  }

  /** Gives free slots to waiters (next()) while any may take one. */
  private dispatch(): void {
    if (this.waiting.length === 0) return; // every slot freed when nobody waits comes here
    for (const slot of this.slots) {
      if (slot.busy) continue;
      const i = this.next();
      const w = this.waiting[i];
      if (w === undefined) return;
      this.waiting.splice(i, 1);
      w.grant(this.occupy(slot, w.key));
    }
  }

  /** A free slot at once, when the caller may take one and no waiter may (it would come first). */
  private takeFree(key: string): Slot | undefined {
    if (!this.eligible(key) || this.next() >= 0) return undefined;
    const slot = this.slots.find((s) => !s.busy);
    return slot && this.occupy(slot, key);
  }

  private occupy(slot: Slot, key: string): Slot {
    slot.busy = true;
    this.hold(key, 1);
    return slot;
  }
}

/**
 * The slot's connection, reserved: it may still have to be made (or remade), within `leftMs` of
 * the acquisition's deadline. An open one is reserved at once (postgres.js's reserve() then
 * resolves without waiting), which the race with an already resolved promise tells without
 * arming a timer.
 */
async function connectionOf(slot: Slot, leftMs: number, deadlineMs: number): Promise<ReservedSql> {
  const reserving = slot.client.reserve();
  let timer: NodeJS.Timeout | undefined;
  try {
    const now = await Promise.race([reserving, NOT_YET]);
    if (now !== NOT_YET_VALUE) return now;
    return await Promise.race([
      reserving,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(catalogue.poolTimeout(deadlineMs)), Math.max(1, leftMs));
      }),
    ]);
  } catch (err) {
    reserving.catch(() => {});
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A reserved connection as a Lease: `free` gives its slot back, once, destroyed or not. Released
 * with more than MAX_PREPARED_CHARS_PER_CONNECTION characters prepared (when `counted`), it is
 * closed.
 */
function leaseOf(conn: ReservedSql, counted: boolean, slot: Slot, free: (destroy: boolean) => void): Lease {
  let done = false;
  return {
    sql: conn,
    prepared(text) {
      if (!counted || slot.prepared.has(text)) return;
      slot.prepared.add(text);
      slot.preparedChars += text.length;
    },
    release() {
      if (done) return;
      done = true;
      conn.release();
      free(slot.preparedChars > MAX_PREPARED_CHARS_PER_CONNECTION);
    },
    destroy(pending = []) {
      if (done) return;
      done = true;
      // Ask Postgres to cancel what the backend runs (postgres.js sends a cancel request with
      // the backend's key on a connection of its own), then close ours: the backend ends as
      // soon as it reads again. A stopped backend gets both once it runs again.
      // The cancel request is best effort: with Postgres away it fails, and nobody waits on it.
      for (const q of pending) Promise.resolve((q as { cancel?: () => unknown }).cancel?.()).catch(() => {});
      free(true);
    },
  };
}

/** One statement on a connection leased for `key`, with a deadline. */
function simpleStatement(reserve: (key?: string) => Promise<Lease>, key: string | undefined): Statement {
  return async function simple<T extends readonly object[]>(
    strings: TemplateStringsArray,
    ...values: unknown[]
  ): Promise<RowList<T>> {
    const lease = await reserve(key);
    const query = lease.sql<T>(strings, ...(values as never[]));
    try {
      const rows = await watched(query, SIMPLE_STATEMENT_MS);
      lease.release();
      return rows;
    } catch (err) {
      if (isPgError(err) && !isConnectionError(err)) lease.release();
      else lease.destroy([query]);
      throw err;
    }
  };
}

/** The control client: one connection of its own, named so in pg_stat_activity. */
function controlClient(url: string, clientOptions: PoolOptions['client']): Sql {
  return postgres(url, { ...named(clientOptions, 'tally-control'), max: 1 });
}

/** Client options whose connections show as `name` in pg_stat_activity. */
function named(clientOptions: PoolOptions['client'], name: string): PoolOptions['client'] {
  const connection = clientOptions.connection as Record<string, string> | undefined;
  return { ...clientOptions, connection: { ...connection, application_name: name } as never };
}

/**
 * A slot's one-connection client, whose sockets come from here. postgres.js (3.4.9) reconnects a
 * connection that closed while it was still starting up (Postgres restarting) from a timer that
 * end() does not clear: a retired slot's client would come back later as an idle backend that
 * nobody uses, one per retirement. Once retired, the client gets no socket, so it cannot.
 */
function slotClient(url: string, clientOptions: PoolOptions['client']): Pick<Slot, 'client' | 'retire'> {
  let retired = false;
  // Otherwise the socket postgres.js would make itself: it writes the start-up message at once,
  // which Node buffers until the connection is made; refusals and timeouts reach it as usual.
  // With several hosts in the URL (h1:p1,h2:p2) each attempt takes the next one, as postgres.js
  // does with sockets of its own: a host that refuses, or that target_session_attrs rejects,
  // is followed by the next.
  let attempt = 0;
  const socket = (o: { host: string[]; port: number[] }): Socket => {
    if (retired) throw Object.assign(new Error('this pool slot was retired'), { code: 'CONNECTION_DESTROYED' });
    const i = attempt++ % o.host.length;
    return writesInOnePiece(
      connect({
        host: defined(o.host[i], 'the database host'),
        port: defined(o.port[i] ?? o.port[0], 'the database port'),
      }),
    );
  };
  const client = postgres(url, { ...clientOptions, max: 1, socket } as never);
  return { client, retire: () => void (retired = true) };
}

/** What postgres.js (3.4.9) gathers of a pipeline before it writes it out at once. */
const PIECE_BYTES = 1024;

/**
 * postgres.js writes the statements of a pipeline in pieces: at once whenever a kilobyte has
 * gathered, and the rest at the end of the event loop's turn. Postgres answered the first piece
 * before the rest arrived (half of the list reads did, with a request's headers and claims
 * among the setup statement's values) and waited for it: two reads, two answers and a wake-up
 * more for what the client sent as one round trip. A piece of that size is held (corked) until
 * the rest is written, and both go in one write; a later turn of the event loop lets go of a
 * piece that nothing followed.
 */
function writesInOnePiece(socket: Socket): Socket {
  const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
  let held = false;
  const release = (): void => {
    if (!held) return;
    held = false;
    socket.uncork();
  };
  socket.write = ((...args: unknown[]): boolean => {
    const chunk = args[0] as Uint8Array | string;
    const piece = (typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length) >= PIECE_BYTES;
    if (piece && !held) {
      held = true;
      socket.cork();
      setImmediate(() => setImmediate(release));
    }
    const written = write(...args);
    if (!piece) release();
    return written;
  }) as Socket['write'];
  return socket;
}

/** A promise that rejects as a lost connection when `work` takes longer than `ms` (0: never). */
export function watched<T>(work: Promise<T>, ms: number): Promise<T> {
  return watchedFrom(work, ms);
}

/**
 * `work` watched as watched() does, and `first` (its first answer) within `firstMs` too, which is
 * shorter than `ms` (0: not watched). One timer for both: armed for `firstMs`, then, when `first`
 * has answered, for what is left of `ms`. Every transaction of every request comes through here:
 * two watches (two timers, each a promise around the work, a third joining them) cost more.
 */
export function watchedFrom<T>(work: Promise<T>, ms: number, first?: Promise<unknown>, firstMs = 0): Promise<T> {
  const early = first !== undefined && firstMs > 0 && (ms <= 0 || firstMs < ms);
  if (ms <= 0 && !early) return work;
  return new Promise<T>((resolve, reject) => {
    let answered = false;
    const lost = () =>
      reject(Object.assign(new Error('no answer from the database connection'), { code: 'CONNECTION_CLOSED' }));
    let timer = setTimeout(
      early
        ? () => {
            if (!answered) lost();
            else if (ms > 0) timer = setTimeout(lost, ms - firstMs);
          }
        : lost,
      early ? firstMs : ms,
    );
    if (early) {
      const mark = () => void (answered = true);
      first.then(mark, mark);
    }
    work.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

function tooManyConcurrent(n: number): ApiError {
  return catalogue.rateLimited(
    `Too many concurrent requests of one tenant or client address: at most ${n} run at a time`,
    null,
    'Wait for your running requests to finish, or send fewer at once',
    { 'Retry-After': '1' },
  );
}
