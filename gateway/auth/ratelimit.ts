import { createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Pool } from '../engine/pool.js';
import type { AppContext } from '../context.js';
import { Lru } from '../engine/lru.js';
import { addressKey } from './address.js';
import { catalogue, type ApiError } from '../errors.js';
import { oneRow } from '../engine/invariant.js';
import { errorFields, log } from '../log.js';

// Rate limits: TALLY_RATE_LIMIT_PER_MINUTE requests per minute per workspace
// token, counted across every surface together, or per client address where no token is known;
// and a stricter limit per address on failed authentications, to slow token guessing. The
// counters live in Postgres (tally.rate_limits), so every Tally process on the database
// enforces one limit.
//
// Each surface takes a request from the limit right after its authentication step, which gives
// the key `token:<workspace token id>` (bearer auth from the JWT's `sub`, the exchange and MCP
// from the token lookup). The same key on every surface is what makes the limit one limit per
// token. The answer carries the IETF draft-8 RateLimit and RateLimit-Policy headers, as
// express-rate-limit writes them; its middleware is not used, because /rest/v1 and /api/v1 are
// plain node:http handlers and the middleware's per-request work was a measurable share of a read.

export const WINDOW_MS = 60_000;
/** Failed authentications per address and minute before that address is refused outright. */
export const FAILED_AUTH_LIMIT_PER_MINUTE = 10;

/**
 * The counters on the database: fixed windows, one round trip per hit (an atomic upsert in
 * tally.rate_limit_take), or per block of hits under a high limit. Keys are token ids and
 * addresses, never secrets; each key's statements count against its own share of the pool
 * (pool.ts), so one client's counting does not queue before everyone else's.
 */
export class PostgresRateLimitStore {
  /** Hits taken from Postgres in a block and not yet handed out (limits of LEASE_MIN_LIMIT and more). */
  private readonly leases = new Map<string, Lease>();
  private readonly taking = new Map<string, Promise<unknown>>();

  constructor(
    private readonly db: Pool,
    readonly prefix: string,
    private readonly limit?: number,
    private readonly windowMs = WINDOW_MS,
  ) {}

  async increment(key: string): Promise<{ totalHits: number; resetTime: Date }> {
    if (this.limit === undefined || this.limit < LEASE_MIN_LIMIT) {
      // A low limit is counted exactly, hit by hit, across every process.
      const row = oneRow(
        await this.db.for(key)<{ hits: number; reset_at: Date }[]>`
        SELECT hits, reset_at FROM tally.rate_limit_take(${this.prefix + key}, ${this.windowMs}, 1)`,
        'tally.rate_limit_take',
      );
      return { totalHits: row.hits, resetTime: row.reset_at };
    }
    // A high limit: hits are taken from Postgres in blocks (one round trip per block, not per
    // request) and handed out here. The database counts a block when it is taken, so the
    // limit is never exceeded; another process's unused block can refuse a client slightly
    // early, by at most 1% of what was left of its budget when the block was taken. The next
    // block is taken while a quarter of the current one is left, so that no request waits for
    // that round trip (and with it every request of the key behind it): only the first of a
    // window does.
    for (;;) {
      const lease = this.leases.get(key);
      if (lease && lease.left > 0 && lease.resetTime.getTime() > Date.now()) {
        lease.left--;
        lease.hits++;
        if (lease.left <= lease.size / 4 && !this.taking.has(key)) this.takeAhead(key, lease);
        return { totalHits: lease.hits, resetTime: lease.resetTime };
      }
      const pending = this.taking.get(key);
      if (pending) {
        await pending;
        continue;
      }
      const take = this.take(key, lease).finally(() => this.taking.delete(key));
      this.taking.set(key, take);
      const taken = await take;
      if (taken) return taken;
    }
  }

