// The worker's side of billing (docs/adr/0073): the room's decisions live in SQL and
// common/src/billing; these jobs run them on a timer.
// - balance-sweep: the balances no draw or fold looks at that need a decision now (settings turned
//   on, a new month lifting the refill cap: billing_sweep_due), one transaction each;
// - auto-refill: pays refills left 'pending' by a method that must charge first (refills.ts);
// - billing-config: writes the price table and the default credit limit to the database.
import { syncCreditDefault } from '#common/billing/credit.ts';
import { syncIspPrices, syncPrices, type PriceTable } from '#common/billing/prices.ts';
import type { PaymentMethods } from '#common/billing/payment.ts';
import { payPendingRefill } from '#common/billing/refills.ts';
import type { Job } from '../jobs.ts';

export const BALANCE_SWEEP_INTERVAL_MS = 5_000;
const BALANCE_SWEEP_BATCH = 100;
export const AUTO_REFILL_INTERVAL_MS = 1_000;

export const balanceSweepJob: Job = {
  name: 'balance-sweep',
  intervalMs: BALANCE_SWEEP_INTERVAL_MS,
  async run({ pool, logger }) {
    const { rows } = await pool.query<{ account_id: string; product: string }>(
      'SELECT account_id, product FROM billing_sweep_due($1)',
      [BALANCE_SWEEP_BATCH],
    );
    for (const r of rows) await pool.query('SELECT billing_sweep_one($1, $2)', [r.account_id, r.product]);
    if (rows.length) logger.debug({ checked: rows.length }, 'balances checked by the sweep');
  },
};

/** Writes the configured prices and default credit limit once, at start (then hourly, harmlessly). */
export function billingConfigJob(config: {
  prices: PriceTable;
  creditLimitCents: number;
  /** ISP proxy per month by country, '*' for the rest (docs/billing.md "Prices"). */
  ispPrices?: Readonly<Record<string, number>>;
}): Job {
  return {
    name: 'billing-config',
    intervalMs: 3_600_000,
    async run({ pool }) {
      await syncPrices(pool, config.prices);
      await syncCreditDefault(pool, config.creditLimitCents);
      if (config.ispPrices) await syncIspPrices(pool, config.ispPrices, config.prices.currency);
    },
  };
}

export function autoRefillJob(methods: PaymentMethods): Job {
  return {
    name: 'auto-refill',
    intervalMs: AUTO_REFILL_INTERVAL_MS,
    async run({ pool, logger }) {
      // One refill per transaction; a handful per run so one slow method cannot hold the job.
      for (let i = 0; i < 20; i++) if (!(await payPendingRefill(pool, methods, logger))) return;
    },
  };
}
