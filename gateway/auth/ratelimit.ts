import {
  ipKeyGenerator,
  rateLimit as expressRateLimit,
  type Options,
  type RateLimitRequestHandler,
  type Store,
} from 'express-rate-limit';
import type { Request, RequestHandler, Response } from 'express';
import type { Pool } from '../engine/pool.js';
import type { AppContext } from '../context.js';
import { catalogue, type ApiError } from '../engine/errors.js';
import { oneRow } from '../engine/invariant.js';

// Rate limits: TALLY_RATE_LIMIT_PER_MINUTE requests per minute per workspace
// token, counted across every surface together, or per client address where no token is known;
// and a stricter limit per address on failed authentications, to slow token guessing. The
// counters live in Postgres (tally.rate_limits), so every Tally process on the database
// enforces one limit.
//
// Each surface applies `rateLimit(ctx)` right after its authentication step, which sets
// res.locals.rateKey to `token:<workspace token id>` (bearerAuth from the JWT's `sub`, the
// exchange and MCP from the token lookup). The same key on every surface is what makes the
// limit one limit per token.

export const WINDOW_MS = 60_000;
/** Failed authentications per address and minute before that address is refused outright. */
export const FAILED_AUTH_LIMIT_PER_MINUTE = 10;

/**
 * An express-rate-limit store on the database: fixed windows, one round trip per hit (an
 * atomic upsert in tally.rate_limit_take). Keys are token ids and addresses, never secrets.
 */
export class PostgresRateLimitStore implements Store {
  readonly localKeys = false;
  private windowMs = WINDOW_MS;
  private limit: number | undefined;
  /** Hits taken from Postgres in a block and not yet handed out (limits of LEASE_MIN_LIMIT and more). */
  private readonly leases = new Map<string, Lease>();
  private readonly taking = new Map<string, Promise<unknown>>();

  constructor(
    private readonly db: Pool,
    readonly prefix: string,
  ) {}

  init(options: Options): void {
    this.windowMs = options.windowMs;
    this.limit = typeof options.limit === 'number' ? options.limit : undefined;
  }

