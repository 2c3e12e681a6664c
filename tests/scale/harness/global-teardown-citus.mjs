// Stops the cluster global-setup-citus.mjs started.
export default async function globalTeardown() {
  await globalThis.__TALLY_CITUS__?.stop();
}
