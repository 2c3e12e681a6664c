import type { ServerResponse } from 'node:http';
import type { AuthContext, GatewayCall } from '../engine/call.js';
import { TOKEN_CHECK } from '../config.js';
import { compile, ident, join, sql } from '../engine/sql.js';
import type { AppContext } from '../context.js';
import { catalogue, ApiError } from '../errors.js';
import { looksLikeWorkspaceToken, sameHash, sha256 } from '../secrets.js';
import { ACCESS_TOKEN_TTL_SECONDS } from './jwt.js';
import {
  addressRateKey,
  failedAuthKey,
  FAILED_AUTH_LIMIT_PER_MINUTE,
  limitRequest,
  tooManyFailures,
  WINDOW_MS,
} from './ratelimit.js';
import { oneRow } from '../engine/invariant.js';
import { Lru } from '../engine/lru.js';

// Authentication with a workspace token itself (tally_ws_…): the token exchange, and MCP, which
// carries the token in its URL. The database stores only SHA-256 hashes; the lookup is by hash
// (an index probe on a hash an attacker cannot steer says nothing about any stored secret) and
// the stored hash is then compared in constant time.

export type Scope = 'read' | 'write';

export interface WorkspaceToken {
  id: string;
  /** Its label, which the activity log records with the changes made with it. */
  name: string;
  workspaceId: string;
  scope: Scope;
  apiEnabled: boolean;
}

/** The database role a scope maps to: a read token's requests run as api_read, so Postgres refuses its writes. */
export const roleForScope = (scope: Scope): string => (scope === 'write' ? 'api_write' : 'api_read');

/** What a gateway call made with this token runs as (MCP); the same claims the exchange signs. */
export function workspaceTokenAuth(token: WorkspaceToken): AuthContext {
  const role = roleForScope(token.scope);
  // `exp` as an access token has it (the pre-request check requires one); the token itself is
  // checked again by that function on every call, so a long MCP session is not cut off by it.
  const exp = Math.floor(Date.now() / 1000) + ACCESS_TOKEN_TTL_SECONDS;
  // `surface`: the activity log records which surface made a change.
  return {
    role,
    claims: {
      role,
      workspace_id: token.workspaceId,
      scope: token.scope,
      sub: token.id,
      token_name: token.name,
      exp,
      surface: 'mcp',
    },
  };
}

const REALM = { 'WWW-Authenticate': 'Bearer realm="tally"' };

const missingToken = (): ApiError =>
  catalogue.noCredential(
    'No workspace token found in request',
    'Send it as "Authorization: Bearer tally_ws_…", in the x-api-token header, or as {"token": …} in a JSON body',
    REALM,
  );

const invalidToken = (): ApiError =>
  catalogue.invalidCredential(
    'Invalid workspace token',
    'Check the token (tally token list shows the tokens of a workspace)',
    REALM,
  );

const revokedToken = (): ApiError =>
  catalogue.invalidCredential(
    'The workspace token has been revoked',
    'Ask a workspace owner for a new workspace token',
    REALM,
  );

export const apiSwitchedOff = (): ApiError => catalogue.apiSwitchedOff();

type TokenRow = {
  token_id: string | null;
  workspace_id: string;
  scope: Scope;
  token_hash: Buffer;
  revoked: boolean;
  api_enabled: boolean;
  /** The token's label, read in the lookup's statement (tally.token_label). */
  label: string | null;
};

/**
 * Looks a presented workspace token up. Throws 401 for a missing, malformed, unknown or revoked
 * one; the API switch is left to the caller (authenticateWorkspaceRequest), after the rate limit
 * has counted the request against the token. Marks the token used (at most once a minute, in SQL).
 *
 * With `from` (the client address), the failed-authentication limit applies: the check, the
 * lookup and the count of a failure are one database call that decides the guesses of one
 * address one after the other (tally.authenticate_token), and an address over the limit gets
 * a 429 before its token is looked at. That call counts against the address's share of the
 * pool, so one address's guesses queue behind each other, not before everyone's requests.
 */