  /** The next block for `key` before `lease` runs out; a failure is left to the request that needs it. */
  private takeAhead(key: string, lease: Lease): void {
    const take = this.take(key, lease, true)
      .catch((err: unknown) => {
        // The block may still be counted once the query ends: up to a block's hits lost.
        log.warn({ ...errorFields(err), key: this.prefix + key }, 'rate-limit block taken ahead failed');
      })
      .finally(() => this.taking.delete(key));
    this.taking.set(key, take);
  }

  /**
   * A new block for `key`, added to what is left of the current one in the same window. Returns
   * the hit of this request when it needed the block and the window is over the limit.
   */
  private async take(
    key: string,
    previous: Lease | undefined,
    ahead = false,
  ): Promise<{ totalHits: number; resetTime: Date } | undefined> {
    const limit = this.limit!;
    const fresh = !previous || previous.resetTime.getTime() <= Date.now();
    const remaining = fresh ? limit : Math.max(0, limit - previous.hits);
    const n = Math.max(1, Math.min(LEASE_MAX, Math.floor(remaining / 100)));
    // Every request of this key waits for this one query: bounded, so that a query the driver
    // loses while Postgres restarts cannot hold them all (it answers 503, engine/errors/translate.ts).
    let timer: NodeJS.Timeout | undefined;
    const rows = await Promise.race([
      this.db.for(key)<{ hits: number; reset_at: Date }[]>`
        SELECT hits, reset_at FROM tally.rate_limit_take(${this.prefix + key}, ${this.windowMs}, ${n})`,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              Object.assign(new Error('the rate-limit counter did not answer in time'), { code: 'CONNECT_TIMEOUT' }),
            ),
          TAKE_TIMEOUT_MS,
        );
      }),
    ]).finally(() => clearTimeout(timer));
    const row = oneRow(rows, 'tally.rate_limit_take');
    if (this.leases.size > 10_000) this.leases.clear();
    if (ahead) {
      // Hits handed out so far, as far as anyone knows: the database's, less what this
      // process holds. Hits past the limit are numbered past it, and refused as such; a block
      // wholly past it adds nothing, and leaves the hits held (counted under it) as they are.
      const current = this.leases.get(key);
      const sameWindow = current !== undefined && current.resetTime.getTime() === row.reset_at.getTime();
      if (sameWindow && row.hits - n >= limit) return undefined;
      const left = sameWindow ? current.left + n : n;
      this.leases.set(key, { left, hits: row.hits - left, size: n, resetTime: row.reset_at });
      return undefined;
    }
    // The block's first hit is this request's; the rest wait here.
    const first = row.hits - n + 1;
    if (first > limit) {
      this.leases.set(key, { left: 0, hits: row.hits, size: n, resetTime: row.reset_at });
      return { totalHits: first, resetTime: row.reset_at };
    }
    this.leases.set(key, { left: n - 1, hits: first, size: n, resetTime: row.reset_at });
    return { totalHits: first, resetTime: row.reset_at };
  }

  async get(key: string): Promise<{ totalHits: number; resetTime: Date } | undefined> {
    const [row] = await this.db.for(key)<{ hits: number; reset_at: Date }[]>`
      SELECT hits, reset_at FROM tally.rate_limit_get(${this.prefix + key})`;
    return row ? { totalHits: row.hits, resetTime: row.reset_at } : undefined;
  }
}

/** From this limit per window on, hits are taken from Postgres in blocks (see increment). */
const LEASE_MIN_LIMIT = 1000;
const LEASE_MAX = 1000;
const TAKE_TIMEOUT_MS = 3000;

interface Lease {
  /** Hits of the block not yet handed out. */
  left: number;
  /** How many hits the last block brought. */
  size: number;
  /** The window's hits as this process counts them: the database's, less what is left. */
  hits: number;
  resetTime: Date;
}

/**
 * The client address as the key of its counters (an IPv6 client: its /56 network, address.ts),
 * and of the statements the server makes for it in the pool (its share, pool.ts).
 */
export const addressRateKey = (address: string | undefined): string => `ip:${addressKey(address)}`;

