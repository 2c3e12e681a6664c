import type { Pool } from '../engine/pool.js';
import { catalogue } from '../engine/errors.js';
import { sameHash, sha256 } from '../secrets.js';
import { oneRow } from '../engine/invariant.js';

// The `apikey` header of the direct table interface: a publishable (public client) key, from
// TALLY_PUBLISHABLE_KEYS or the database. It identifies a client application, not a user, so
// a short positive cache is enough: a revoked key stops within KEY_CACHE_MS.

const KEY_CACHE_MS = 10_000;

export class ApiKeys {
  private readonly configured: Buffer[];
  private readonly cache = new Map<string, number>(); // hash (hex) -> valid until (ms)

  constructor(
    private readonly db: Pool,
    configuredKeys: string[],
  ) {
    this.configured = configuredKeys.map(sha256);
  }

  /** Throws PostgREST-style 401s for a missing or unknown key. */
  async check(apikey: string | undefined): Promise<void> {
    if (apikey === undefined || apikey === '') {
      throw catalogue.invalidCredential(
        'No API key found in request',
        'Send your publishable key in the apikey header',
        {},
      );
    }
    const hash = sha256(apikey);
    if (this.configured.some((k) => sameHash(k, hash))) return;
    const hex = hash.toString('hex');
    const until = this.cache.get(hex);
    if (until !== undefined && until > Date.now()) return;
    const { active } = oneRow(
      await this.db<{ active: boolean }[]>`SELECT tally.publishable_key_active(${hash}) AS active`,
      'tally.publishable_key_active',
    );
    if (!active) {
      this.cache.delete(hex);
      throw catalogue.invalidCredential('Invalid API key', 'Double check your publishable key (tally key list)', {});
    }
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(hex, Date.now() + KEY_CACHE_MS);
  }
}
