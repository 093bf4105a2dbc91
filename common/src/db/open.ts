// Opens the database an entrypoint uses: DATABASE_URL when set, otherwise an embedded PostgreSQL
// in the data directory. Applies pending migrations (under their advisory lock) before the pool
// serves anything, and registers the pool and the embedded server with the shutdown, last.
import type { Registry } from 'prom-client';
import type { Health } from '../health.ts';
import type { Logger } from '../logger.ts';
import { safeUrl } from '../logger.ts';
import { SHUTDOWN_ORDER, type Shutdown } from '../shutdown.ts';
import { startEmbeddedPostgres, type EmbeddedDatabase } from './embedded.ts';
import { migrateSchema } from './migrate.ts';
import { createPool, type Pool } from './pool.ts';

export interface Database {
  url: string;
  pool: Pool;
  embedded: boolean;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  databaseUrl: string | undefined;
  dataDir: string;
  poolSize: number;
  /** The pool's client-side query timeout (pool.ts; default there). */
  queryTimeoutMs?: number | undefined;
  component: string;
  logger: Logger;
  registry?: Registry;
  migrate?: boolean;
}

export async function openDatabase(options: OpenDatabaseOptions): Promise<Database> {
  const { logger } = options;
  let embedded: EmbeddedDatabase | undefined;
  let url = options.databaseUrl;
  if (!url) {
    embedded = await startEmbeddedPostgres(options.dataDir, logger);
    url = embedded.url;
  }
  try {
    if (options.migrate !== false) {
      const { migrations: applied, functions } = await migrateSchema(url);
      logger.info(
        { applied, functions, database: safeUrl(url) },
        applied.length || functions.length ? 'migrations applied' : 'schema up to date',
      );
    }
  } catch (err) {
    await embedded?.stop();
    throw err;
  }
  const pool = createPool({
    url,
    max: options.poolSize,
    applicationName: `proxyfleet-${options.component}`,
    logger,
    ...(options.queryTimeoutMs !== undefined ? { queryTimeoutMs: options.queryTimeoutMs } : {}),
    ...(options.registry ? { registry: options.registry } : {}),
  });
  return {
    url,
    pool,
    embedded: embedded !== undefined,
    async close() {
      await pool.end().catch(() => undefined);
      await embedded?.stop();
    },
  };
}

/**
 * What each composition root does with its database: open it from the entrypoint's config,
 * close it as the last shutdown step and, unless the component must keep serving through a
 * database outage (the gateway), report it in /readyz.
 */
export async function openEntrypointDatabase(
  component: string,
  config: {
    DATABASE_URL?: string | undefined;
    PROXYFLEET_DATA_DIR: string;
    PROXYFLEET_DB_POOL_SIZE: number;
    PROXYFLEET_DB_QUERY_TIMEOUT_MS?: number;
  },
  runtime: { logger: Logger; registry: Registry; health: Health; shutdown: Shutdown },
  options: { readinessCheck: boolean } = { readinessCheck: true },
): Promise<Database> {
  const db = await openDatabase({
    databaseUrl: config.DATABASE_URL,
    dataDir: config.PROXYFLEET_DATA_DIR,
    poolSize: config.PROXYFLEET_DB_POOL_SIZE,
    queryTimeoutMs: config.PROXYFLEET_DB_QUERY_TIMEOUT_MS,
    component,
    logger: runtime.logger,
    registry: runtime.registry,
  });
  runtime.shutdown.add({ name: 'database', run: () => db.close(), order: SHUTDOWN_ORDER.LAST });
  if (options.readinessCheck)
    runtime.health.addCheck('database', async () => void (await db.pool.query('SELECT 1')));
  return db;
}
