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
}

export function createPool(options: PoolOptions): Pool {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.max,
    application_name: options.applicationName,
    types: PG_TYPES,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
    // Fail a query that waits on a lock or a dead server instead of hanging a request forever.
    statement_timeout: 15_000,
    keepAlive: true,
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
    if (!lost) await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.off('error', onError);
    client.release(lost);
  }
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
  /** Raised by the api_keys trigger when an account would have more than 10 active named keys. */
  NAMED_KEY_LIMIT: 'PF001',
} as const;
