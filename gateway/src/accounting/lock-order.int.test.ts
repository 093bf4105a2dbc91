import { describe, expect, it } from '@jest/globals';
import { lockWaiters, useTestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';

const fx = useTestDatabase();

describe('usage_record lock order', () => {
  it('locks every lease it releases before any balance (the fold order), so it cannot deadlock with usage_fold', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 10_000_000 });
    const acquire = async () =>
      (
        await fx.db.pool.query<{ out_lease_id: string }>(
          'SELECT * FROM lease_acquire($1, $2, $3, $4, $5, $6)',
          [account.id, 'basic', 'pod-a', 1_000_000, 262_144, 300],
        )
      ).rows[0]!.out_lease_id;
    const [low, high] = [await acquire(), await acquire()].sort() as [string, string];
    // A fold: it holds its leases (here the later one), then updates balances.
    const fold = await fx.db.pool.connect();
    try {
      await fold.query('BEGIN');
      await fold.query('SELECT 1 FROM bandwidth_leases WHERE id = $1 FOR UPDATE', [high]);
      const releases = JSON.stringify([
        { lease_id: low, spent: 0 },
        { lease_id: high, spent: 0 },
      ]);
      const record = fx.db.pool.query<{ ok: boolean }>('SELECT usage_record($1, $2, $3, $4, $5) AS ok', [
        'lock-order',
        'pod-a',
        '[]',
        '[]',
        releases,
      ]);
      record.catch(() => undefined);
      while ((await lockWaiters(fx.db.pool, 'SELECT usage_record')) === 0)
        await new Promise((r) => setTimeout(r, 20));
      try {
        // Before the fix usage_record held this balance (released the earlier lease) while
        // waiting for the later one: deadlock detected here or in usage_record.
        await fold.query(
          `UPDATE balances SET updated_at = now() WHERE account_id = $1 AND product = 'basic'`,
          [account.id],
        );
        await fold.query('COMMIT');
      } catch (err) {
        await fold.query('ROLLBACK');
        throw err;
      }
      expect((await record).rows[0]!.ok).toBe(true);
    } finally {
      fold.release();
    }
    const open = await fx.db.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM bandwidth_leases WHERE account_id = $1 AND released_at IS NULL',
      [account.id],
    );
    expect(open.rows[0]!.n).toBe(0);
  }, 20_000);
  it('usage_record_many locks the leases of every queued batch before any balance, so it cannot deadlock with usage_fold', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 10_000_000 });
    const acquire = async () =>
      (
        await fx.db.pool.query<{ out_lease_id: string }>(
          'SELECT * FROM lease_acquire($1, $2, $3, $4, $5, $6)',
          [account.id, 'basic', 'pod-b', 1_000_000, 262_144, 300],
        )
      ).rows[0]!.out_lease_id;
    const [low, high] = [await acquire(), await acquire()].sort() as [string, string];
    const fold = await fx.db.pool.connect();
    try {
      await fold.query('BEGIN');
      await fold.query('SELECT 1 FROM bandwidth_leases WHERE id = $1 FOR UPDATE', [high]);
      // Two queued batches: the first returns the earlier lease, the second the later one.
      const batches = JSON.stringify([
        { key: 'lock-order-many-1', releases: [{ lease_id: low, spent: 0 }] },
        { key: 'lock-order-many-2', releases: [{ lease_id: high, spent: 0 }] },
      ]);
      const record = fx.db.pool.query<{ n: number }>('SELECT usage_record_many($1, $2::jsonb) AS n', [
        'pod-b',
        batches,
      ]);
      record.catch(() => undefined);
      while ((await lockWaiters(fx.db.pool, 'SELECT usage_record_many')) === 0)
        await new Promise((r) => setTimeout(r, 20));
      try {
        // Batch by batch, the first would hold the balance while the second waits for the later
        // lease: deadlock detected here or in usage_record_many.
        await fold.query(
          `UPDATE balances SET updated_at = now() WHERE account_id = $1 AND product = 'basic'`,
          [account.id],
        );
        await fold.query('COMMIT');
      } catch (err) {
        await fold.query('ROLLBACK');
        throw err;
      }
      expect((await record).rows[0]!.n).toBe(2);
    } finally {
      fold.release();
    }
    const open = await fx.db.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM bandwidth_leases WHERE account_id = $1 AND released_at IS NULL',
      [account.id],
    );
    expect(open.rows[0]!.n).toBe(0);
  }, 20_000);
});
