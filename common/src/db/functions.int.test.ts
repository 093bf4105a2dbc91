// The function files (docs/adr/0074): one file per SQL function under migrations/functions/, in a
// folder per room (docs/adr/0088), applied after the numbered migrations under the same lock,
// re-applied when a file changes.
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createEmptyDatabase, queryOnce as query, useEmptyDatabase } from '#test/db.ts';
import { functionsDir, loadFunctions, loadMigrations, migrateSchema } from './migrate.ts';

/** A migrations folder of our own: one table, and the given function files. */
async function folder(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'pf-functions-'));
  await writeFile(path.join(dir, '0001_t.sql'), 'CREATE TABLE t (n integer);');
  await mkdir(functionsDir(dir));
  for (const [name, sql] of Object.entries(files)) await writeFile(path.join(functionsDir(dir), name), sql);
  return dir;
}

const answer = (n: number) =>
  `CREATE OR REPLACE FUNCTION answer() RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT ${n} $$;\n`;

describe('function files', () => {
  const fx = useEmptyDatabase();

  it('applies them after the migrations, again only when a file changed, and recreates one a migration dropped', async () => {
    const dir = await folder({
      'answer.sql': answer(41),
      // A LANGUAGE sql body is checked at creation: this one needs answer(), applied after it by name.
      'aa_twice.sql':
        'CREATE OR REPLACE FUNCTION aa_twice() RETURNS integer LANGUAGE sql STABLE AS $$ SELECT 2 * answer() $$;\n',
    });
    expect(await migrateSchema(fx.db.url, dir)).toEqual({
      migrations: [1],
      functions: ['aa_twice', 'answer'],
    });
    expect(await migrateSchema(fx.db.url, dir)).toEqual({ migrations: [], functions: [] });
    await writeFile(path.join(functionsDir(dir), 'answer.sql'), answer(42));
    expect(await migrateSchema(fx.db.url, dir)).toEqual({ migrations: [], functions: ['answer'] });
    expect(await query(fx.db.url, 'SELECT aa_twice() AS n')).toEqual([{ n: 84 }]);
    // A migration that drops a function (to change its signature) gets the file's version back.
    await writeFile(path.join(dir, '0002_drop.sql'), 'DROP FUNCTION aa_twice();');
    expect(await migrateSchema(fx.db.url, dir)).toEqual({ migrations: [2], functions: ['aa_twice'] });
    expect(await query(fx.db.url, 'SELECT aa_twice() AS n')).toEqual([{ n: 84 }]);
  });

  it('applies a changed set at most once when many processes start together', async () => {
    const fresh = await createEmptyDatabase();
    try {
      const dir = await folder({ 'answer.sql': answer(7) });
      const results = await Promise.all([1, 2, 3, 4].map(() => migrateSchema(fresh.url, dir)));
      expect(results.flatMap((r) => r.functions)).toEqual(['answer']);
    } finally {
      await fresh.drop();
    }
  });

  it('reads one folder per room as well as files directly in functions/, and refuses a name in two rooms', async () => {
    const dir = await folder({ 'answer.sql': answer(5) });
    await mkdir(path.join(functionsDir(dir), 'maths'));
    await writeFile(
      path.join(functionsDir(dir), 'maths', 'aa_twice.sql'),
      'CREATE OR REPLACE FUNCTION aa_twice() RETURNS integer LANGUAGE sql STABLE AS $$ SELECT 2 * answer() $$;\n',
    );
    expect((await loadFunctions(functionsDir(dir))).map((f) => [f.room, f.file])).toEqual([
      ['maths', 'maths/aa_twice.sql'],
      [undefined, 'answer.sql'],
    ]);
    const fresh = await createEmptyDatabase();
    try {
      expect(await migrateSchema(fresh.url, dir)).toEqual({
        migrations: [1],
        functions: ['aa_twice', 'answer'],
      });
      expect(await query(fresh.url, 'SELECT aa_twice() AS n')).toEqual([{ n: 10 }]);
    } finally {
      await fresh.drop();
    }
    await writeFile(path.join(functionsDir(dir), 'maths', 'answer.sql'), answer(6));
    await expect(loadFunctions(functionsDir(dir))).rejects.toThrow(
      'function answer has two files: answer.sql and maths/answer.sql',
    );
  });

  it('applies all changed files or none, and names the one that failed', async () => {
    const fresh = await createEmptyDatabase();
    try {
      const dir = await folder({
        'answer.sql': answer(1),
        'broken.sql':
          'CREATE OR REPLACE FUNCTION broken() RETURNS integer LANGUAGE sql AS $$ SELECT nope $$;\n',
      });
      await expect(migrateSchema(fresh.url, dir)).rejects.toThrow(
        /broken\.sql: column "nope" does not exist/,
      );
      expect(await query(fresh.url, `SELECT to_regprocedure('answer()') AS f`)).toEqual([{ f: null }]);
      expect(await query(fresh.url, 'SELECT count(*)::int AS n FROM schema_functions')).toEqual([{ n: 0 }]);
    } finally {
      await fresh.drop();
    }
  });
});

describe("the project's functions", () => {
  let db: { url: string; drop(): Promise<void> };
  beforeAll(async () => {
    db = await createEmptyDatabase();
    await migrateSchema(db.url);
  });
  afterAll(() => db.drop());

  it('every function of the schema is defined by the file of its name, and each file by one function', async () => {
    const files = await loadFunctions();
    const defined = await query<{ name: string }>(
      db.url,
      `SELECT DISTINCT p.proname AS name FROM pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
        ORDER BY 1`,
    );
    expect(defined.map((r) => r.name)).toEqual(files.map((f) => f.name));
    for (const f of files) {
      const names = [...f.sql.matchAll(/CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+([a-z_][a-z0-9_]*)/gi)].map(
        (m) => m[1],
      );
      expect([f.file, names]).toEqual([f.file, [f.name]]);
    }
  });

  it('no numbered migration defines a function: it would be overwritten by its file, or restate one, or be dead', async () => {
    // The old ones were trimmed (docs/adr/0084), 0060's dead billing functions last (docs/adr/0088).
    for (const m of await loadMigrations())
      expect([m.file, /CREATE\s+(OR\s+REPLACE\s+)?FUNCTION/i.test(m.sql)]).toEqual([m.file, false]);
  });
});
