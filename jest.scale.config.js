// The scale suite (`npm run test:scale`): Tally on what one machine's embedded Postgres is not —
// a Citus cluster, PgBouncer in transaction mode, several processes. Each file starts (and
// stops, also on failure) the servers it needs from tests/scale/harness/, and says in one line
// what it lacks when the machine has no Citus or PgBouncer. Files run one at a time: each
// starts a cluster of its own and the machine has two cores.
export default {
  preset: 'ts-jest/presets/default-esm',
  testEnvironment: 'node',
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true }] },
  setupFiles: ['<rootDir>/tests/harness/quiet.mjs'],
  roots: ['<rootDir>/tests'],
  testMatch: ['**/tests/scale/**/*.test.ts'],
  testTimeout: 300000,
  maxWorkers: 1,
};