export async function findWorkspaceToken(
  ctx: AppContext,
  presented: string | undefined,
  from?: { address: string | undefined },
): Promise<WorkspaceToken> {
  // No token, or a value that cannot be one (an unset shell variable, the README's
  // placeholder, a truncated paste), is no guess: refused without a database call and not
  // counted against the address, so a newcomer's slips do not lock them out.
  if (presented === undefined || presented === '') throw missingToken();
  if (!looksLikeWorkspaceToken(presented)) throw invalidToken();
  const hash = sha256(presented);
  let row: TokenRow | undefined;
  if (from !== undefined) {
    const r = oneRow(
      await ctx.db.for(addressRateKey(from.address))<(TokenRow & { limited: boolean; reset_at: Date })[]>`
      SELECT limited, reset_at, token_id, workspace_id, scope, token_hash, revoked, api_enabled,
             tally.token_label(token_id) AS label
        FROM tally.authenticate_token(${hash}, ${failedAuthKey(from.address)}, ${FAILED_AUTH_LIMIT_PER_MINUTE}, ${WINDOW_MS})`,
      'tally.authenticate_token',
    );
    if (r.limited) throw tooManyFailures(r.reset_at);
    row = r.token_id === null ? undefined : r;
  } else {
    [row] = await ctx.db<TokenRow[]>`
      SELECT token_id, workspace_id, scope, token_hash, revoked, api_enabled, tally.token_label(token_id) AS label
        FROM tally.exchange_token(${hash})`;
  }
  if (!row || !sameHash(row.token_hash, hash)) throw invalidToken();
  if (row.revoked) throw revokedToken();
  // The label goes into the claims (the activity log's token_name): a trigger on a Citus worker
  // cannot read the tokens table. It comes with the lookup's row, not in a round trip of its own.
  return {
    id: row.token_id!,
    name: row.label ?? '',
    workspaceId: row.workspace_id,
    scope: row.scope,
    apiEnabled: row.api_enabled,
  };
}

/**
 * The one workspace token of the values a request presented (header, query, body): two
 * different ones are refused (401), since which was meant cannot be known. With none shaped
 * like a workspace token, the first value presented fails the lookup as malformed (401), and no
 * value at all is a missing token (401).
 */
export function oneWorkspaceToken(candidates: string[]): string | undefined {
  const shaped = [...new Set(candidates.filter(looksLikeWorkspaceToken))];
  if (shaped.length > 1) {
    throw catalogue.invalidCredential(
      'Two different workspace tokens were sent',
      'Send the workspace token in one place only',
      { 'WWW-Authenticate': 'Bearer realm="tally"' },
    );
  }
  return shaped[0] ?? candidates.find((c) => c !== '');
}

/** A failure of the request's own making (two tokens sent): counted like a bad token. */
async function countFailure(ctx: AppContext, address: string | undefined): Promise<void> {
  const r = oneRow(
    await ctx.db.for(addressRateKey(address))<{ limited: boolean; reset_at: Date }[]>`
    SELECT limited, reset_at FROM tally.authenticate_token(NULL, ${failedAuthKey(address)}, ${FAILED_AUTH_LIMIT_PER_MINUTE}, ${WINDOW_MS})`,
    'tally.authenticate_token',
  );
  if (r.limited) throw tooManyFailures(r.reset_at);
}

export interface TokenCaller {
  token: WorkspaceToken;
  /** What its gateway calls run as. */
  auth: AuthContext;
  /** `token:<id>`, the key bearer auth derives from a JWT's `sub`: one token, one rate limit on every surface. */
  rateKey: string;
}

/** How long a token found valid is taken on trust: exchange_token marks a token used once a minute too. */
const RECENT_TOKEN_MS = 60_000;
const RECENT_TOKENS = 10_000;

/**
 * The check of a token taken on trust, in the transaction of each of its gateway calls
 * (AuthContext.verify): tally.check_request() refuses a revoked token, a foreign workspace and a
 * switched-off API with the statuses of the lookup, whatever the pre-request function is (the
 * engine runs it once where the pre-request function is this very check, the default).
 */
const TOKEN_CHECK_STATEMENT = compile(sql`SELECT ${join(TOKEN_CHECK.split('.').map(ident), sql`.`)}()`);

/**
 * Workspace tokens this process found valid in the last minute, by hash: MCP's tool calls skip
 * the lookup (a round trip and a lock per client address) for them, and the token is checked
 * in the transaction of each gateway call instead (TOKEN_CHECK_STATEMENT). Only
 * serveWorkspaceRequest takes a token from here, and it confirms by the lookup, before the
 * answer goes out, any request no such check passed in: revocation and the switch act on the
 * next request. Only a hash that was a valid token is held, so a guess never skips the
 * failed-authentication limit; a held token from an address blocked for failures is answered.
 */
export class RecentTokens {
  private readonly tokens = new Lru<string, { token: WorkspaceToken; until: number }>(RECENT_TOKENS);

  recall(presented: string): WorkspaceToken | undefined {
    const held = this.tokens.get(keyOf(presented));
    if (held && held.until > Date.now()) return held.token;
    return undefined;
  }

  remember(presented: string, token: WorkspaceToken): void {
    this.tokens.set(keyOf(presented), { token, until: Date.now() + RECENT_TOKEN_MS });
  }

