// ESLint's Node API with this repository's lintConfig() for another root (a fixture, or this
// repository for text that is not on disk), without type information, running only `rules`; with
// `sizeExceptions` in place of the configuration's own list (eslint.config.js#SIZE_EXCEPTIONS).
import { ESLint, type Linter } from 'eslint';

const CONFIG = new URL('../../eslint.config.js', import.meta.url).href;

export async function eslintWithRules(
  root: string,
  rules: readonly string[],
  sizeExceptions?: Record<string, string>,
): Promise<ESLint> {
  const { lintConfig } = (await import(CONFIG)) as {
    lintConfig: (root: string, sizeExceptions?: Record<string, string>) => Linter.Config[];
  };
  return new ESLint({
    cwd: root,
    overrideConfigFile: true,
    overrideConfig: [
      ...lintConfig(root, sizeExceptions),
      { languageOptions: { parserOptions: { projectService: false } } },
    ],
    ignore: false,
    ruleFilter: ({ ruleId }) => rules.includes(ruleId),
  });
}
