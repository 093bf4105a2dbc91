// The worker jobs that settle gateway usage (migrations/0020, docs/adr/0020): the fold turns
// usage batches into balances (used_bytes, requests_count, leased_bytes) and usage_hourly; the
// reaper returns leases that expired or whose gateway stopped heartbeating (migrations/0080: over
// 30 s silent), and forgets expired sticky sessions. The stripes job re-levels the stripes of hot
// balances (docs/adr/0107), one short transaction per balance.
import type { Job } from '../jobs.ts';

/** Batches folded per statement; the job loops until none is left. */
const FOLD_BATCHES = 500;
/** One fold run never folds more than this many statements' worth (then yields to the next run). */
const FOLD_MAX_ROUNDS = 20;
const USAGE_FOLD_INTERVAL_MS = 1_000;
const LEASE_REAPER_INTERVAL_MS = 10_000;
const BALANCE_STRIPES_INTERVAL_MS = 1_000;
/** Hot balances re-levelled per run. */
const BALANCE_STRIPES_PER_RUN = 1_000;

export const usageFoldJob: Job = {
  name: 'usage-fold',
  intervalMs: USAGE_FOLD_INTERVAL_MS,
  async run({ pool }) {
    for (let round = 0; round < FOLD_MAX_ROUNDS; round++) {
      const { rows } = await pool.query<{ folded: number }>('SELECT usage_fold($1) AS folded', [
        FOLD_BATCHES,
      ]);
      if ((rows[0]?.folded ?? 0) < FOLD_BATCHES) return;
    }
  },
};

export const leaseReaperJob: Job = {
  name: 'lease-reaper',
  intervalMs: LEASE_REAPER_INTERVAL_MS,
  async run({ pool, logger }) {
    const { rows } = await pool.query<{ reaped: number }>('SELECT lease_reap(1000) AS reaped');
    const reaped = rows[0]?.reaped ?? 0;
    if (reaped)
      logger.warn(
        { reaped },
        'bandwidth leases returned: expired, or their gateway stopped heartbeating without releasing them',
      );
    await pool.query("DELETE FROM sticky_sessions WHERE expires_at < now() - interval '1 hour'");
  },
};

export const balanceStripesJob: Job = {
  name: 'balance-stripes',
  intervalMs: BALANCE_STRIPES_INTERVAL_MS,
  async run({ pool }) {
    const { rows } = await pool.query<{ account_id: string; product: string }>(
      'SELECT account_id, product FROM balance_stripes_due($1)',
      [BALANCE_STRIPES_PER_RUN],
    );
    for (const { account_id, product } of rows)
      await pool.query('SELECT balance_stripes_rebalance($1, $2)', [account_id, product]);
  },
};
