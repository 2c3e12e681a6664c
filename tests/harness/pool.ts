import type { Lease, Pool } from '../../gateway/engine/pool.js';

/**
 * Every slot of the server's pool, held: keyless work may take only the reserved slots and a
 * share more, so the shared slots are taken for keys of their own, one each, and the reserved
 * ones keyless. Release the leases to give them back.
 */
export function holdEverySlot(pool: Pool, reserved: number): Promise<Lease[]> {
  const { size } = pool.stats();
  return Promise.all(
    Array.from({ length: size }, (_, i) => (i < size - reserved ? pool.reserve(`held:${i}`) : pool.reserve())),
  );
}
