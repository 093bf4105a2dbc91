// A fresh database per test file, cloned from the run's migrated template (test/global-setup.ts).
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createPool, type Pool } from '#common/db/pool.ts';
import { createLogger } from '#common/logger.ts';
import { withDatabase } from './global-setup.ts';
import { jestHooks } from './hooks.ts';

export interface TestDatabase {
  /** Connection URL of this test's database. */
  url: string;
  /** URL of the server (no database chosen): for tests that need their own database. */
  serverUrl: string;
  pool: Pool;
  drop(): Promise<void>;
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const serverUrl = requireEnv('PROXYFLEET_TEST_SERVER_URL');
  const template = requireEnv('PROXYFLEET_TEST_TEMPLATE');
  const name = `pf_test_${requireEnv('PROXYFLEET_TEST_RUN_ID')}_${randomBytes(4).toString('hex')}`;
  await adminQuery(serverUrl, `CREATE DATABASE ${name} TEMPLATE ${template}`);
  const url = withDatabase(serverUrl, name);
  const pool = createPool({
    url,
    max: 5,
    applicationName: 'proxyfleet-test',
    logger: createLogger('test', 'silent'),
  });
  return {
    url,
    serverUrl,
    pool,
    async drop() {
      await pool.end().catch(() => undefined);
      await adminQuery(serverUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

/** A test database for the whole file: created before its tests, dropped after; read `db` inside tests. */
export function useTestDatabase(): { db: TestDatabase } {
  const fixture = {} as { db: TestDatabase };
  jestHooks().beforeAll(async () => {
    fixture.db = await createTestDatabase();
  });
  jestHooks().afterAll(async () => {
    await fixture.db?.drop();
  });
  return fixture;
}

/**
 * How many sessions of the pool's database wait for a lock now (pg_stat_activity); with
 * `queryPrefix`, only those whose statement starts so. Tests order transactions by this state.
 */
export async function lockWaiters(pool: Pool, queryPrefix?: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock'
        AND ($1::text IS NULL OR starts_with(query, $1))`,
    [queryPrefix ?? null],
  );
  return rows[0]!.n;
}

/** An empty database (createEmptyDatabase) for the whole file, or the describe block it is called in. */
export function useEmptyDatabase(): { db: { url: string; drop(): Promise<void> } } {
  const fixture = {} as { db: { url: string; drop(): Promise<void> } };
  jestHooks().beforeAll(async () => {
    fixture.db = await createEmptyDatabase();
  });
  jestHooks().afterAll(() => fixture.db?.drop());
  return fixture;
}

/** Creates an empty database (no migrations) for tests of the migrator itself. */
export async function createEmptyDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const serverUrl = requireEnv('PROXYFLEET_TEST_SERVER_URL');
  const name = `pf_empty_${requireEnv('PROXYFLEET_TEST_RUN_ID')}_${randomBytes(4).toString('hex')}`;
  await adminQuery(serverUrl, `CREATE DATABASE ${name}`);
  return {
    url: withDatabase(serverUrl, name),
    drop: () => adminQuery(serverUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
}

async function adminQuery(serverUrl: string, sql: string): Promise<void> {
  await queryOnce(withDatabase(serverUrl, 'postgres'), sql);
}

/** One statement on a connection of its own (opened and closed around it): its rows. */
export async function queryOnce<T extends pg.QueryResultRow>(
  url: string,
  sql: string,
  params: unknown[] = [],
): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

function requireEnv(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the tests through jest (test/global-setup.ts)`);
  return value;
}

/**
 * A pool of 4 on `url` whose every query first waits for `before(sql)` (when it returns a
 * promise): a database that answers late, or holds a statement, where a test says.
 */
export function createInterceptedPool(
  url: string,
  applicationName: string,
  before: (sql: string) => Promise<unknown> | undefined,
): Pool {
  const pool = createTestPool(url, applicationName);
  const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
  (pool as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = async (
    ...args: unknown[]
  ) => {
    if (typeof args[0] === 'string') await before(args[0]);
    return query(...args);
  };
  return pool;
}

/** A pool of `max` on `url` with a silent logger, for tests that need their own (through a relay). */
export function createTestPool(url: string, applicationName: string, max = 4): Pool {
  return createPool({ url, max, applicationName, logger: createLogger('test', 'silent') });
}
