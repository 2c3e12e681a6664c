import { errors, jwtVerify, SignJWT, type JWTPayload } from 'jose';
import { randomUUID } from 'node:crypto';
import { ApiError } from '../errors.js';

// Access tokens: HS256 JWTs. The current secret signs; the current and the previous one both
// verify, so the secret can be rotated without cutting clients off. Only HS256 is accepted
// (no `none`, no algorithm confusion).

export const ISSUER = 'tally';
export const AUDIENCE = 'tally';
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
}

export async function signAccessToken(keys: JwtKeys, claims: AccessClaims, ttlSeconds = ACCESS_TOKEN_TTL_SECONDS): Promise<string> {
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

const jwtError = (code: string, message: string, hint: string | null = null): ApiError =>
  new ApiError(401, code, message, null, hint, { 'WWW-Authenticate': `Bearer error="invalid_token", error_description="${message}"` });

/**
 * Verifies a JWT and returns its claims, or throws PostgREST's JWT errors (401): PGRST301 for
 * one that cannot be decoded or whose signature is wrong, PGRST303 for failed claims (expired).
 */
export async function verifyJwt(keys: JwtKeys, token: string): Promise<JWTPayload> {
  if (token.split('.').length !== 3) {
    throw jwtError('PGRST301', 'Expected 3 parts in JWT; got ' + token.split('.').length,
      token.startsWith('tally_ws_') ? 'This is a workspace token: exchange it for an access token at POST /api/v1/token first' : null);
  }
  let lastError: unknown;
  for (const key of keys.verify) {
    try {
      const { payload } = await jwtVerify(token, key, { algorithms: ['HS256'], clockTolerance: 5 });
      if (payload.aud !== undefined && payload.aud !== AUDIENCE && !(Array.isArray(payload.aud) && payload.aud.includes(AUDIENCE))) {
        throw jwtError('PGRST303', 'JWT not in audience');
      }
      return payload;
    } catch (err) {
      if (err instanceof ApiError) throw err;
      if (err instanceof errors.JWTExpired) throw jwtError('PGRST303', 'JWT expired', 'Exchange the workspace token for a new access token');
      if (err instanceof errors.JWTClaimValidationFailed) throw jwtError('PGRST303', `JWT claim "${err.claim}" is invalid`);
      lastError = err;
    }
  }
  if (lastError instanceof errors.JWSSignatureVerificationFailed) throw jwtError('PGRST301', 'JWT signature does not match');
  if (lastError instanceof errors.JOSEAlgNotAllowed) throw jwtError('PGRST301', 'JWT algorithm is not allowed; only HS256 is accepted');
  throw jwtError('PGRST301', 'JWT cannot be decoded');
}
