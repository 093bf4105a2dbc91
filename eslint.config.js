// Type-aware linting (typescript-eslint recommendedTypeChecked): floating promises and promise misuse are bugs in a proxy that must not crash;
// import cycles (type-only ones included) are forbidden so composition roots stay the only place that wires modules together;
// imports point one way (docs/adr/0062): between processes, between the API's features, and into shared code through the import
// roots (#common/, #test/, and #api/ once an import leaves its folder of api/src/, docs/adr/0099).
import { readdirSync } from 'node:fs';
import path from 'node:path';
import tseslint from 'typescript-eslint';
import importX, { createNodeResolver } from 'eslint-plugin-import-x';
import noCycle from './scripts/lint/no-cycle.js';
import { apiImportRootRule } from './scripts/lint/api-import-root.js';

/** The repository's own rules (scripts/lint/). */
const proxyfleet = {
  meta: { name: 'proxyfleet' },
  rules: { ...noCycle.rules, 'api-import-root': apiImportRootRule },
};
/** The trees whose imports are bounded (common/ is bounded too: it imports none of the others). */
const BOUNDED = ['api', 'gateway', 'worker', 'controllers', 'common'];
/** Trees that may import anything: dev/ (the all-in-one composition root), load tests and tests. */
const UNBOUNDED = ['dev', 'loadtest', 'test'];
const MODULES = 'api/src/modules';
/** Features that compose the others; no feature imports them. */
const COMPOSERS = ['admin', 'dashboard'];
const PAGES = `${MODULES}/dashboard/pages`;

const folders = (dir) => {
  try {
    return readdirSync(dir, { withFileTypes: true }).flatMap((d) => (d.isDirectory() ? [d.name] : []));
  } catch {
    return [];
  }
};
const files = (dir) => {
  try {
    return readdirSync(dir).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'));
  } catch {
    return [];
  }
};

/**
 * File size (docs/style.md "Shape"): a source file holds one concern, and one concern fits in
 * SOURCE_MAX_LINES lines; tests, test support and load tests may run to TEST_MAX_LINES (a table of
 * cases is long by nature); generated files are not capped. Lines as `wc -l` counts them.
 */
export const SOURCE_MAX_LINES = 400;
export const TEST_MAX_LINES = 600;
/**
 * Source files allowed past SOURCE_MAX_LINES (up to TEST_MAX_LINES), each with why and the seam it
 * is to be cut at. None today: the last ones (the admin CLI, the Proxies and Sub-users pages) were
 * cut at their seams. An entry goes when its file is cut; test/lint/size.test.ts fails on an entry
 * whose file no longer needs it, and names the list's entries so that adding one is seen.
 */
export const SIZE_EXCEPTIONS = {};

/** A zone of import-x/no-restricted-paths; none when nothing is forbidden. */
const zone = (target, from, message) =>
  from.length ? [{ target: `./${target}`, from: from.map((f) => `./${f}`), message }] : [];

/**
 * The import zones, generated from the folders so a new feature or page is covered without
 * editing this file: each process imports common/ and its own tree; a feature reaches another
 * through its service, repo or schemas, never its routes (routes.ts, or the one file per route
 * in routes/); no feature imports admin/ or
 * dashboard/; api/src/http/ imports no feature; a dashboard page imports no other page.
 */
export function importZones(root) {
  const features = folders(path.join(root, MODULES));
  const pages = files(path.join(root, PAGES));
  return [
    ...BOUNDED.flatMap((target) =>
      zone(
        target,
        [...BOUNDED, ...UNBOUNDED].filter((from) => from !== target && from !== 'common'),
        `${target}/ imports only common/ and its own tree (shared code belongs in common/)`,
      ),
    ),
    ...features.flatMap((feature) => {
      const others = features.filter((other) => other !== feature);
      return [
        ...zone(
          `${MODULES}/${feature}`,
          others
            .filter((o) => !COMPOSERS.includes(o))
            .flatMap((o) => [`${MODULES}/${o}/routes.ts`, `${MODULES}/${o}/routes`]),
          'A feature reaches another through its service, repo or schemas, never its routes (docs/adr/0062).',
        ),
        ...zone(
          `${MODULES}/${feature}`,
          others.filter((o) => COMPOSERS.includes(o)).map((o) => `${MODULES}/${o}`),
          `${COMPOSERS.join('/ and ')}/ compose the features; no feature imports them (docs/adr/0062).`,
        ),
      ];
    }),
    ...zone(
      'api/src/http',
      [MODULES],
      'api/src/http/ is what the features stand on; it imports none of them (docs/adr/0062).',
    ),
    ...pages.flatMap((page) =>
      zone(
        `${PAGES}/${page}`,
        pages.filter((other) => other !== page).map((other) => `${PAGES}/${other}`),
        'A dashboard page imports no other page; what two share goes to layout.ts or forms.ts (docs/adr/0061).',
      ),
    ),
  ];
}

/**
 * The lint configuration of the repository at `root` (the lint-config test gives a fixture's), with
 * `sizeExceptions` allowed past SOURCE_MAX_LINES (the size test names its own).
 */
export function lintConfig(root, sizeExceptions = SIZE_EXCEPTIONS) {
  return tseslint.config(
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
        // Files that break the rules on purpose, for the lint-config test (test/lint/).
        'test/lint/fixture/**',
      ],
    },
    {
      files: ['**/*.ts'],
      extends: [tseslint.configs.recommendedTypeChecked],
      languageOptions: {
        parserOptions: { projectService: true, tsconfigRootDir: root },
      },
      plugins: { 'import-x': importX, proxyfleet },
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
        // In place of import-x/no-cycle, which does not see type-only imports.
        'proxyfleet/no-cycle': 'error',
        // The API's code through its import root once an import leaves its folder (docs/adr/0099).
        'proxyfleet/api-import-root': 'error',
        'import-x/no-restricted-paths': ['error', { basePath: root, zones: importZones(root) }],
        // Shared code and test support through the import root (package.json "imports"), never by
        // climbing directories: a file can move without its imports changing.
        'no-restricted-imports': [
          'error',
          {
            patterns: [
              {
                regex: '^\\.\\.?/(\\.\\./)*(common/src|test)/',
                message: 'Import common/src/ as #common/... and test/ as #test/... (package.json "imports").',
              },
            ],
          },
        ],
        'max-lines': ['error', { max: SOURCE_MAX_LINES, skipBlankLines: false, skipComments: false }],
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
      // Tables of cases and harnesses run longer than a source file; load tests are harnesses too.
      files: ['**/*.test.ts', 'test/**/*.ts', 'loadtest/**/*.ts', ...Object.keys(sizeExceptions)],
      rules: { 'max-lines': ['error', { max: TEST_MAX_LINES, skipBlankLines: false, skipComments: false }] },
    },
    // Written by a generator from a schema (controllers/src/crds/generate.ts): read, not edited.
    { files: ['**/*.generated.ts'], rules: { 'max-lines': 'off' } },
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
}

export default lintConfig(import.meta.dirname);