/** What the limit says of one request. */
interface LimitInfo {
  limit: number;
  remaining: number;
  resetTime: Date;
  /** The policy's partition key: a hash of the counter's key, never the key itself. */
  partition: string;
}

/**
 * The request limit: config.rateLimitPerMinute per workspace token, per client address without
 * one. One per AppContext, so a request is counted once whichever surface serves it.
 */
class RequestLimit {
  /** Its counters, for what a surface reports beyond one request (requestsLeft). */
  readonly store: PostgresRateLimitStore;
  private readonly partitions = new Lru<string, string>(10_000);
  /**
   * Keys whose window the database said is used up, until its end: their requests are refused
   * here, without a database call (a request already over its limit was counted again, in a
   * statement of its own, however fast it came). A window never gets hits back, so the refusal
   * is the database's own answer, held by this process until the window ends.
   */
  private readonly exhausted = new Lru<string, Date>(10_000);
  readonly name: string;

  constructor(
    db: Pool,
    private readonly limit: number,
  ) {
    this.store = new PostgresRateLimitStore(db, 'req:', limit);
    this.name = `${limit}-in-${WINDOW_MS / 60_000}min`;
  }

  /**
   * Counts one request of `rateKey` (`token:…` from the authentication step; anything else
   * counts against the client address). Over the limit it throws the 429, with the limit's
   * headers and Retry-After.
   */
  async take(rateKey: string | undefined, address: string | undefined): Promise<LimitInfo> {
    const key = rateKey?.startsWith('token:') ? rateKey : addressRateKey(address);
    this.refuseExhausted(key);
    const { totalHits, resetTime } = await this.store.increment(key);
    const info = {
      limit: this.limit,
      remaining: Math.max(0, this.limit - totalHits),
      resetTime,
      partition: this.partition(key),
    };
    if (totalHits > this.limit) {
      this.exhausted.set(key, resetTime);
      throw this.tooMany(info);
    }
    return info;
  }

  /** Throws the 429 of `key` (a counter's key) while this process knows its window is used up. */
  refuseExhausted(key: string): void {
    const until = this.exhausted.get(key);
    if (until === undefined) return;
    if (until.getTime() > Date.now())
      throw this.tooMany({ limit: this.limit, remaining: 0, resetTime: until, partition: this.partition(key) });
    this.exhausted.delete(key);
  }

  private tooMany(info: LimitInfo): ApiError {
    return catalogue.rateLimited(
      `Rate limit exceeded: at most ${this.limit} requests per minute`,
      null,
      'Wait the number of seconds in the Retry-After header before sending more requests',
      { ...this.headers(info), 'Retry-After': String(Math.max(1, secondsUntil(info.resetTime))) },
    );
  }

  /** The draft-8 headers of a request the limit counted. */
  headers(info: LimitInfo): Record<string, string> {
    return {
      RateLimit: `"${this.name}"; r=${info.remaining}; t=${Math.max(0, secondsUntil(info.resetTime))}`,
      'RateLimit-Policy': `"${this.name}"; q=${info.limit}; w=${WINDOW_MS / 1000}; pk=:${info.partition}:`,
    };
  }

  /** As express-rate-limit names a partition: 12 hex digits of the key's SHA-256, in base64. */
  private partition(key: string): string {
    let pk = this.partitions.get(key);
    if (pk === undefined) {
      pk = Buffer.from(createHash('sha256').update(key).digest('hex').slice(0, 12)).toString('base64');
      this.partitions.set(key, pk);
    }
    return pk;
  }

  static of(ctx: AppContext): RequestLimit {
    let limit = requestLimits.get(ctx);
    if (!limit) {
      limit = new RequestLimit(ctx.db, ctx.config.rateLimitPerMinute);
      requestLimits.set(ctx, limit);
    }
    return limit;
  }
}

const requestLimits = new WeakMap<AppContext, RequestLimit>();

const secondsUntil = (t: Date): number => Math.ceil((t.getTime() - Date.now()) / 1000);

/**
 * Takes the request from the limit and sets its headers on the response (a 429 carries them
 * itself). `rateKey` as RequestLimit.take has it.
 */
