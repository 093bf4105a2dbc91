// The lint configuration's import rules (docs/adr/0062), shown on a small repository that breaks
// them on purpose (fixture/): ESLint's Node API lints it with the same lintConfig() that lints
// this repository, so a rule taken out of eslint.config.js fails here. The type-aware rules are
// left out (the fixture is not in a TypeScript project); the import rules need no types.
import { describe, expect, it } from '@jest/globals';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { eslintWithRules } from './eslint.ts';

const FIXTURE = fileURLToPath(new URL('./fixture/', import.meta.url));
const IMPORT_RULES = [
  'proxyfleet/no-cycle',
  'proxyfleet/api-import-root',
  'import-x/no-restricted-paths',
  'no-restricted-imports',
];

/** Each fixture file's findings, as "rule: message". */
async function lintFixture(): Promise<Record<string, string[]>> {
  const eslint = await eslintWithRules(FIXTURE, IMPORT_RULES);
  const results = await eslint.lintFiles(['.']);
  return Object.fromEntries(
    results.map((r) => [
      path.relative(FIXTURE, r.filePath),
      r.messages.map((m) => `${m.ruleId ?? 'parser'}: ${m.message}`),
    ]),
  );
}

describe('the lint configuration', () => {
  it('fails on import cycles, type-only ones included, and on wrong-way imports; passes the right way', async () => {
    const found = await lintFixture();
    const modules = 'api/src/modules';
    expect(found).toEqual({
      // A type-only cycle (import-x/no-cycle does not see it).
      [`${modules}/links/emails.ts`]: [
        expect.stringMatching(
          /^proxyfleet\/no-cycle: Import cycle .*links\/emails\.ts -> .*links\/links\.ts -> .*links\/emails\.ts/,
        ),
      ],
      [`${modules}/links/links.ts`]: [expect.stringMatching(/^proxyfleet\/no-cycle: Import cycle/)],
      // A cycle of values.
      [`${modules}/reports/a.ts`]: [expect.stringMatching(/^proxyfleet\/no-cycle: Import cycle/)],
      [`${modules}/reports/b.ts`]: [expect.stringMatching(/^proxyfleet\/no-cycle: Import cycle/)],
      // A feature importing admin/ (type-only, still wrong) and another feature's routes; reports/
      // is no module of this repository: the zones come from the folders.
      [`${modules}/billing/wrong-way.ts`]: [
        expect.stringMatching(
          /^import-x\/no-restricted-paths: .*"#api\/modules\/admin\/schemas\.ts".*compose the features/,
        ),
        expect.stringMatching(
          /^import-x\/no-restricted-paths: .*"#api\/modules\/reports\/routes\.ts".*never its routes/,
        ),
        expect.stringMatching(
          /^import-x\/no-restricted-paths: .*"#api\/modules\/reports\/routes\/summary\.ts".*never its routes/,
        ),
      ],
      [`${modules}/admin/invite.ts`]: [
        expect.stringMatching(
          /^import-x\/no-restricted-paths: .*"#api\/modules\/dashboard\/links\.ts".*compose the features/,
        ),
      ],
      // Climbing to common/src/ instead of the import root.
      [`${modules}/billing/climbs.ts`]: [expect.stringMatching(/^no-restricted-imports: .*#common\//)],
      // Leaving its feature by climbing instead of through the API's import root.
      [`${modules}/billing/climbs-api.ts`]: [
        expect.stringMatching(
          /^proxyfleet\/api-import-root: .*"\.\.\/\.\.\/http\/schemas\.ts" as "#api\/http\/schemas\.ts"/,
        ),
        expect.stringMatching(
          /^proxyfleet\/api-import-root: .*"\.\.\/reports\/service\.ts" as "#api\/modules\/reports\/service\.ts"/,
        ),
      ],
      // The right way: http/ schemas, another feature's service, #common/ and #api/.
      [`${modules}/billing/right-way.ts`]: [],
      [`${modules}/admin/schemas.ts`]: [],
      [`${modules}/dashboard/links.ts`]: [],
      [`${modules}/reports/routes.ts`]: [],
      [`${modules}/reports/routes/summary.ts`]: [],
      [`${modules}/reports/service.ts`]: [],
      ['api/src/http/schemas.ts']: [],
      ['common/src/shared.ts']: [],
    });
  });
});
