// withTransaction owns the client it checks out: a connection lost between two statements of a
// transaction (the server restarted, a pg_terminate_backend) must fail that transaction, not emit
// an 'error' event that nobody listens to and that takes the whole process down.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createLogger } from '../logger.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { TcpRelay } from '#test/tcp-relay.ts';
import { createPool, sqlState, withTransaction, type Pool } from './pool.ts';

describe('withTransaction', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db.drop());

  it('fails the transaction when its connection is killed between statements, and the pool recovers', async () => {
    const uncaught: Error[] = [];
    const onUncaught = (err: Error): void => void uncaught.push(err);
    process.prependListener('uncaughtException', onUncaught);
    try {
      const attempt = withTransaction(db.pool, async (client) => {
        const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        // Killed from another connection while this transaction is between statements.
        await db.pool.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
        await new Promise((resolve) => setTimeout(resolve, 200));
        await client.query('SELECT 1');
      });
      await expect(attempt).rejects.toThrow();
      expect(uncaught).toEqual([]);
      const { rows } = await db.pool.query<{ ok: number }>('SELECT 1 AS ok');
      expect(rows[0]!.ok).toBe(1);
    } finally {
      process.removeListener('uncaughtException', onUncaught);
    }
  });
});

// The client-side query timeout (docs/adr/0025): with statement_timeout only, a query on a connection that hangs (the
// database unreachable, packets dropped) never answered. The pool bounds every query on its side.
describe('client-side query timeout', () => {
  const QUERY_TIMEOUT_MS = 2_000;
  /** Far past the timeout: reaching it means the query would have hung. */
  const HUNG_MS = 15_000;
  let db: TestDatabase;
  let relay: TcpRelay;
  let pool: Pool;
  beforeAll(async () => {
    db = await createTestDatabase();
    const relayed = await TcpRelay.forUrl(db.url);
    relay = relayed.relay;
    pool = createPool({
      url: relayed.url,
      max: 2,
      applicationName: 'pool-timeout-test',
      logger: createLogger('test', 'silent'),
      queryTimeoutMs: QUERY_TIMEOUT_MS,
    });
  });
  afterAll(async () => {
    relay.forward();
    await pool.end().catch(() => undefined);
    await relay.close();
    await db.drop();
  });

  /** The query's outcome: its rows, its error, or 'hung' when it has neither after HUNG_MS. */
  async function outcome(run: () => Promise<unknown>): Promise<unknown> {
    let timer: NodeJS.Timeout | undefined;
    const hung = new Promise<string>((r) => (timer = setTimeout(() => r('hung'), HUNG_MS)));
    try {
      return await Promise.race([run().catch((err: unknown) => err), hung]);
    } finally {
      clearTimeout(timer);
    }
  }

  async function recovered(): Promise<boolean> {
    const deadline = Date.now() + HUNG_MS;
    while (Date.now() < deadline) {
      const ok = await pool.query<{ ok: number }>('SELECT 1 AS ok').then(
        (r) => r.rows[0]?.ok === 1,
        () => false,
      );
      if (ok) return true;
      await new Promise((r) => setTimeout(r, 200));
    }
    return false;
  }

  it('a query on a black-holed connection rejects with a timeout, and the pool recovers when the network is back', async () => {
    expect((await pool.query<{ ok: number }>('SELECT 1 AS ok')).rows).toEqual([{ ok: 1 }]);
    relay.blackHole();
    const started = Date.now();
    const result = await outcome(() => pool.query('SELECT 1'));
    expect(result).toBeInstanceOf(Error);
    expect((result as Error).message).toBe('Query read timeout');
    process.stdout.write(`pool test: black-holed query rejected after ${Date.now() - started} ms\n`);
    // A new connection meanwhile fails too (connectionTimeoutMillis), it does not hang either.
    expect(await outcome(() => pool.query('SELECT 1'))).toBeInstanceOf(Error);
    relay.forward();
    expect(await recovered()).toBe(true);
  }, 60_000);

  it('a transaction whose connection hangs fails, and its client is destroyed, not handed back', async () => {
    expect(await recovered()).toBe(true);
    const result = await outcome(() =>
      withTransaction(pool, async (client) => {
        await client.query('SELECT 1');
        relay.blackHole();
        await client.query('SELECT 2');
      }),
    );
    expect((result as Error).message).toBe('Query read timeout');
    // No broken connection left in the pool for the next caller to wait on.
    expect(pool.totalCount).toBe(0);
    relay.forward();
    expect(await recovered()).toBe(true);
  }, 60_000);

  it('a slow statement on a live server is cancelled by the server first, with its own error', async () => {
    // statement_timeout is below the query timeout (statementTimeoutFor): 9 s for 12 s. The 2 s
    // pool above leaves the server's error only 500 ms to arrive before the client gives up, too
    // little on a busy machine; 3 s still fails this if the two timeouts were the other way round.
    const slow = createPool({
      url: db.url,
      max: 1,
      applicationName: 'pool-statement-timeout-test',
      logger: createLogger('test', 'silent'),
      queryTimeoutMs: 12_000,
    });
    try {
      const result = await outcome(() => slow.query('SELECT pg_sleep(30)'));
      expect(sqlState(result)).toBe('57014');
    } finally {
      await slow.end();
    }
  }, 30_000);
});
