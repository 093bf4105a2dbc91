// Type-aware linting: floating promises and promise misuse are bugs in a proxy that must not crash;
// import cycles are forbidden so composition roots stay the only place that wires modules together.
import tseslint from 'typescript-eslint';
import importX, { createNodeResolver } from 'eslint-plugin-import-x';

export default tseslint.config(
  {
    ignores: ['node_modules/**', '.proxyfleet/**', 'charts/**', 'crds/**', 'loadtest/k6/**', 'coverage/**', 'bin/**', 'tools/**'],
  },
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.base],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { 'import-x': importX },
    settings: {
      'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.js'] })],
      'import-x/extensions': ['.ts', '.js'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      'no-restricted-properties': [
        'error',
        { object: 'process', property: 'env', message: 'Read configuration through the entrypoint config module.' },
      ],
    },
  },
  {
    // The only modules allowed to read the environment: config modules, tests and test harnesses.
    files: ['**/config.ts', '**/config/*.ts', '**/*.test.ts', 'test/**/*.ts', 'scripts/**/*.ts', 'loadtest/**/*.ts'],
    rules: { 'no-restricted-properties': 'off' },
  },
);
