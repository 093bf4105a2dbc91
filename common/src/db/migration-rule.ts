// The expand/contract rule of migrations (docs/operator.md "Upgrades and rollback", docs/adr/0124):
// every pod applies the pending migrations at its start (migrate.ts) while pods of the previous
// release still serve, and `helm rollback` runs the previous release on the schema as migrated.
// So a migration newer than the previous release only expands: what a pod of that release reads,
// writes or calls stays as it was. A contract step (a drop, a rename, a type change, a new NOT
// NULL without a default on an existing table, a dropped default, dropping a function the
// previous release calls) is refused here unless the statement carries a marker comment
//   -- contract: <what it removes>, safe after v<X.Y.Z>
// naming a release that no longer uses the thing, no later than the previous release: the pods
// an upgrade or a rollback can meet are of that release or newer.
// This reads SQL as text, statement by statement, with strings, dollar-quoted bodies and comments
// set apart: enough for the statements migrations write, not a SQL parser.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { loadMigrations, MIGRATIONS_DIR } from './migrate.ts';

/** migrations/previous-release.json: the release an upgrade starts from and a rollback returns to. */
export interface PreviousRelease {
  /** Its tag, `v0.1.0`. */
  release: string;
  /** The commit the tag points at (found by hash where a clone has no tags). */
  commit: string;
  /** Its newest migration's version: the migrations after it are held to the rule. */
  lastMigration: number;
  /** The SQL functions its code calls (function files its processes call by name). */
  functions: string[];
}

export async function loadPreviousRelease(dir = MIGRATIONS_DIR): Promise<PreviousRelease> {
  return JSON.parse(await readFile(path.join(dir, 'previous-release.json'), 'utf8')) as PreviousRelease;
}

export interface Violation {
  file: string;
  /** The statement's first line, as written. */
  statement: string;
  reason: string;
}

interface Statement {
  /** The statement as written, comments and all. */
  text: string;
  /** The comments before it and inside it. */
  comments: string[];
  /** Lower-cased, comments removed, strings and dollar-quoted bodies replaced by '', identifiers unquoted, spaces collapsed. */
  code: string;
  /** Dollar-quoted bodies (a DO block's is run by the migration, so it is read too). */
  bodies: string[];
}

/** Splits SQL at the semicolons outside strings, quoted identifiers, dollar quotes and comments. */
export function splitStatements(sql: string): Statement[] {
  const out: Statement[] = [];
  let text = '';
  let code = '';
  let comments: string[] = [];
  let bodies: string[] = [];
  let i = 0;
  const flush = () => {
    const squeezed = code.replace(/\s+/g, ' ').trim();
    if (squeezed) out.push({ text: text.trim(), comments, code: squeezed, bodies });
    if (squeezed) [comments, bodies] = [[], []];
    [text, code] = ['', ''];
  };
  while (i < sql.length) {
    const rest = sql.slice(i);
    const c = sql[i]!;
    if (rest.startsWith('--')) {
      const end = sql.indexOf('\n', i);
      const stop = end < 0 ? sql.length : end;
      comments.push(sql.slice(i, stop));
      text += sql.slice(i, stop);
      code += ' ';
      i = stop;
    } else if (rest.startsWith('/*')) {
      let depth = 0;
      let j = i;
      do {
        if (sql.startsWith('/*', j)) [depth, j] = [depth + 1, j + 2];
        else if (sql.startsWith('*/', j)) [depth, j] = [depth - 1, j + 2];
        else j++;
      } while (depth > 0 && j < sql.length);
      comments.push(sql.slice(i, j));
      text += sql.slice(i, j);
      code += ' ';
      i = j;
    } else if (c === "'") {
      let j = i + 1;
      const escapes = /[eE]$/.test(sql.slice(Math.max(0, i - 1), i));
      while (j < sql.length) {
        if (escapes && sql[j] === '\\') j += 2;
        else if (sql[j] === "'" && sql[j + 1] === "'") j += 2;
        else if (sql[j] === "'") break;
        else j++;
      }
      text += sql.slice(i, j + 1);
      code += "''";
      i = j + 1;
    } else if (c === '"') {
      const j = sql.indexOf('"', i + 1);
      const stop = j < 0 ? sql.length : j;
      text += sql.slice(i, stop + 1);
      code += sql.slice(i + 1, stop).toLowerCase();
      i = stop + 1;
    } else if (c === '$' && /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.test(rest)) {
      const tag = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(rest)![0];
      const j = sql.indexOf(tag, i + tag.length);
      const stop = j < 0 ? sql.length : j + tag.length;
      bodies.push(sql.slice(i + tag.length, j < 0 ? sql.length : j));
      text += sql.slice(i, stop);
      code += "''";
      i = stop;
    } else if (c === ';') {
      text += c;
      flush();
      i++;
    } else {
      text += c;
      code += c.toLowerCase();
      i++;
    }
  }
  flush();
  return out;
}

