// Forward-only numbered SQL migrations from migrations/NNNN_name.sql, applied under an advisory
// lock so that many pods starting at once apply each file exactly once. The lock is a session
// lock: `databaseUrl` must keep its session (never a transaction pool: docs/adr/0068). A file changed after it
// was applied is an error (its checksum no longer matches), never silently skipped.
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../../../migrations/', import.meta.url));
/** pg_advisory_lock key: any constant unique to this purpose ("pfmigrat" as ASCII). */
const MIGRATION_LOCK_KEY = 0x70666d6967726174n;

export interface Migration {
  version: number;
  name: string;
  /** The file name, used in messages. */
  file: string;
  sql: string;
  checksum: string;
}

export async function loadMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const migrations: Migration[] = [];
  for (const file of files) {
    const match = /^(\d{4})_([a-z0-9_]+)\.sql$/.exec(file);
    if (!match) throw new Error(`migration file name must be NNNN_name.sql: ${file}`);
    const sql = await readFile(path.join(dir, file), 'utf8');
    migrations.push({
      version: Number(match[1]),
      name: match[2]!,
      file,
      sql,
      checksum: createHash('sha256').update(sql).digest('hex'),
    });
  }
  const versions = new Set<number>();
  for (const m of migrations) {
    if (versions.has(m.version)) throw new Error(`two migrations share version ${m.version}`);
    versions.add(m.version);
  }
  return migrations;
}

/** Applies every pending migration; returns the versions it applied (empty when up to date). */
export async function migrate(databaseUrl: string, dir = MIGRATIONS_DIR): Promise<number[]> {
  const migrations = await loadMigrations(dir);
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'proxyfleet-migrate' });
  client.on('error', () => undefined); // a dead connection surfaces as a failed query below
  await client.connect();
  const applied: number[] = [];
  try {
    // Unbounded, whatever the role or a pooler's connect_query sets (docs/adr/0068): an index
    // build, or the lock held by another pod migrating, may take minutes.
    await client.query('SET statement_timeout = 0');
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY.toString()]);
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY,
      name text NOT NULL,
      checksum text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const { rows } = await client.query<{ version: number; checksum: string }>(
      'SELECT version, checksum FROM schema_migrations',
    );
    const done = new Map(rows.map((r) => [r.version, r.checksum]));
    for (const m of migrations) {
      const checksum = done.get(m.version);
      if (checksum !== undefined) {
        if (checksum !== m.checksum) {
          throw new Error(`migration ${m.file} changed after it was applied; add a new migration instead`);
        }
        continue;
      }
      await client.query('BEGIN');
      try {
        await client.query(m.sql);
        await client.query('INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)', [
          m.version,
          m.name,
          m.checksum,
        ]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw new Error(`migration ${m.file} failed: ${(err as Error).message}`, { cause: err });
      }
      applied.push(m.version);
    }
  } finally {
    await client
      .query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY.toString()])
      .catch(() => undefined);
    await client.end().catch(() => undefined);
  }
  return applied;
}
