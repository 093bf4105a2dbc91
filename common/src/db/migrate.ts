// The schema, in two parts applied under one advisory lock, so that many pods starting at once
// apply each change exactly once (docs/adr/0074):
// - forward-only numbered migrations, migrations/NNNN_name.sql, for tables and data: a file
//   changed after it was applied is an error (its checksum no longer matches), never skipped;
// - SQL functions, one file each, migrations/functions/<room>/<function>.sql (CREATE OR REPLACE,
//   with the function's triggers if it has any; docs/adr/0088): re-applied after the migrations whenever a file's content
//   changed, so a function is written in one place instead of being restated by every migration
//   that changes it.
// The lock is a session lock: `databaseUrl` must keep its session (never a transaction pool:
// docs/adr/0068).
import { createHash } from 'node:crypto';
import type { Dirent } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../../../migrations/', import.meta.url));
/** Where the function files of a migrations folder live. */
export const functionsDir = (migrationsDir: string) => path.join(migrationsDir, 'functions');
/** pg_advisory_lock key: any constant unique to this purpose ("pfmigrat" as ASCII). */
const MIGRATION_LOCK_KEY = 0x70666d6967726174n;

export interface Migration {
  version: number;
  name: string;
  /** The file name, used in messages. */
  file: string;
  sql: string;
  checksum: string;
  /** Checksums this file had when databases applied it before it was trimmed (docs/adr/0084). */
  formerChecksums: readonly string[];
}

/** One function file: `name` is the function it defines (the file name without .sql). */
export interface FunctionFile {
  name: string;
  /** Its room's folder under functions/ (billing, leases, ...); undefined for a file directly in functions/. */
  room: string | undefined;
  /** Its path under functions/, used in messages: `billing/billing_check.sql`. */
  file: string;
  sql: string;
  checksum: string;
}

const checksum = (sql: string) => createHash('sha256').update(sql).digest('hex');

export async function loadMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const former = await loadFormerChecksums(dir);
  const migrations: Migration[] = [];
  for (const file of files) {
    const match = /^(\d{4})_([a-z0-9_]+)\.sql$/.exec(file);
    if (!match) throw new Error(`migration file name must be NNNN_name.sql: ${file}`);
    const sql = await readFile(path.join(dir, file), 'utf8');
    const formerChecksums = former[file] ?? [];
    migrations.push({
      version: Number(match[1]),
      name: match[2]!,
      file,
      sql,
      checksum: checksum(sql),
      formerChecksums,
    });
  }
  const versions = new Set<number>();
  for (const m of migrations) {
    if (versions.has(m.version)) throw new Error(`two migrations share version ${m.version}`);
    versions.add(m.version);
  }
  return migrations;
}

/** migrations/former-checksums.json: file name -> checksums it was applied with before a trim. */
async function loadFormerChecksums(dir: string): Promise<Record<string, string[]>> {
  try {
    return JSON.parse(await readFile(path.join(dir, 'former-checksums.json'), 'utf8')) as Record<
      string,
      string[]
    >;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw err;
  }
}

/**
 * The function files of a migrations folder, in function-name order (none when it has no
 * functions/ folder). They sit in one folder per room (`functions/billing/billing_check.sql`,
 * docs/adr/0088); a file directly in functions/ is read too. A function name is unique across rooms.
 */