const MARKER = /^--\s*contract:\s*(\S.*?),?\s+safe after\s+(v\d+\.\d+\.\d+)\s*$/i;

/** The marker of a statement: its contract step and the release after which it is safe. */
export function markerOf(s: Pick<Statement, 'comments'>): { step: string; release: string } | undefined {
  for (const comment of s.comments) {
    const m = MARKER.exec(comment.trim());
    if (m) return { step: m[1]!, release: m[2]! };
  }
  return undefined;
}

/** -1, 0 or 1 as release a is older than, the same as, or newer than release b (vX.Y.Z). */
export function compareReleases(a: string, b: string): number {
  const parts = (v: string) => v.replace(/^v/, '').split('.').map(Number);
  const [x, y] = [parts(a), parts(b)];
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return (x[i] ?? 0) < (y[i] ?? 0) ? -1 : 1;
  return 0;
}

const NAME = String.raw`(?:[a-z_][a-z0-9_$]*\.)?([a-z_][a-z0-9_$]*)`;
/** Splits at the commas outside parentheses: the actions of one ALTER TABLE, the names of one DROP. */
function topLevel(list: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < list.length; i++) {
    if (list[i] === '(') depth++;
    else if (list[i] === ')') depth--;
    else if (list[i] === ',' && depth === 0) {
      parts.push(list.slice(start, i).trim());
      start = i + 1;
    }
  }
  parts.push(list.slice(start).trim());
  return parts.filter(Boolean);
}

/** What in one ALTER TABLE of an existing table an old pod could meet. */
function alterTableProblems(table: string, actionsText: string): string[] {
  const problems: string[] = [];
  if (/^rename to /.test(actionsText)) return [`renames table ${table}`];
  const renamed = /^rename (?:column )?([a-z_][a-z0-9_$]*) to /.exec(actionsText);
  if (renamed && renamed[1] !== 'constraint') return [`renames column ${table}.${renamed[1]}`];
  const actions = topLevel(actionsText);
  const defaulted = new Set(
    actions.flatMap((a) => /^alter (?:column )?([a-z_][a-z0-9_$]*) set default /.exec(a)?.[1] ?? []),
  );
  for (const a of actions) {
    const drop = /^drop (?:column )?(?:if exists )?([a-z_][a-z0-9_$]*)/.exec(a);
    if (drop && drop[1] !== 'constraint') problems.push(`drops column ${table}.${drop[1]}`);
    const type = /^alter (?:column )?([a-z_][a-z0-9_$]*) (?:set data )?type /.exec(a);
    if (type) problems.push(`changes the type of column ${table}.${type[1]}`);
    const notNull = /^alter (?:column )?([a-z_][a-z0-9_$]*) set not null/.exec(a);
    if (notNull && !defaulted.has(notNull[1]!))
      problems.push(`sets NOT NULL on column ${table}.${notNull[1]} without a default`);
    const undefaulted = /^alter (?:column )?([a-z_][a-z0-9_$]*) drop default/.exec(a);
    if (undefaulted) problems.push(`drops the default of column ${table}.${undefaulted[1]}`);
    const added = /^add (?:column )?(?:if not exists )?([a-z_][a-z0-9_$]*) (.*)$/.exec(a);
    if (
      added &&
      !/^(constraint|primary|unique|check|foreign|exclude)$/.test(added[1]!) &&
      /\bnot null\b/.test(added[2]!) &&
      !/\b(default|generated)\b/.test(added[2]!)
    )
      problems.push(`adds column ${table}.${added[1]} NOT NULL without a default`);
  }
  return problems;
}

