// jest + ts-jest in ESM mode (jose, node-pg-migrate and the MCP SDK are ES modules only).
// The harness starts one real Postgres for the run; each test file gets its own database.
export default {
  preset: 'ts-jest/presets/default-esm',
  testEnvironment: 'node',
  roots: ['<rootDir>/tests'],
  testMatch: ['**/*.test.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true }] },
  setupFiles: ['<rootDir>/tests/harness/quiet.mjs'],
  globalSetup: '<rootDir>/tests/harness/global-setup.mjs',
  globalTeardown: '<rootDir>/tests/harness/global-teardown.mjs',
  testTimeout: 60000,
  maxWorkers: 2,
};
