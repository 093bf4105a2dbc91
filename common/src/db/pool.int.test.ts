// withTransaction owns the client it checks out: a connection lost between two statements of a
// transaction (the server restarted, a pg_terminate_backend) must fail that transaction, not emit
// an 'error' event that nobody listens to and that takes the whole process down.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '../../../test/db.ts';
import { withTransaction } from './pool.ts';

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
