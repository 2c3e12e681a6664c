import { ipKeyGenerator, rateLimit as expressRateLimit, type Options, type RateLimitRequestHandler, type Store } from 'express-rate-limit';
import type { Request, RequestHandler, Response } from 'express';
import type { Sql } from 'postgres';
import type { AppContext } from '../context.js';
import { ApiError } from '../errors.js';

// Rate limits (SPEC §8; issue 5): TALLY_RATE_LIMIT_PER_MINUTE requests per minute per workspace
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
 * atomic upsert in tally.rate_limit_hit). Keys are token ids and addresses, never secrets.
 */
export class PostgresRateLimitStore implements Store {
  readonly localKeys = false;
  private windowMs = WINDOW_MS;

  constructor(private readonly db: Sql, readonly prefix: string) {}

  init(options: Options): void {
    this.windowMs = options.windowMs;
  }

  async increment(key: string): Promise<{ totalHits: number; resetTime: Date }> {
    const [row] = await this.db<{ hits: number; reset_at: Date }[]>`
      SELECT hits, reset_at FROM tally.rate_limit_hit(${this.prefix + key}, ${this.windowMs})`;
    return { totalHits: row.hits, resetTime: row.reset_at };
  }

  async decrement(key: string): Promise<void> {
    await this.db`SELECT tally.rate_limit_undo(${this.prefix + key})`;
  }

  async resetKey(key: string): Promise<void> {
    await this.db`SELECT tally.rate_limit_reset(${this.prefix + key})`;
  }

  async get(key: string): Promise<{ totalHits: number; resetTime: Date } | undefined> {
    const [row] = await this.db<{ hits: number; reset_at: Date }[]>`
      SELECT hits, reset_at FROM tally.rate_limit_get(${this.prefix + key})`;
    return row ? { totalHits: row.hits, resetTime: row.reset_at } : undefined;
  }
}

/** The client address as a key; IPv6 addresses are grouped by /56, as one client holds many. */
export const addressKey = (req: Request): string => `ip:${ipKeyGenerator(req.ip ?? 'unknown')}`;

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
const failureLimiters = new WeakMap<AppContext, RateLimitRequestHandler>();

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
        next(new ApiError(429, 'PT429', `Rate limit exceeded: at most ${ctx.config.rateLimitPerMinute} requests per minute`, null,
          'Wait the number of seconds in the Retry-After header before sending more requests'));
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

/**
 * The failed-authentication limit: FAILED_AUTH_LIMIT_PER_MINUTE answers of 401 per client
 * address and minute; after that the address gets 429 before its token is even looked at, so
 * guessing costs a minute per few tries. Mount it before the step that authenticates a
 * workspace token (the exchange, MCP). Successful requests give their hit back.
 */
export function failedAuthLimit(ctx: AppContext): RateLimitRequestHandler {
  let handler = failureLimiters.get(ctx);
  if (!handler) {
    handler = limiter(ctx, 'authfail:', {
      limit: FAILED_AUTH_LIMIT_PER_MINUTE,
      keyGenerator: (req: Request) => addressKey(req),
      skipSuccessfulRequests: true,
      requestWasSuccessful: (_req, res) => res.statusCode !== 401,
      identifier: 'failed-auth',
      handler: (_req, _res, next) => {
        next(new ApiError(429, 'PT429', 'Too many failed authentications from this address', null,
          'Wait the number of seconds in the Retry-After header, then check the workspace token'));
      },
    });
    failureLimiters.set(ctx, handler);
  }
  return handler;
}
