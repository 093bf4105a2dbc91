// The one owner of the pg pool: it attaches the error handler (an idle client that dies emits
// 'error' on the pool, and an unhandled 'error' kills the process: node-postgres #2386), converts
// bigint in one place, and exposes pool gauges.
import pg from 'pg';
import { Gauge, type Registry } from 'prom-client';
import type { Logger } from '../logger.ts';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

const INT8_OID = 20;

/**
 * bigint columns (bytes, counters) arrive as numbers. Byte counts stay below 2^53 (9 PB per
 * account and product); a larger value is a bug, so it throws rather than silently rounding.
 */
export function parseInt8(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new RangeError(`bigint ${text} exceeds Number.MAX_SAFE_INTEGER`);
  return value;
}

/** pg type parsers with int8 as a checked number; every client we create uses them. */
export const PG_TYPES = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary'
      ? parseInt8
      : (pg.types.getTypeParser(oid, format) as unknown)) as typeof pg.types.getTypeParser,
};

export interface PoolOptions {
  url: string;
  max: number;
  applicationName: string;
  logger: Logger;
  registry?: Registry;
  /** Client-side bound on every query (default DEFAULT_QUERY_TIMEOUT_MS; PROXYFLEET_DB_QUERY_TIMEOUT_MS). */
  queryTimeoutMs?: number;
  /**
   * `transaction`: `url` is a transaction-mode pooler (PgBouncer), which refuses a connection that
   * carries session settings in its startup packet ("unsupported startup parameter:
   * statement_timeout"); the server-side statement_timeout is then the pooler's (its
   * connect_query) or the role's (docs/adr/0068). Default `session`.
   */
  pooling?: DbPooling;
}

export type DbPooling = 'session' | 'transaction';

/**
 * A query the server has not answered within this long fails with pg's "Query read timeout" and
 * its connection is dropped (pool.query releases it as broken): on a connection that hangs (the
 * database unreachable, packets dropped) a query would otherwise wait for TCP to give up, hours.
 */
export const DEFAULT_QUERY_TIMEOUT_MS = 20_000;
/** Opening a connection (TCP, TLS, startup) and waiting for a free pool client, each. */
export const CONNECTION_TIMEOUT_MS = 5_000;

/**
 * The server-side statement_timeout that goes with a client-side query timeout: shorter, so a
 * server that is there cancels a slow statement (a lock wait, a bad plan) and says so with its
 * own error (SQLSTATE 57014) before the client gives up on the connection. 15 s for the default.
 */
export function statementTimeoutFor(queryTimeoutMs: number): number {
  return queryTimeoutMs - Math.min(5_000, Math.floor(queryTimeoutMs / 4));
}

export function createPool(options: PoolOptions): Pool {
  const queryTimeoutMs = options.queryTimeoutMs ?? DEFAULT_QUERY_TIMEOUT_MS;
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.max,
    application_name: options.applicationName,
    types: PG_TYPES,
    connectionTimeoutMillis: CONNECTION_TIMEOUT_MS,
    idleTimeoutMillis: 30_000,
    // A statement that waits on a lock or runs long is cancelled by the server (behind a
    // transaction pooler, by the server connection's own setting: no session state here)...
    ...(options.pooling === 'transaction' ? {} : { statement_timeout: statementTimeoutFor(queryTimeoutMs) }),
    // ...and one the server never answers (a connection that hangs) fails on the client's side.
    query_timeout: queryTimeoutMs,
    keepAlive: true,
    // An idle connection to a vanished server is found by TCP keepalive probes after 10 s idle
    // rather than the kernel's default two hours.
    keepAliveInitialDelayMillis: 10_000,
  });
  pool.on('error', (err) =>
    options.logger.warn({ err: err.message }, 'idle database client failed; it was removed'),
  );
  if (options.registry) {
    const registry = options.registry;
    new Gauge({
      name: 'proxyfleet_db_pool_clients',
      help: 'Database pool clients by state',
      labelNames: ['state'],
      registers: [registry],
      collect() {
        this.set({ state: 'total' }, pool.totalCount);
        this.set({ state: 'idle' }, pool.idleCount);
        this.set({ state: 'waiting' }, pool.waitingCount);
      },
    });
  }
  return pool;
}

/** Runs `fn` in a transaction on one client, rolling back on any error. */
export async function withTransaction<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  // A checked-out client has no listener of the pool's: a connection lost between two statements
  // would be an unhandled 'error' event and end the process. Keep it, fail the transaction with
  // it, and hand the broken client back as broken (release(err) destroys it).
  let lost: Error | undefined;
  const onError = (err: Error): void => {
    lost = err;
  };
  client.on('error', onError);
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    // A query that timed out left the connection in an unknown state (its answer may still come):
    // no ROLLBACK on it (that would wait a second timeout), the client is destroyed instead.
    if (!lost && isQueryTimeout(err)) lost = err;
    if (!lost)
      await client.query('ROLLBACK').catch((rollbackErr: Error) => {
        lost = rollbackErr;
      });
    throw err;
  } finally {
    client.off('error', onError);
    client.release(lost);
  }
}

/** pg's error for a query that hit query_timeout (it has no code to match on). */
function isQueryTimeout(err: unknown): err is Error {
  return err instanceof Error && err.message === 'Query read timeout';
}

/** The SQLSTATE of a database error, if it is one. */
export function sqlState(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string'
    ? err.code
    : undefined;
}

export const SQLSTATE = {
  UNIQUE_VIOLATION: '23505',
  CHECK_VIOLATION: '23514',
  FOREIGN_KEY_VIOLATION: '23503',
  EXCLUSION_VIOLATION: '23P01',
  /** Raised by the api_keys trigger when an account would have more than 10 active named keys. */
  NAMED_KEY_LIMIT: 'PF001',
} as const;
