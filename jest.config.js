// jest + ts-jest in ESM mode (jose, node-pg-migrate and the MCP SDK are ES modules only).
// Two projects: `unit` runs parse, plan and SQL compilation without a database (fast, for every
// save: npm run test:unit); `db` starts one real Postgres for the run (tests/harness) and gives
// each test file its own database.
const shared = {
  preset: 'ts-jest/presets/default-esm',
  testEnvironment: 'node',
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true }] },
  setupFiles: ['<rootDir>/tests/harness/quiet.mjs', '<rootDir>/tests/harness/test-ports.ts'],
};

export default {
  testTimeout: 60000,
  maxWorkers: 2,
  projects: [
    { ...shared, displayName: 'unit', roots: ['<rootDir>/tests/unit'], testMatch: ['**/*.test.ts'] },
    {
      ...shared,
      displayName: 'db',
      roots: ['<rootDir>/tests'],
      testMatch: ['**/*.test.ts'],
      testPathIgnorePatterns: ['/tests/unit/', '/tests/scale/'],
      globalSetup: '<rootDir>/tests/harness/global-setup.mjs',
      globalTeardown: '<rootDir>/tests/harness/global-teardown.mjs',
    },
  ],
};