/** The names a DROP names: `a, b cascade` -> [a, b]; `f(int), g()` -> [f, g]. */
const droppedNames = (list: string) =>
  topLevel(list.replace(/ (cascade|restrict)$/, '')).map((x) => new RegExp(`^${NAME}`).exec(x)?.[1] ?? x);

/** The problems of one statement of a migration; `created`: what this migration created before it. */
function statementProblems(code: string, created: Set<string>, previous: PreviousRelease): string[] {
  const existing = (name: string) => !created.has(name);
  const create = new RegExp(
    `^create (?:unlogged )?(?:table|(?:materialized )?view|type|sequence) (?:if not exists )?${NAME}`,
  ).exec(code);
  if (create) created.add(create[1]!);
  const alter = new RegExp(`^alter table (?:if exists )?(?:only )?${NAME}\\*? (.*)$`).exec(code);
  if (alter && existing(alter[1]!)) return alterTableProblems(alter[1]!, alter[2]!);
  const drop = /^drop (table|(?:materialized )?view|type|sequence) (?:if exists )?(.*)$/.exec(code);
  if (drop)
    return droppedNames(drop[2]!)
      .filter(existing)
      .map((name) => `drops ${drop[1]} ${name}`);
  const dropFunction = /^drop (?:function|procedure|routine) (?:if exists )?(.*)$/.exec(code);
  if (dropFunction)
    return droppedNames(dropFunction[1]!)
      .filter((name) => previous.functions.includes(name))
      .map((name) => `drops function ${name}, which ${previous.release} calls`);
  const renameFunction = new RegExp(`^alter (?:function|procedure|routine) ${NAME}\\b.* rename to `).exec(
    code,
  );
  if (renameFunction && previous.functions.includes(renameFunction[1]!))
    return [`renames function ${renameFunction[1]}, which ${previous.release} calls`];
  return [];
}

/** The violations of one migration: its contract steps without a marker, or with one naming a release too new. */
export function checkMigration(file: string, sql: string, previous: PreviousRelease): Violation[] {
  const created = new Set<string>();
  const out: Violation[] = [];
  for (const s of splitStatements(sql)) {
    // A DO block runs its body now: its statements are the migration's too.
    const codes = /^do\b/.test(s.code)
      ? s.bodies.flatMap((b) => splitStatements(b).map((inner) => inner.code))
      : [s.code];
    const problems = codes.flatMap((code) => statementProblems(code, created, previous));
    if (problems.length === 0) continue;
    const statement = s.text.split('\n').find((l) => l.trim() && !l.trim().startsWith('--')) ?? s.text;
    const marker = markerOf(s);
    for (const problem of problems) {
      if (!marker)
        out.push({
          file,
          statement,
          reason: `${problem}: a pod of ${previous.release} may still use it (add the contract marker once no release that uses it can run)`,
        });
      else if (compareReleases(marker.release, previous.release) > 0)
        out.push({
          file,
          statement,
          reason: `${problem}: marked safe after ${marker.release}, but an upgrade starts from ${previous.release}`,
        });
    }
  }
  return out;
}

/** The violations of every migration of `dir` newer than the previous release's. */
export async function checkMigrations(dir: string, previous: PreviousRelease): Promise<Violation[]> {
  const migrations = await loadMigrations(dir);
  return migrations
    .filter((m) => m.version > previous.lastMigration)
    .flatMap((m) => checkMigration(m.file, m.sql, previous));
}
