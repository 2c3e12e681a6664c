import { rm } from 'node:fs/promises';

// Stops the Postgres that global-setup.mjs started (none with TEST_DATABASE_URL).
export default async function globalTeardown() {
  const state = globalThis.__TALLY_PG__;
  if (!state) return;
  await state.pg.stop();
  await rm(state.dir, { recursive: true, force: true });
}
