// proxyfleet/api-import-root: the API's code is reached through its import root, `#api/...`
// (package.json "imports"), once an import leaves its folder (docs/adr/0099). A folder is a
// feature under api/src/modules/, or another folder of api/src/ (http/, cli/); inside it imports
// stay relative, and the files at the top of api/src/ (the composition) may reach down relatively.
// Files outside api/src/ (tests, dev/, load tests) use the root too. A file then moves without
// its imports changing, as #common/ and #test/ already allow (docs/adr/0062).
import path from 'node:path';
import { nearestPackage } from './no-cycle.js';

/** The folder of a path relative to api/src/: modules/<feature>, another top folder, or '' (the top). */
function folderOf(relative) {
  const parts = relative.split(path.sep);
  if (parts[0] === 'modules' && parts.length > 2) return `modules/${parts[1]}`;
  return parts.length > 1 ? parts[0] : '';
}

/**
 * The `#api/...` specifier that should replace `specifier` in `fromFile`, or undefined when the
 * import may stay as written (not relative, not into api/src/, or within the importer's folder).
 * The API's root directory is where the nearest package.json maps "#api/*".
 */
export function apiImportRoot(specifier, fromFile) {
  if (!specifier.startsWith('./') && !specifier.startsWith('../')) return undefined;
  const pkg = nearestPackage(path.dirname(fromFile));
  const mapped = pkg?.imports['#api/*'];
  if (typeof mapped !== 'string') return undefined;
  const apiDir = path.join(pkg.dir, mapped.replace(/\*$/, ''));
  const target = path.resolve(path.dirname(fromFile), specifier);
  const targetInApi = path.relative(apiDir, target);
  if (targetInApi.startsWith('..') || path.isAbsolute(targetInApi)) return undefined;
  const fromInApi = path.relative(apiDir, fromFile);
  if (!fromInApi.startsWith('..') && !path.isAbsolute(fromInApi)) {
    const folder = folderOf(fromInApi);
    if (folder === '' || targetInApi.startsWith(folder + path.sep)) return undefined;
  }
  return `#api/${targetInApi.split(path.sep).join('/')}`;
}

export const apiImportRootRule = {
  meta: {
    type: 'suggestion',
    docs: { description: 'Import api/src/ through #api/... once an import leaves its folder' },
    schema: [],
    messages: {
      root: 'Import "{{specifier}}" as "{{root}}": leaving its folder, the API is reached through its import root (docs/adr/0099).',
    },
  },
  create(context) {
    const file = context.physicalFilename;
    if (!path.isAbsolute(file)) return {};
    const check = (node) => {
      const source = node.source;
      if (source?.type !== 'Literal' || typeof source.value !== 'string') return;
      const root = apiImportRoot(source.value, file);
      if (root) context.report({ node: source, messageId: 'root', data: { specifier: source.value, root } });
    };
    return {
      ImportDeclaration: check,
      ExportNamedDeclaration: check,
      ExportAllDeclaration: check,
      ImportExpression: check,
    };
  },
};
