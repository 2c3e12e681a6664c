import { hash, randomInt, timingSafeEqual } from 'node:crypto';

// Workspace tokens (tally_ws_…) and publishable keys (tally_pk_…): a prefix and 40 random
// base62 characters (~238 bits). Only their SHA-256 is stored.

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function randomBase62(length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += BASE62[randomInt(62)];
  return out;
}

const TOKEN_PREFIX = 'tally_ws_';
const KEY_PREFIX = 'tally_pk_';

export const newWorkspaceToken = (): string => TOKEN_PREFIX + randomBase62(40);
export const newPublishableKey = (): string => KEY_PREFIX + randomBase62(40);

export function sha256(secret: string): Buffer {
  return hash('sha256', secret, 'buffer'); // one call, no Hash object: half the cost on every request
}

/** Constant-time comparison of two hashes (or any equal-length secrets). */
export function sameHash(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The shape of a workspace token, checked before any database work. */
export const looksLikeWorkspaceToken = (value: string): boolean => /^tally_ws_[0-9A-Za-z]{32,128}$/.test(value);
