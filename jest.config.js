// jest runs the TypeScript sources as native ESM, transformed by swc (docs/adr/0001).
/** @type {import('jest').Config} */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.ts$': [
      '@swc/jest',
      {
        jsc: { parser: { syntax: 'typescript' }, target: 'es2022' },
        module: { type: 'es6' },
      },
    ],
  },
  testMatch: ['<rootDir>/**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/.proxyfleet/'],
  modulePathIgnorePatterns: ['<rootDir>/.proxyfleet/'],
  watchPathIgnorePatterns: ['<rootDir>/.proxyfleet/'],
  globalSetup: '<rootDir>/test/global-setup.ts',
  globalTeardown: '<rootDir>/test/global-teardown.ts',
  reporters: ['default', '<rootDir>/test/summary-reporter.js'],
  testTimeout: 30_000,
  // Integration tests share one PostgreSQL server; two workers fit this 2-core machine.
  maxWorkers: 2,
};
