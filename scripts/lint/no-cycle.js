// proxyfleet/no-cycle: no import cycle among the repository's own files, type-only imports
// included (docs/adr/0062). import-x/no-cycle skips `import type` and `export type ... from`, so a
// pair of modules that name each other's types (dashboard/emails.ts <-> links.ts) passed it; such
// a pair cannot be understood, moved or deleted one without the other. Edges are read with
// TypeScript's import scanner (ts.preProcessFile: static, type-only, re-exports, import()), and
// resolved as Node does for this repository: relative paths and package.json "imports" (#common/...).
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/** file -> { mtimeMs, imports }: the repository's files it imports. */
const importsCache = new Map();
/** directory -> the nearest package.json's directory and "imports", or null. */
const packageCache = new Map();

export function nearestPackage(dir) {
  if (packageCache.has(dir)) return packageCache.get(dir);
  let found = null;
  try {
    const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'));
    found = { dir, imports: pkg.imports ?? {} };
  } catch {
    const parent = path.dirname(dir);
    found = parent === dir ? null : nearestPackage(parent);
  }
  packageCache.set(dir, found);
  return found;
}

const isFile = (file) => {
  try {
    return statSync(file).isFile();
  } catch {
    return false;
  }
};

/** The file `specifier` names from `fromFile`; undefined for a package (not ours) or nothing. */
export function resolveImport(specifier, fromFile) {
  let target;
  if (specifier.startsWith('./') || specifier.startsWith('../')) {
    target = path.resolve(path.dirname(fromFile), specifier);
  } else if (specifier.startsWith('#')) {
    const pkg = nearestPackage(path.dirname(fromFile));
    for (const [pattern, to] of Object.entries(pkg?.imports ?? {})) {
      const prefix = pattern.endsWith('*') ? pattern.slice(0, -1) : undefined;
      if (pattern === specifier) target = path.join(pkg.dir, to);
      else if (prefix !== undefined && specifier.startsWith(prefix))
        target = path.join(pkg.dir, to.replace('*', specifier.slice(prefix.length)));
      if (target) break;
    }
  }
  if (!target) return undefined;
  return [target, `${target}.ts`, `${target}.js`].find(isFile);
}

function importsOf(file) {
  let mtimeMs;
  try {
    mtimeMs = statSync(file).mtimeMs;
  } catch {
    return [];
  }
  const cached = importsCache.get(file);
  if (cached?.mtimeMs === mtimeMs) return cached.imports;
  const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
  const imports = importedFiles.map((f) => resolveImport(f.fileName, file)).filter(Boolean);
  importsCache.set(file, { mtimeMs, imports });
  return imports;
}

/**
 * The shortest chain of imports from `start` back to `file` ([start, ..., the importer of file]),
 * or undefined; files found not to lead back are added to `dead` and not walked again.
 */
function chainBack(start, file, dead) {
  const parent = new Map([[start, undefined]]);
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    const current = queue[i];
    for (const next of importsOf(current)) {
      if (next === file) {
        const chain = [];
        for (let f = current; f !== undefined; f = parent.get(f)) chain.unshift(f);
        return chain;
      }
      if (dead.has(next) || parent.has(next)) continue;
      parent.set(next, current);
      queue.push(next);
    }
  }
  for (const f of queue) dead.add(f);
  return undefined;
}

const noCycle = {
  meta: {
    type: 'problem',
    docs: { description: 'Forbid import cycles, type-only imports included' },
    schema: [],
    messages: {
      cycle:
        'Import cycle (type-only imports count too): {{route}}. Move what both sides need into a module both may import.',
    },
  },
  create(context) {
    const file = context.physicalFilename;
    if (!path.isAbsolute(file)) return {};
    const dead = new Set();
    const check = (node) => {
      const source = node.source;
      if (source?.type !== 'Literal' || typeof source.value !== 'string') return;
      const target = resolveImport(source.value, file);
      if (!target || target === file) return;
      const chain = chainBack(target, file, dead);
      if (!chain) return;
      const route = [file, ...chain, file].map((f) => path.relative(context.cwd, f)).join(' -> ');
      context.report({ node, messageId: 'cycle', data: { route } });
    };
    return {
      ImportDeclaration: check,
      ExportNamedDeclaration: check,
      ExportAllDeclaration: check,
      ImportExpression: check,
    };
  },
};

export default { meta: { name: 'proxyfleet' }, rules: { 'no-cycle': noCycle } };
