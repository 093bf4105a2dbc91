// The subscription renewals (docs/billing.md "Renewals", docs/adr/0080): every due subscription
// period, one transaction each (common/src/billing/renewals.ts).
import type { PaymentMethods } from '#common/billing/payment.ts';
import { renewDue } from '#common/billing/renewals.ts';
import type { Job } from '../jobs.ts';

export const RENEWAL_INTERVAL_MS = 10_000;

export function renewalJob(options: { methods: PaymentMethods; graceDays: number }): Job {
  return {
    name: 'subscription-renewals',
    intervalMs: RENEWAL_INTERVAL_MS,
    async run({ pool, logger }) {
      const counts = await renewDue(pool, { ...options, logger });
      if (counts.renewed + counts.failed + counts.expired > 0) logger.info(counts, 'subscription renewals');
    },
  };
}
