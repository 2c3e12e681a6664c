import type { Pool } from '../engine/pool.js';
import { catalogue } from '../errors.js';
import { Lru } from '../engine/lru.js';
import { sameHash, sha256 } from '../secrets.js';
import { oneRow } from '../engine/invariant.js';

// The `apikey` header of the direct table interface: a publishable (public client) key, from
// TALLY_PUBLISHABLE_KEYS or the database. It identifies a client application, not a user, so
// a short cache of what the database answered is enough: a revoked key stops within
// KEY_CACHE_MS, and a key refused once (unknown, revoked) is refused again for as long without
// asking the database again, so a client repeating a wrong key costs no statement per request.
// A new key is accepted at once, unless it was sent, and refused, in the seconds before it was made.

const KEY_CACHE_MS = 10_000;

/**
 * Keys whose SHA-256 is kept, by the key as sent: every request sends its key, and hashing it
 * (2-3 µs) was the largest cost of the check. At most this many, of at most HASHED_KEY_CHARS
 * characters each (a publishable key has 49): at most ~256 kB, whatever clients send.
 */
const HASHED_KEYS = 1000;
const HASHED_KEY_CHARS = 128;

/** A key's hash, and the hash in hex (the cache's key of what the database said). */
interface Hashed {
  hash: Buffer;
  hex: string;
}

/** What the database said of a key (by hash): accepted or not, until when that holds. */
interface Known {
  active: boolean;
  until: number;
}

export class ApiKeys {
  private readonly configured: Buffer[];
  private readonly known = new Lru<string, Known>(10_000);
  private readonly hashed = new Lru<string, Hashed>(HASHED_KEYS);

  constructor(
    private readonly db: Pool,
    configuredKeys: string[],
  ) {
    this.configured = configuredKeys.map(sha256);
  }

  /**
   * Throws PostgREST-style 401s for a missing or unknown key. A key this process has no recent
   * answer for is looked up for `client` (a pool key: the statement counts against its share),
   * after `beforeLookup`, which may refuse the request first (an address over its limit).
   */
  async check(apikey: string | undefined, client?: { poolKey: string; beforeLookup?: () => void }): Promise<void> {
    if (apikey === undefined || apikey === '') {
      throw catalogue.invalidCredential(
        'No API key found in request',
        'Send your publishable key in the apikey header',
        {},
      );
    }
    const { hash, hex } = this.hashOf(apikey);
    if (this.configured.some((k) => sameHash(k, hash))) return;
    let known = this.known.get(hex);
    if (known === undefined || known.until <= Date.now()) {
      client?.beforeLookup?.();
      const lookup = client ? this.db.for(client.poolKey) : this.db;
      const { active } = oneRow(
        await lookup<{ active: boolean }[]>`SELECT tally.publishable_key_active(${hash}) AS active`,
        'tally.publishable_key_active',
      );
      known = { active, until: Date.now() + KEY_CACHE_MS };
      this.known.set(hex, known);
    }
    if (!known.active)
      throw catalogue.invalidCredential('Invalid API key', 'Double check your publishable key (tally key list)', {});
  }

  /** The key's hash, kept for a key of at most HASHED_KEY_CHARS characters (see HASHED_KEYS). */
  private hashOf(apikey: string): Hashed {
    let hashed = this.hashed.get(apikey);
    if (hashed === undefined) {
      const hash = sha256(apikey);
      hashed = { hash, hex: hash.toString('hex') };
      if (apikey.length <= HASHED_KEY_CHARS) this.hashed.set(apikey, hashed);
    }
    return hashed;
  }

  /** How many keys' hashes are kept (at most HASHED_KEYS). */
  get hashedKeys(): number {
    return this.hashed.size;
  }
}