export async function loadFunctions(dir = functionsDir(MIGRATIONS_DIR)): Promise<FunctionFile[]> {
  let entries: Dirent[];
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const files: Array<{ room: string | undefined; file: string }> = [];
  for (const e of entries) {
    if (e.isFile() && e.name.endsWith('.sql')) files.push({ room: undefined, file: e.name });
    if (!e.isDirectory()) continue;
    if (!/^[a-z][a-z0-9-]*$/.test(e.name))
      throw new Error(`function room folder name must be lowercase: ${e.name}`);
    for (const f of await readdir(path.join(dir, e.name)))
      if (f.endsWith('.sql')) files.push({ room: e.name, file: f });
  }
  const out: FunctionFile[] = [];
  for (const { room, file } of files) {
    const shown = room === undefined ? file : `${room}/${file}`;
    const match = /^([a-z][a-z0-9_]*)\.sql$/.exec(file);
    if (!match) throw new Error(`function file name must be <function name>.sql: ${shown}`);
    const twin = out.find((f) => f.name === match[1]);
    if (twin) throw new Error(`function ${match[1]} has two files: ${twin.file} and ${shown}`);
    const sql = await readFile(path.join(dir, shown), 'utf8');
    out.push({ name: match[1]!, room, file: shown, sql, checksum: checksum(sql) });
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

export interface MigrateResult {
  /** Versions of the numbered migrations applied by this call. */
  migrations: number[];
  /** Function files (re-)applied by this call: new, or changed since they were last applied. */
  functions: string[];
}

/** Applies every pending migration; returns the versions it applied (empty when up to date). */
export async function migrate(databaseUrl: string, dir = MIGRATIONS_DIR): Promise<number[]> {
  return (await migrateSchema(databaseUrl, dir)).migrations;
}

/** Applies pending migrations, then every new or changed function file, under one lock. */
export async function migrateSchema(databaseUrl: string, dir = MIGRATIONS_DIR): Promise<MigrateResult> {
  const migrations = await loadMigrations(dir);
  const functions = await loadFunctions(functionsDir(dir));
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'proxyfleet-migrate' });
  client.on('error', () => undefined); // a dead connection surfaces as a failed query below
  await client.connect();
  const result: MigrateResult = { migrations: [], functions: [] };
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
      const applied = done.get(m.version);
      if (applied !== undefined) {
        // The recorded checksum stays the one the migration was applied with, a former one
        // included: the previous release, whose file still has it, migrates after a helm rollback
        // (docs/adr/0124).
        if (applied === m.checksum || m.formerChecksums.includes(applied)) continue;
        throw new Error(`migration ${m.file} changed after it was applied; add a new migration instead`);
      }
      await inTransaction(client, `migration ${m.file}`, async () => {
        await client.query(m.sql);
        await client.query('INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)', [
          m.version,
          m.name,
          m.checksum,
        ]);
      });
      result.migrations.push(m.version);
    }
    result.functions = await applyFunctions(client, functions);
  } finally {
    await client
      .query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY.toString()])
      .catch(() => undefined);
    await client.end().catch(() => undefined);
  }
  return result;
}

/**
 * (Re-)applies the function files whose checksum differs from the one last applied (or whose
 * function is missing), all in one
 * transaction (a half-applied set never runs). A file that needs a function of a file not yet
 * applied (a LANGUAGE sql body is checked when it is created) is retried after the others.
 */
async function applyFunctions(client: pg.Client, functions: FunctionFile[]): Promise<string[]> {
  await client.query(`CREATE TABLE IF NOT EXISTS schema_functions (
    name text PRIMARY KEY,
    checksum text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
  )`);
  const { rows } = await client.query<{ name: string; checksum: string }>(
    'SELECT name, checksum FROM schema_functions',
  );
  const done = new Map(rows.map((r) => [r.name, r.checksum]));
  // A function a migration dropped (to change its signature) is applied again, changed or not.
  const { rows: present } = await client.query<{ name: string }>(
    `SELECT DISTINCT proname AS name FROM pg_proc WHERE pronamespace = current_schema()::regnamespace`,
  );
  const exists = new Set(present.map((r) => r.name));
  const pending = functions.filter((f) => done.get(f.name) !== f.checksum || !exists.has(f.name));
  if (pending.length === 0) return [];
  await inTransaction(client, 'function files', async () => {
    let queue = pending;
    while (queue.length > 0) {
      const waiting: FunctionFile[] = [];
      let lastError: unknown;
      for (const f of queue) {
        await client.query('SAVEPOINT function_file');
        try {
          await client.query(f.sql);
          await client.query('RELEASE SAVEPOINT function_file');
        } catch (err) {
          await client.query('ROLLBACK TO SAVEPOINT function_file');
          if ((err as { code?: string }).code !== UNDEFINED_FUNCTION) throw inFile(f, err);
          waiting.push(f);
          lastError = inFile(f, err);
        }
      }
      if (waiting.length === queue.length) throw lastError;
      queue = waiting;
    }
    await client.query(
      `INSERT INTO schema_functions (name, checksum) SELECT * FROM unnest($1::text[], $2::text[])
       ON CONFLICT (name) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now()`,
      [pending.map((f) => f.name), pending.map((f) => f.checksum)],
    );
  });
  return pending.map((f) => f.name);
}

/** SQLSTATE 42883: a function a body refers to does not exist (yet). */
const UNDEFINED_FUNCTION = '42883';

const inFile = (f: FunctionFile, err: unknown) =>
  new Error(`${f.file}: ${(err as Error).message}`, { cause: err });

async function inTransaction(client: pg.Client, what: string, fn: () => Promise<void>): Promise<void> {
  await client.query('BEGIN');
  try {
    await fn();
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw new Error(`${what} failed: ${(err as Error).message}`, { cause: err });
  }
}
