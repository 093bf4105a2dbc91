// Opens the database an entrypoint uses: DATABASE_URL when set, otherwise an embedded PostgreSQL
// in the data directory. Applies pending migrations (under their advisory lock, on a session
// connection) before the pool serves anything, and registers the pool and the embedded server
// with the shutdown, last. Two URLs (docs/adr/0068): the pool's, which may be a transaction-mode
// pooler, and the session URL for what keeps state on its connection (LISTEN, session locks).
import type { Registry } from 'prom-client';
import { ConfigError } from '../config.ts';
import type { Health } from '../health.ts';
import type { Logger } from '../logger.ts';
import { safeUrl } from '../logger.ts';
import { SHUTDOWN_ORDER, type Shutdown } from '../shutdown.ts';
import { startEmbeddedPostgres, type EmbeddedDatabase } from './embedded.ts';
import { migrateSchema } from './migrate.ts';
import { createPool, DEFAULT_QUERY_TIMEOUT_MS, type DbPooling, type Pool } from './pool.ts';

export interface Database {
  /** What the pool connects to (DATABASE_URL, or the embedded server). */
  pooledUrl: string;
  /**
   * A connection that keeps its session: the change feed's LISTEN, the worker's leader lock,
   * migrations. Never a transaction-mode pool.
   */
  sessionUrl: string;
  pool: Pool;
  embedded: boolean;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  databaseUrl: string | undefined;
  /** Default: databaseUrl (required when `pooling` is `transaction`). */
  sessionUrl?: string | undefined;
  /** How databaseUrl pools (pool.ts); default `session`. */
  pooling?: DbPooling;
  dataDir: string;
  poolSize: number;
  /** The pool's client-side query timeout (pool.ts; default there). */
  queryTimeoutMs?: number | undefined;
  component: string;
  logger: Logger;
  registry?: Registry;
  migrate?: boolean;
}

/** The settings' problems, each with its variable (empty when they fit together). */
export function databaseSettingsProblems(
  options: Pick<OpenDatabaseOptions, 'databaseUrl' | 'sessionUrl' | 'pooling'>,
): string[] {
  if (options.pooling !== 'transaction') return [];
  const problems: string[] = [];
  if (!options.databaseUrl)
    problems.push('DATABASE_URL: required when PROXYFLEET_DB_POOLING=transaction (the transaction pooler)');
  if (!options.sessionUrl || options.sessionUrl === options.databaseUrl)
    problems.push(
      'PROXYFLEET_DATABASE_SESSION_URL: required when PROXYFLEET_DB_POOLING=transaction, and not DATABASE_URL: ' +
        "the change feed's LISTEN and the worker's leader lock need a session (a direct connection or a session-mode pool)",
    );
  return problems;
}

export async function openDatabase(options: OpenDatabaseOptions): Promise<Database> {
  const { logger } = options;
  const problems = databaseSettingsProblems(options);
  if (problems.length) throw new ConfigError(problems);
  let embedded: EmbeddedDatabase | undefined;
  let pooledUrl = options.databaseUrl;
  if (!pooledUrl) {
    embedded = await startEmbeddedPostgres(options.dataDir, logger);
    pooledUrl = embedded.url;
  }
  const sessionUrl = options.sessionUrl ?? pooledUrl;
  try {
    if (options.migrate !== false) {
      const { migrations: applied, functions } = await migrateSchema(sessionUrl);
      logger.info(
        { applied, functions, database: safeUrl(sessionUrl) },
        applied.length || functions.length ? 'migrations applied' : 'schema up to date',
      );
    }
  } catch (err) {
    await embedded?.stop();
    throw err;
  }
  const pool = createPool({
    url: pooledUrl,
    max: options.poolSize,
    applicationName: `proxyfleet-${options.component}`,
    logger,
    ...(options.pooling ? { pooling: options.pooling } : {}),
    ...(options.queryTimeoutMs !== undefined ? { queryTimeoutMs: options.queryTimeoutMs } : {}),
    ...(options.registry ? { registry: options.registry } : {}),
  });
  if (options.pooling === 'transaction')
    await checkServerStatementTimeout(pool, options.queryTimeoutMs ?? DEFAULT_QUERY_TIMEOUT_MS, logger);
  return {
    pooledUrl,
    sessionUrl,
    pool,
    embedded: embedded !== undefined,
    async close() {
      await pool.end().catch(() => undefined);
      await embedded?.stop();
    },
  };
}

/**
 * Behind a transaction pooler the pool cannot set statement_timeout itself (pool.ts): says so at
 * start when the server connections have none, or one the client-side timeout would beat (then a
 * lock wait ends in "Query read timeout" and a dropped connection instead of the server's 57014).
 */
async function checkServerStatementTimeout(
  pool: Pool,
  queryTimeoutMs: number,
  logger: Logger,
): Promise<void> {
  try {
    const { rows } = await pool.query<{ ms: string }>(
      "SELECT setting AS ms FROM pg_settings WHERE name = 'statement_timeout'",
    );
    const ms = Number(rows[0]?.ms ?? 0);
    if (ms === 0 || ms >= queryTimeoutMs)
      logger.warn(
        { statementTimeoutMs: ms, queryTimeoutMs },
        'behind the transaction pooler the server connections have no statement_timeout below the query timeout: ' +
          "set one in the pooler's connect_query or on the database role (docs/adr/0068)",
      );
  } catch (err) {
    logger.warn({ err: (err as Error).message }, "could not read the server connections' statement_timeout");
  }
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
    PROXYFLEET_DATABASE_SESSION_URL?: string | undefined;
    PROXYFLEET_DB_POOLING?: DbPooling;
    PROXYFLEET_DATA_DIR: string;
    PROXYFLEET_DB_POOL_SIZE: number;
    PROXYFLEET_DB_QUERY_TIMEOUT_MS?: number;
  },
  runtime: { logger: Logger; registry: Registry; health: Health; shutdown: Shutdown },
  options: { readinessCheck: boolean } = { readinessCheck: true },
): Promise<Database> {
  const db = await openDatabase({
    databaseUrl: config.DATABASE_URL,
    sessionUrl: config.PROXYFLEET_DATABASE_SESSION_URL,
    ...(config.PROXYFLEET_DB_POOLING ? { pooling: config.PROXYFLEET_DB_POOLING } : {}),
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
