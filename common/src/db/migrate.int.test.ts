import { createHash } from 'node:crypto';
import { mkdtemp, readFile, writeFile, cp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createEmptyDatabase, useEmptyDatabase } from '#test/db.ts';
import { loadMigrations, migrate, MIGRATIONS_DIR } from './migrate.ts';

describe('migrate', () => {
  const fx = useEmptyDatabase();

  it('applies every migration once; a second run is a no-op', async () => {
    const all = (await loadMigrations()).map((m) => m.version);
    expect(all.length).toBeGreaterThan(0);
    expect(await migrate(fx.db.url)).toEqual(all);
    expect(await migrate(fx.db.url)).toEqual([]);
    const client = new pg.Client({ connectionString: fx.db.url });
    await client.connect();
    const { rows } = await client.query('SELECT count(*)::int AS n FROM schema_migrations');
    await client.end();
    expect(rows[0].n).toBe(all.length);
  });

  it('applies each migration exactly once when many processes start at the same time', async () => {
    const fresh = await createEmptyDatabase();
    try {
      const results = await Promise.all([1, 2, 3, 4].map(() => migrate(fresh.url)));
      const applied = results.flat();
      expect(applied.sort()).toEqual((await loadMigrations()).map((m) => m.version).sort());
    } finally {
      await fresh.drop();
    }
  });

  it('refuses a migration that changed after it was applied', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'pf-migrations-'));
    await cp(MIGRATIONS_DIR, dir, { recursive: true });
    const fresh = await createEmptyDatabase();
    try {
      await migrate(fresh.url, dir);
      await writeFile(path.join(dir, '0001_domain.sql'), '-- edited\nSELECT 1;\n');
      await expect(migrate(fresh.url, dir)).rejects.toThrow(/changed after it was applied/);
    } finally {
      await fresh.drop();
    }
  });

  it('accepts a trimmed migration applied with a checksum that former-checksums.json lists, and keeps the one it was applied with: the previous release still migrates after a rollback', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'pf-migrations-'));
    const before = '-- a restated function, and a table\nCREATE TABLE kept (id int);\nSELECT 1;\n';
    await writeFile(path.join(dir, '0001_kept.sql'), before);
    const fresh = await createEmptyDatabase();
    try {
      expect(await migrate(fresh.url, dir)).toEqual([1]);
      const after = '-- the restatement is gone\nCREATE TABLE kept (id int);\n';
      await writeFile(path.join(dir, '0001_kept.sql'), after);
      await expect(migrate(fresh.url, dir)).rejects.toThrow(/changed after it was applied/);
      const sha = (text: string) => createHash('sha256').update(text).digest('hex');
      await writeFile(
        path.join(dir, 'former-checksums.json'),
        JSON.stringify({ '0001_kept.sql': [sha(before)] }),
      );
      expect(await migrate(fresh.url, dir)).toEqual([]);
      // The previous release, its file untrimmed and its list without the trimmed checksum, after a
      // helm rollback: it refused to start ("changed after it was applied") while the runner
      // recorded the trimmed file's checksum over the one the migration was applied with.
      const previous = await mkdtemp(path.join(os.tmpdir(), 'pf-migrations-'));
      await writeFile(path.join(previous, '0001_kept.sql'), before);
      expect(await migrate(fresh.url, previous)).toEqual([]);
      const client = new pg.Client({ connectionString: fresh.url });
      await client.connect();
      const { rows } = await client.query('SELECT checksum FROM schema_migrations WHERE version = 1');
      await client.end();
      expect(rows[0].checksum).toBe(sha(before));
    } finally {
      await fresh.drop();
    }
  });

  it('lists former checksums only for migration files that exist', async () => {
    const listed = Object.keys(
      JSON.parse(await readFile(path.join(MIGRATIONS_DIR, 'former-checksums.json'), 'utf8')),
    );
    const files = new Set((await loadMigrations()).map((m) => m.file));
    expect(listed.length).toBeGreaterThan(0);
    expect(listed.filter((f) => !files.has(f))).toEqual([]);
  });

  it('rolls back a failing migration and names it', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'pf-migrations-'));
    await writeFile(path.join(dir, '0001_ok.sql'), 'CREATE TABLE ok_table (id int);');
    await writeFile(
      path.join(dir, '0002_bad.sql'),
      'CREATE TABLE half (id int); SELECT nonsense_column FROM ok_table;',
    );
    const fresh = await createEmptyDatabase();
    try {
      await expect(migrate(fresh.url, dir)).rejects.toThrow(/0002_bad\.sql failed/);
      const client = new pg.Client({ connectionString: fresh.url });
      await client.connect();
      const { rows } = await client.query(
        `SELECT to_regclass('half') AS half, to_regclass('ok_table') AS ok`,
      );
      await client.end();
      expect(rows[0]).toEqual({ half: null, ok: 'ok_table' });
    } finally {
      await fresh.drop();
    }
  });
});
