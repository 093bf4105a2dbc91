// Type-aware linting (typescript-eslint recommendedTypeChecked): floating promises and promise misuse are bugs in a proxy that must not crash;
// import cycles are forbidden so composition roots stay the only place that wires modules together.
import tseslint from 'typescript-eslint';
import importX, { createNodeResolver } from 'eslint-plugin-import-x';

/** The trees whose imports are bounded (common/ is bounded too: it imports none of the others). */
const BOUNDED = ['api', 'gateway', 'worker', 'controllers', 'common'];

export default tseslint.config(
  {
    ignores: [
      'node_modules/**',
      '.proxyfleet/**',
      'charts/**',
      'crds/**',
      'loadtest/k6/**',
      'coverage/**',
      'bin/**',
      'tools/**',
    ],
  },
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.recommendedTypeChecked],
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
      // `_next` (Express needs four parameters to see an error handler), `{ secret: _, ...rest }`.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      // Boundaries: each component imports common/ and its own tree only; common/ imports none of
      // them. dev/ (the all-in-one composition root), loadtest/ and the tests may import anything.
      'import-x/no-restricted-paths': [
        'error',
        {
          zones: BOUNDED.map((target) => ({
            target: `./${target}`,
            from: ['api', 'gateway', 'worker', 'controllers', 'dev', 'loadtest', 'test']
              .filter((from) => from !== target)
              .map((from) => `./${from}`),
            message: `${target}/ imports only common/ and its own tree (shared code belongs in common/)`,
          })),
        },
      ],
      'no-restricted-properties': [
        'error',
        {
          object: 'process',
          property: 'env',
          message: 'Read configuration through the entrypoint config module.',
        },
      ],
    },
  },
  {
    // Tests read parsed JSON bodies (`res.body.proxies[0]`) and mock with loose shapes all the
    // time; typing every response in a test buys nothing the assertion does not already check.
    // The no-unsafe-* rules therefore apply to source files only.
    files: ['**/*.test.ts', 'test/**/*.ts'],
    rules: {
      // Tests and test harnesses may import whatever they exercise.
      'import-x/no-restricted-paths': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      // Test doubles implement async interfaces without awaiting anything.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    // The only modules allowed to read the environment: config modules, tests and test harnesses.
    files: [
      '**/config.ts',
      '**/config/*.ts',
      '**/*.test.ts',
      'test/**/*.ts',
      'scripts/**/*.ts',
      'loadtest/**/*.ts',
    ],
    rules: { 'no-restricted-properties': 'off' },
  },
);
