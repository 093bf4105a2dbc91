// jest runs the TypeScript sources as native ESM, transformed by swc (docs/adr/0001).
// Three projects, so a run can pick its cost (`npm test -- --selectProjects unit`):
//   unit         *.test.ts that are not *.int.test.ts: no database, no processes; seconds
//   integration  *.int.test.ts: real PostgreSQL (one template database per run), sockets, processes
//   kube         the operator's and the chart's tests: a real kube-apiserver and etcd (and helm)
//   e2e          test/e2e/*.e2e.test.ts: the image and the chart on the one-node cluster of
//                `npm run cluster` (brought up by the test if it is not running; minutes)
/** @type {import('jest').Config} */
const common = {
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
  testPathIgnorePatterns: ['/node_modules/', '/.proxyfleet/'],
  modulePathIgnorePatterns: ['<rootDir>/.proxyfleet/'],
};
const KUBE = ['<rootDir>/controllers/**/*.int.test.ts', '<rootDir>/test/kube/**/*.int.test.ts'];
// A project's global setup runs only when one of its tests is selected: unit runs need no database.
const database = {
  globalSetup: '<rootDir>/test/global-setup.ts',
  globalTeardown: '<rootDir>/test/global-teardown.ts',
};

/** @type {import('jest').Config} */
export default {
  projects: [
    {
      ...common,
      displayName: 'unit',
      testMatch: ['<rootDir>/**/*.test.ts'],
      testPathIgnorePatterns: [
        ...common.testPathIgnorePatterns,
        '\\.int\\.test\\.ts$',
        '\\.e2e\\.test\\.ts$',
      ],
    },
    {
      ...common,
      ...database,
      displayName: 'integration',
      testMatch: ['<rootDir>/**/*.int.test.ts'],
      testPathIgnorePatterns: [
        ...common.testPathIgnorePatterns,
        '<rootDir>/controllers/',
        '<rootDir>/test/kube/',
      ],
    },
    { ...common, ...database, displayName: 'kube', testMatch: KUBE },
    // One file, steps in order on one release; up to 15 minutes on a cold cluster.
    { ...common, displayName: 'e2e', testMatch: ['<rootDir>/test/e2e/**/*.e2e.test.ts'] },
  ],
  watchPathIgnorePatterns: ['<rootDir>/.proxyfleet/'],
  reporters: ['default', '<rootDir>/test/summary-reporter.js'],
  testTimeout: 30_000,
  // Integration tests share one PostgreSQL server; two workers fit this 2-core machine.
  maxWorkers: 2,
};
