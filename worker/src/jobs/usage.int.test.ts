import { describe, expect, it } from '@jest/globals';
import { createLogger } from '#common/logger.ts';
import { useTestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { leaseReaperJob, usageFoldJob } from './usage.ts';

const fx = useTestDatabase();
const logger = createLogger('test', 'silent');

type Balance = { used_bytes: number; leased_bytes: number; requests_count: number };

/** usage_record as a gateway's flush calls it: one batch, its usage lines and lease spends. */
const usageRecord = (key: string, gateway: string, lines: string, spends: string) =>
  fx.db.pool.query('SELECT usage_record($1, $2, $3, $4, $5)', [key, gateway, lines, spends, '[]']);

async function balance(accountId: string) {
  const { rows } = await fx.db.pool.query<Balance>(
    `SELECT used_bytes, leased_bytes, requests_count FROM balances WHERE account_id = $1 AND product = 'basic'`,
    [accountId],
  );
  return rows[0]!;
}

describe('usage-fold and lease-reaper jobs', () => {
  it('settle a lease that was partly flushed, never counting a byte twice', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 10_000_000 });
    const { rows } = await fx.db.pool.query<{ out_lease_id: string; out_granted: number }>(
      'SELECT * FROM lease_acquire($1, $2, $3, $4, $5, $6)',
      [account.id, 'basic', 'pod-a', 4_000_000, 262_144, 300],
    );
    const lease = rows[0]!;
    expect(lease.out_granted).toBe(4_000_000);
    const line = (up: number, down: number, requests: number) =>
      JSON.stringify([
        { account_id: account.id, product: 'basic', bytes_up: up, bytes_down: down, requests },
      ]);
    const spend = (bytes: number) => JSON.stringify([{ lease_id: lease.out_lease_id, bytes }]);
    await usageRecord('k1', 'pod-a', line(100, 900, 1), spend(1000));
    // Flushed, not folded: still held by the lease.
    expect(await balance(account.id)).toMatchObject({ used_bytes: 0, leased_bytes: 4_000_000 });
    await usageFoldJob.run({ pool: fx.db.pool, logger });
    expect(await balance(account.id)).toMatchObject({
      used_bytes: 1000,
      leased_bytes: 3_999_000,
      requests_count: 1,
    });
    // A second batch flushed, then the pod dies: the reaper returns the lease after expiry and
    // keeps holding exactly the unfolded spend until the fold charges it.
    await usageRecord('k2', 'pod-a', line(0, 5000, 0), spend(5000));
    await fx.db.pool.query(`UPDATE bandwidth_leases SET expires_at = now() - interval '1 second'`);
    await leaseReaperJob.run({ pool: fx.db.pool, logger });
    expect(await balance(account.id)).toMatchObject({ used_bytes: 1000, leased_bytes: 5000 });
    await usageFoldJob.run({ pool: fx.db.pool, logger });
    expect(await balance(account.id)).toMatchObject({ used_bytes: 6000, leased_bytes: 0, requests_count: 1 });
    const l = await fx.db.pool.query<{ charged_bytes: number; spent_bytes: number }>(
      'SELECT charged_bytes, spent_bytes FROM bandwidth_leases',
    );
    expect(l.rows[0]).toEqual({ charged_bytes: 6000, spent_bytes: 6000 });
    // A retried flush is a no-op.
    await usageRecord('k2', 'pod-a', line(0, 5000, 0), spend(5000));
    await usageFoldJob.run({ pool: fx.db.pool, logger });
    expect(await balance(account.id)).toMatchObject({ used_bytes: 6000 });
    const hourly = await fx.db.pool.query<{ bytes_up: number; bytes_down: number }>(
      'SELECT bytes_up, bytes_down FROM usage_hourly WHERE account_id = $1',
      [account.id],
    );
    expect(hourly.rows).toEqual([{ bytes_up: 100, bytes_down: 5900 }]);
  });

  it('returns the leases of a gateway whose heartbeat is over 30 s old, long before they expire', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 10_000_000 });
    for (const [gateway, silentSeconds] of [
      ['pod-dead', 31],
      ['pod-alive', 5],
    ] as const) {
      await fx.db.pool.query(
        `INSERT INTO gateway_heartbeats (gateway_id, plan, boot_id, beat_at)
         VALUES ($1, 'basic', 'boot', now() - make_interval(secs => $2))`,
        [gateway, silentSeconds],
      );
      await fx.db.pool.query('SELECT * FROM lease_acquire($1, $2, $3, $4, $5, $6)', [
        account.id,
        'basic',
        gateway,
        1_000_000,
        262_144,
        300,
      ]);
    }
    await leaseReaperJob.run({ pool: fx.db.pool, logger });
    const open = await fx.db.pool.query<{ gateway_id: string }>(
      'SELECT gateway_id FROM bandwidth_leases WHERE account_id = $1 AND released_at IS NULL',
      [account.id],
    );
    expect(open.rows).toEqual([{ gateway_id: 'pod-alive' }]);
    expect(await balance(account.id)).toMatchObject({ leased_bytes: 1_000_000 });
  });
});
