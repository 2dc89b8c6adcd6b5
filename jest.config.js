/** Jest runs the TypeScript sources through ts-jest; S3 tests share one moto server. */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { diagnostics: false }],
  },
  globalSetup: '<rootDir>/test/helpers/global-setup.ts',
  globalTeardown: '<rootDir>/test/helpers/global-teardown.ts',
  testTimeout: 60000,
  // Not in the temporary folder: a test run leaves nothing there.
  cacheDirectory: '<rootDir>/node_modules/.cache/jest',
  maxWorkers: 2,
};