export async function limitRequest(
  ctx: AppContext,
  res: ServerResponse,
  rateKey: string | undefined,
  address: string | undefined,
): Promise<void> {
  const limit = RequestLimit.of(ctx);
  const info = await limit.take(rateKey, address);
  for (const [name, value] of Object.entries(limit.headers(info))) res.setHeader(name, value);
}

/**
 * Throws the 429 of a client address whose request window this process knows is used up: for
 * database work a request would do before it is counted against that address (an apikey lookup).
 */
export function refuseExhaustedAddress(ctx: AppContext, address: string | undefined): void {
  RequestLimit.of(ctx).refuseExhausted(addressRateKey(address));
}

/** The answer to an address over the failed-authentication limit, with its draft-8 headers. */
export function tooManyFailures(resetAt: Date): ApiError {
  const retry = Math.max(1, Math.ceil((resetAt.getTime() - Date.now()) / 1000));
  return catalogue.rateLimited(
    'Too many failed authentications from this address',
    null,
    'Wait the number of seconds in the Retry-After header, then check the workspace token',
    {
      'Retry-After': String(retry),
      'RateLimit-Policy': `"failed-auth"; q=${FAILED_AUTH_LIMIT_PER_MINUTE}; w=${WINDOW_MS / 1000}`,
      RateLimit: `"failed-auth"; r=0; t=${retry}`,
    },
  );
}

/**
 * The key of the failed-authentication limit of a client address, for the surfaces that take a
 * workspace token itself (the exchange, MCP: authenticateWorkspaceRequest):
 * FAILED_AUTH_LIMIT_PER_MINUTE answers of 401 per address and minute; after that the address
 * gets 429 before its token is even looked at, so guessing costs a minute per few tries. The
 * check, the lookup and the count are one database call per request (tally.authenticate_token),
 * so the limit is exact even for guesses sent all at once; only failures count, so an agent's
 * many concurrent calls are never taken for guesses.
 */
export const failedAuthKey = (address: string | undefined): string => 'authfail:' + addressRateKey(address);

/**
 * Counts `hits` more requests of `key` (a token's rate key) at once: a call that does the work
 * of many (an MCP batch import) costs what that many requests cost. They are taken only when
 * they all fit in what is left of the window; otherwise nothing is taken (the client may send a
 * smaller batch) and this throws the 429. The request itself was counted already.
 */
export async function takeRequests(ctx: AppContext, key: string, hits: number): Promise<void> {
  if (hits <= 0) return;
  const limit = ctx.config.rateLimitPerMinute;
  const row = oneRow(
    await ctx.db.for(key)<{ reset_at: Date; taken: boolean }[]>`
    SELECT reset_at, taken FROM tally.rate_limit_take_if_fits(${'req:' + key}, ${WINDOW_MS}, ${hits}, ${limit})`,
    'tally.rate_limit_take_if_fits',
  );
  if (!row.taken) {
    const retry = Math.max(1, Math.ceil((row.reset_at.getTime() - Date.now()) / 1000));
    throw catalogue.rateLimited(
      `Rate limit exceeded: at most ${limit} requests per minute`,
      `this call counts as ${hits + 1} requests`,
      'Wait the number of seconds in the Retry-After header, or send fewer records per call',
      { 'Retry-After': String(retry) },
    );
  }
}

/** What is left of `key`'s request limit in the current window (counted in Postgres). */
export async function requestsLeft(
  ctx: AppContext,
  key: string,
): Promise<{ limit: number; remaining: number; reset_at: string }> {
  const seen = await RequestLimit.of(ctx).store.get(key);
  const limit = ctx.config.rateLimitPerMinute;
  const live = seen && seen.resetTime.getTime() > Date.now();
  return {
    limit,
    remaining: live ? Math.max(0, limit - seen.totalHits) : limit,
    reset_at: (live ? seen.resetTime : new Date(Date.now() + WINDOW_MS)).toISOString(),
  };
}
