// The scale suite (`npm run test:scale`): Tally on what one machine's embedded Postgres is not —
// a Citus cluster, PgBouncer in transaction mode, several processes. Files run one at a time:
// each starts servers of its own and the machine has two cores. Without Citus the run stops
// with one line saying what is missing (tests/scale/harness/global-setup.mjs).
//
// Two projects:
// - `scale`: tests/scale/*.test.ts; each file starts (and stops, also on failure) the servers
//   it needs from tests/scale/harness/.
// - `on-citus`: files of the main suite (isolation, reads, writes, access, MCP, live lists) run
//   unchanged against Tally on a Citus coordinator with two workers, which the project's
//   global setup starts; each file gets its own database on it (tests/harness/db.ts).
const shared = {
  preset: 'ts-jest/presets/default-esm',
  testEnvironment: 'node',
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true }] },
  setupFiles: ['<rootDir>/tests/harness/quiet.mjs', '<rootDir>/tests/harness/test-ports.ts'],
};

/** The main suite's files that run on Citus too: every access file among them. */
const ON_CITUS = [
  'isolation',
  'rest-read',
  'rest-write',
  'access-exchange',
  'access-keys',
  'mcp',
  'lookups',
  'activity',
  'idempotency',
  'access-jwt',
  'access-ratelimit',
  'access-scopes',
  'access-surfaces',
  'access-privilege',
  'access-search-path',
  'activity-token-name',
  'wrapper-activity',
  'wrapper-etag',
  'sql-definitions',
  'budgets',
];

export default {
  testTimeout: 300000,
  maxWorkers: 1,
  projects: [
    {
      ...shared,
      displayName: 'scale',
      roots: ['<rootDir>/tests/scale'],
      testMatch: ['**/*.test.ts'],
      globalSetup: '<rootDir>/tests/scale/harness/global-setup.mjs',
    },
    {
      ...shared,
      displayName: 'on-citus',
      roots: ['<rootDir>/tests'],
      testMatch: ON_CITUS.map((name) => `<rootDir>/tests/${name}.test.ts`),
      setupFilesAfterEnv: ['<rootDir>/tests/scale/harness/on-citus.ts'],
      globalSetup: '<rootDir>/tests/scale/harness/global-setup-citus.mjs',
      globalTeardown: '<rootDir>/tests/scale/harness/global-teardown-citus.mjs',
    },
  ],
};
