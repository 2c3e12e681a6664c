import { errors, jwtVerify, SignJWT, type JWTPayload } from 'jose';
import { hash, randomUUID } from 'node:crypto';
import { ApiError, catalogue } from '../errors.js';

// Access tokens: HS256 JWTs. The current secret signs; the current and the previous one both
// verify, so the secret can be rotated without cutting clients off. Only HS256 is accepted
// (no `none`, no algorithm confusion).

const ISSUER = 'tally';
const AUDIENCE = 'tally';
export const ACCESS_TOKEN_TTL_SECONDS = 3600;

export interface JwtKeys {
  sign: Uint8Array;
  verify: Uint8Array[];
}

export function jwtKeys(secret: string, previous?: string): JwtKeys {
  const enc = new TextEncoder();
  const sign = enc.encode(secret);
  return { sign, verify: previous ? [sign, enc.encode(previous)] : [sign] };
}

export interface AccessClaims {
  role: string;
  workspace_id: string;
  scope: 'read' | 'write';
  /** The id of the workspace token the access token was exchanged for. */
  sub: string;
  /** That token's label, recorded with the changes made with it (the activity log). */
  token_name?: string;
}

export async function signAccessToken(
  keys: JwtKeys,
  claims: AccessClaims,
  ttlSeconds = ACCESS_TOKEN_TTL_SECONDS,
): Promise<string> {
  const { sub, ...rest } = claims;
  return new SignJWT({ ...rest })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(sub)
    .setJti(randomUUID())
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + ttlSeconds)
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .sign(keys.sign);
}

const jwtError = (kind: 'invalidCredential' | 'invalidClaims', message: string, hint: string | null = null): ApiError =>
  catalogue[kind](message, hint, {
    'WWW-Authenticate': `Bearer error="invalid_token", error_description="${message}"`,
  });

/**
 * Verifies a JWT and returns its claims, or throws PostgREST's JWT errors (401): PGRST301 for
 * one that cannot be decoded or whose signature is wrong, PGRST303 for failed claims (expired).
 */
export async function verifyJwt(keys: JwtKeys, token: string): Promise<JWTPayload> {
  const cache = verifiedOf(keys);
  const key = hash('sha256', token, 'base64');
  const hit = cache.get(key);
  if (hit !== undefined) {
    if (hit.until > Date.now()) {
      cache.delete(key); // least recently used first: a hit moves to the end
      cache.set(key, hit);
      return hit.payload;
    }
    cache.delete(key);
  }
  const payload = await verifyUncached(keys, token);
  // A client sends the same access token for up to an hour: verifying its signature again on
  // every request (a WebCrypto key import and an HMAC) was ~10% of a read's CPU. Successes
  // only, until the token expires (with verification's clock tolerance) and at most a few
  // minutes; revocation does not depend on this, the pre-request check reads it per request.
  const exp = (payload.exp as number) * 1000 + CLOCK_TOLERANCE_S * 1000;
  const until = Math.min(exp, Date.now() + VERIFIED_TTL_MS);
  if (until > Date.now()) {
    if (cache.size >= VERIFIED_MAX) cache.delete(cache.keys().next().value!);
    cache.set(key, { payload, until });
  }
  return payload;
}

const CLOCK_TOLERANCE_S = 5;
const VERIFIED_MAX = 10_000;
const VERIFIED_TTL_MS = 5 * 60_000;
/** Verified tokens per key set (so a rotation starts afresh): sha256(token) → claims, in LRU order. */
const verified = new WeakMap<JwtKeys, Map<string, { payload: JWTPayload; until: number }>>();
function verifiedOf(keys: JwtKeys): Map<string, { payload: JWTPayload; until: number }> {
  let m = verified.get(keys);
  if (!m) verified.set(keys, (m = new Map()));
  return m;
}

async function verifyUncached(keys: JwtKeys, token: string): Promise<JWTPayload> {
  if (token.split('.').length !== 3) {
    throw jwtError(
      'invalidCredential',
      'Expected 3 parts in JWT; got ' + token.split('.').length,
      token.startsWith('tally_ws_')
        ? 'This is a workspace token: exchange it for an access token at POST /api/v1/token first'
        : null,
    );
  }
  let lastError: unknown;
  for (const key of keys.verify) {
    try {
      // An access token without an expiry would be valid forever: `exp` is required.
      const { payload } = await jwtVerify(token, key, {
        algorithms: ['HS256'],
        clockTolerance: CLOCK_TOLERANCE_S,
        requiredClaims: ['exp'],
      });
      if (
        payload.aud !== undefined &&
        payload.aud !== AUDIENCE &&
        !(Array.isArray(payload.aud) && payload.aud.includes(AUDIENCE))
      ) {
        throw jwtError('invalidClaims', 'JWT not in audience');
      }
      return payload;
    } catch (err) {
      if (err instanceof ApiError) throw err;
      if (err instanceof errors.JWTExpired)
        throw jwtError('invalidClaims', 'JWT expired', 'Exchange the workspace token for a new access token');
      if (err instanceof errors.JWTClaimValidationFailed) {
        throw jwtError(
          'invalidClaims',
          `JWT claim "${err.claim}" is ${err.reason === 'missing' ? 'missing' : 'invalid'}`,
        );
      }
      lastError = err;
    }
  }
  if (lastError instanceof errors.JWSSignatureVerificationFailed)
    throw jwtError('invalidCredential', 'JWT signature does not match');
  if (lastError instanceof errors.JOSEAlgNotAllowed)
    throw jwtError('invalidCredential', 'JWT algorithm is not allowed; only HS256 is accepted');
  throw jwtError('invalidCredential', 'JWT cannot be decoded');
}