  forget(presented: string): void {
    this.tokens.delete(keyOf(presented));
  }
}

/** RecentTokens' key of a presented token: its hash, so the process holds no token itself. */
function keyOf(presented: string): string {
  return sha256(presented).toString('base64');
}

/** The token a request presents (`extract`); two tokens sent count as a guess, no token at all does not. */
async function presentedToken(
  ctx: AppContext,
  address: string | undefined,
  extract: () => string | undefined,
): Promise<string | undefined> {
  try {
    return extract();
  } catch (err) {
    if (err instanceof ApiError && err.code === 'PGRST301') await countFailure(ctx, address);
    throw err;
  }
}

/** The token looked up (counted against the address's failures), rate limited, then the API switch. */
async function lookedUp(
  ctx: AppContext,
  res: ServerResponse,
  address: string | undefined,
  presented: string | undefined,
  identified: ((auth: AuthContext) => void) | undefined,
  recent?: RecentTokens,
): Promise<TokenCaller> {
  const token = await findWorkspaceToken(ctx, presented, { address });
  if (token.apiEnabled && presented !== undefined) recent?.remember(presented, token);
  const rateKey = `token:${token.id}`;
  const auth = workspaceTokenAuth(token);
  identified?.(auth);
  await limitRequest(ctx, res, rateKey, address);
  if (!token.apiEnabled) throw apiSwitchedOff();
  return { token, auth, rateKey };
}

/**
 * The checks of a request that presents a workspace token itself (the exchange), in this
 * order: the failed-authentication limit of the client address (a blocked address is refused
 * before its token is looked at), the lookup (401 for a missing, unknown or revoked token, a
 * failure counted against the address), the request limit keyed by the token (its headers set
 * on `res`), then the API switch (403). `extract` finds the token in the request; a 401 it
 * throws (two tokens sent) counts as a failure too. `identified` learns the caller as soon as
 * its token is found, so that the request log names the workspace of a request the limit or
 * the API switch refuses.
 */
export async function authenticateWorkspaceRequest(
  ctx: AppContext,
  res: ServerResponse,
  address: string | undefined,
  extract: () => string | undefined,
  { identified }: { identified?: (auth: AuthContext) => void } = {},
): Promise<TokenCaller> {
  const presented = await presentedToken(ctx, address, extract);
  return lookedUp(ctx, res, address, presented, identified);
}

/**
 * A request of a workspace token (MCP) served by `serve`, which answers it with gateway calls
 * through the `call` it is given. A token `recent` holds skips the lookup and the address's
 * failed-authentication limit (it was valid a moment ago, so its check is no guess): its calls
 * run with the token's check in their own transaction, and unless one of them passed it, the
 * token is looked up after `serve` and before anything is answered; the lookup's refusal wins
 * over whatever `serve` came to. There is no other way to use a held token, so no surface can
 * answer one it did not confirm. Any other token is authenticated as
 * authenticateWorkspaceRequest does, and remembered.
 */
export async function serveWorkspaceRequest<T>(
  ctx: AppContext,
  res: ServerResponse,
  address: string | undefined,
  extract: () => string | undefined,
  { call, recent, identified }: { call: GatewayCall; recent: RecentTokens; identified?: (auth: AuthContext) => void },
  serve: (caller: TokenCaller, call: GatewayCall) => Promise<T>,
): Promise<T> {
  const presented = await presentedToken(ctx, address, extract);
  const trusted = presented !== undefined ? recent.recall(presented) : undefined;
  if (!trusted || presented === undefined) {
    return serve(await lookedUp(ctx, res, address, presented, identified, recent), call);
  }
  const rateKey = `token:${trusted.id}`;
  const auth: AuthContext = { ...workspaceTokenAuth(trusted), verify: TOKEN_CHECK_STATEMENT };
  identified?.(auth);
  const confirm = async () => {
    recent.forget(presented);
    const token = await findWorkspaceToken(ctx, presented);
    if (!token.apiEnabled) throw apiSwitchedOff();
    recent.remember(presented, token);
  };
  try {
    await limitRequest(ctx, res, rateKey, address);
  } catch (err) {
    await confirm(); // a revoked token is a 401 before it is a 429, as on the lookup's path
    throw err;
  }
  let verified = false;
  const checked: GatewayCall = async (req, as) => {
    const answer = await call(req, as);
    if (as === auth && answer.verified === true) verified = true;
    return answer;
  };
  try {
    return await serve({ token: trusted, auth, rateKey }, checked);
  } finally {
    if (!verified) await confirm();
  }
}