  async increment(key: string): Promise<{ totalHits: number; resetTime: Date }> {
    if (this.limit === undefined || this.limit < LEASE_MIN_LIMIT) {
      // A low limit is counted exactly, hit by hit, across every process.
      const row = oneRow(
        await this.db<{ hits: number; reset_at: Date }[]>`
        SELECT hits, reset_at FROM tally.rate_limit_take(${this.prefix + key}, ${this.windowMs}, 1)`,
        'tally.rate_limit_take',
      );
      return { totalHits: row.hits, resetTime: row.reset_at };
    }
    // A high limit: hits are taken from Postgres in blocks (one round trip per block, not per
    // request) and handed out here. The database counts a block when it is taken, so the
    // limit is never exceeded; another process's unused block can refuse a client slightly
    // early, by at most 1% of what was left of its budget when the block was taken.
    for (;;) {
      const lease = this.leases.get(key);
      if (lease && lease.left > 0 && lease.resetTime.getTime() > Date.now()) {
        lease.left--;
        lease.hits++;
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

  /** A new block for `key`: returns the hit of this request when the window is over the limit. */
  private async take(
    key: string,
    previous: Lease | undefined,
  ): Promise<{ totalHits: number; resetTime: Date } | undefined> {
    const limit = this.limit!;
    const fresh = !previous || previous.resetTime.getTime() <= Date.now();
    const remaining = fresh ? limit : Math.max(0, limit - previous.hits);
    const n = Math.max(1, Math.min(LEASE_MAX, Math.floor(remaining / 100)));
    // Every request of this key waits for this one query: bounded, so that a query the driver
    // loses while Postgres restarts cannot hold them all (it answers 503, errors.ts).
    let timer: NodeJS.Timeout | undefined;
    const rows = await Promise.race([
      this.db<{ hits: number; reset_at: Date }[]>`
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
    // The block's first hit is this request's; the rest wait here.
    const first = row.hits - n + 1;
    if (first > limit) {
      this.leases.set(key, { left: 0, hits: row.hits, resetTime: row.reset_at });
      return { totalHits: first, resetTime: row.reset_at };
    }
    this.leases.set(key, { left: n - 1, hits: first, resetTime: row.reset_at });
    return { totalHits: first, resetTime: row.reset_at };
  }

  async decrement(key: string): Promise<void> {
    const lease = this.leases.get(key);
    if (lease && lease.resetTime.getTime() > Date.now() && this.limit !== undefined && this.limit >= LEASE_MIN_LIMIT) {
      lease.left++;
      lease.hits--;
      return;
    }
    await this.db`SELECT tally.rate_limit_undo(${this.prefix + key})`;
  }

  async resetKey(key: string): Promise<void> {
    this.leases.delete(key);
    await this.db`SELECT tally.rate_limit_reset(${this.prefix + key})`;
  }

  async get(key: string): Promise<{ totalHits: number; resetTime: Date } | undefined> {
    const [row] = await this.db<{ hits: number; reset_at: Date }[]>`
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
  /** The window's hits as this process counts them: the database's, less what is left. */
  hits: number;
  resetTime: Date;
}

/** The client address as a key; IPv6 addresses are grouped by /56, as one client holds many. */
const addressKey = (req: Request): string => `ip:${ipKeyGenerator(req.ip ?? 'unknown')}`;

function retryAfterSeconds(req: Request): number {
  const info = (req as Request & { rateLimit?: { resetTime?: Date } }).rateLimit;
  const ms = info?.resetTime ? info.resetTime.getTime() - Date.now() : WINDOW_MS;
  return Math.max(1, Math.ceil(ms / 1000));
}

function limiter(ctx: AppContext, prefix: string, overrides: Partial<Options>): RateLimitRequestHandler {
  return expressRateLimit({
    windowMs: WINDOW_MS,
    standardHeaders: 'draft-8',
    legacyHeaders: false,
    store: new PostgresRateLimitStore(ctx.db, prefix),
    retryAfter: retryAfterSeconds,
    // A store that fails (database down) is an error of the request, not a free pass.
    passOnStoreError: false,
    ...overrides,
  });
}

const requestLimiters = new WeakMap<AppContext, RateLimitRequestHandler>();

/**
 * The request limit: config.rateLimitPerMinute per workspace token (res.locals.rateKey set by
 * the authentication step before it), per client address without one. One limiter per
 * AppContext, so a surface mounting it twice cannot count a request twice.
 */
export function rateLimit(ctx: AppContext): RateLimitRequestHandler {
  let handler = requestLimiters.get(ctx);
  if (!handler) {
    handler = limiter(ctx, 'req:', {
      limit: ctx.config.rateLimitPerMinute,
      keyGenerator: (req: Request, res: Response) => {
        const key: unknown = res.locals.rateKey;
        return typeof key === 'string' && key.startsWith('token:') ? key : addressKey(req);
      },
      handler: (_req, _res, next) => {
        next(
          catalogue.rateLimited(
            `Rate limit exceeded: at most ${ctx.config.rateLimitPerMinute} requests per minute`,
            null,
            'Wait the number of seconds in the Retry-After header before sending more requests',
          ),
        );
      },
    });
    requestLimiters.set(ctx, handler);
  }
  return handler;
}

/**
 * A surface's authentication step followed by the request limit, in one handler: after a
 * successful authentication the request counts against its token (res.locals.rateKey); after
 * a failed one it counts against the client address and the authentication error is passed
 * on (or a 429 once the address is over the limit), so a flood of bad JWTs is limited too.
 * /rest/v1 and /api/v1 mount `limitAfter(ctx, bearerAuth(ctx))` before their routers.
 */
export function limitAfter(ctx: AppContext, authenticate: RequestHandler): RequestHandler {
  const limit = rateLimit(ctx);
  return (req, res, next) => {
    void authenticate(req, res, (authError?: unknown) => {
      if (authError === undefined || authError === null) return void limit(req, res, next);
      delete res.locals.rateKey;
      void limit(req, res, (limitError?: unknown) => next(limitError ?? authError));
    });
  };
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
 * The failed-authentication limit around a surface's workspace-token authentication (the
 * exchange, MCP): FAILED_AUTH_LIMIT_PER_MINUTE answers of 401 per client address and minute;
 * after that the address gets 429 before its token is even looked at, so guessing costs a
 * minute per few tries. The check, the lookup and the count are one database call per request
 * (tally.authenticate_token, through authenticateWorkspaceToken), so the limit is exact even
 * for guesses sent all at once; only failures count, so an agent's many concurrent calls are
 * never taken for guesses.
 */
export function failedAuthLimit(_ctx: AppContext, authenticate: RequestHandler): RequestHandler {
  return (req, res, next) => {
    res.locals.failedAuthKey = 'authfail:' + addressKey(req);
    return authenticate(req, res, next);
  };
}

/** The request limit's counters, for what a surface reports or charges beyond one request. */
const requestCounters = new WeakMap<AppContext, PostgresRateLimitStore>();
function requestCounter(ctx: AppContext): PostgresRateLimitStore {
  let store = requestCounters.get(ctx);
  if (!store) {
    store = new PostgresRateLimitStore(ctx.db, 'req:');
    requestCounters.set(ctx, store);
  }
  return store;
}

/**
 * Counts `hits` more requests of `key` (res.locals.rateKey) at once: a call that does the work
 * of many (an MCP batch import) costs what that many requests cost. Throws the 429 when they
 * do not fit in what is left of the window; the request itself was counted already.
 */
export async function takeRequests(ctx: AppContext, key: string, hits: number): Promise<void> {
  if (hits <= 0) return;
  const row = oneRow(
    await ctx.db<{ hits: number; reset_at: Date }[]>`
    SELECT hits, reset_at FROM tally.rate_limit_take(${'req:' + key}, ${WINDOW_MS}, ${hits})`,
    'tally.rate_limit_take',
  );
  if (row.hits > ctx.config.rateLimitPerMinute) {
    const retry = Math.max(1, Math.ceil((row.reset_at.getTime() - Date.now()) / 1000));
    throw catalogue.rateLimited(
      `Rate limit exceeded: at most ${ctx.config.rateLimitPerMinute} requests per minute`,
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
  const seen = await requestCounter(ctx).get(key);
  const limit = ctx.config.rateLimitPerMinute;
  const live = seen && seen.resetTime.getTime() > Date.now();
  return {
    limit,
    remaining: live ? Math.max(0, limit - seen.totalHits) : limit,
    reset_at: (live ? seen.resetTime : new Date(Date.now() + WINDOW_MS)).toISOString(),
  };
}
