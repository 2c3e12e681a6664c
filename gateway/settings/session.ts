import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { CookieOptions, Request, Response } from 'express';

// Cookies and CSRF tokens of the settings page. The session cookie carries a random secret
// whose SHA-256 names the session in Postgres; the session's CSRF token is stored with it and
// must come back in every form. Before sign-in, the login form is protected by a
// double-submit token: a cookie of its own that the form must repeat.

const SESSION_COOKIE = 'tally_session';
const LOGIN_COOKIE = 'tally_login';
const COOKIE_PATH = '/settings';

/** 32 random bytes, base64url: 43 characters. */
export const newSecret = (): string => randomBytes(32).toString('base64url');
const looksLikeSecret = (value: string | undefined): value is string =>
  value !== undefined && /^[A-Za-z0-9_-]{43}$/.test(value);

export const secretHash = (secret: string): Buffer => createHash('sha256').update(secret, 'utf8').digest();

/** Compares two secrets in constant time (through their hashes, so lengths leak nothing). */
export function sameSecret(expected: string, given: unknown): boolean {
  if (typeof given !== 'string' || given.length === 0 || given.length > 200) return false;
  return timingSafeEqual(secretHash(expected), secretHash(given));
}

export function readCookie(req: Request, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) {
      try {
        return decodeURIComponent(part.slice(eq + 1).trim());
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

/** The session secret from the cookie, when it has the shape of one. */
export function sessionSecret(req: Request): string | undefined {
  const value = readCookie(req, SESSION_COOKIE);
  return looksLikeSecret(value) ? value : undefined;
}

const cookieOptions = (req: Request, maxAgeMs: number): CookieOptions => ({
  path: COOKIE_PATH,
  httpOnly: true,
  sameSite: 'strict',
  secure: req.secure,
  maxAge: maxAgeMs,
});

export function setSessionCookie(req: Request, res: Response, secret: string, expiresAt: Date): void {
  res.cookie(SESSION_COOKIE, secret, cookieOptions(req, Math.max(0, expiresAt.getTime() - Date.now())));
}

export function clearSessionCookie(req: Request, res: Response): void {
  res.clearCookie(SESSION_COOKIE, { ...cookieOptions(req, 0), maxAge: undefined });
}

/** The login form's double-submit token: the cookie's value, set now when there is none. */
export function loginToken(req: Request, res: Response): string {
  const existing = readCookie(req, LOGIN_COOKIE);
  if (looksLikeSecret(existing)) return existing;
  const token = newSecret();
  res.cookie(LOGIN_COOKIE, token, cookieOptions(req, 60 * 60 * 1000));
  return token;
}

export function validLoginToken(req: Request, given: unknown): boolean {
  const cookie = readCookie(req, LOGIN_COOKIE);
  return looksLikeSecret(cookie) && sameSecret(cookie, given);
}
