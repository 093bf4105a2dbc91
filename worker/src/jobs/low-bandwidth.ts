// The low-bandwidth alert (spec section 6, docs/alerts.md): when a product's remaining bandwidth
// (total_bytes - used_bytes, as folded from gateway usage) falls to the account's
// alert_settings.low_bandwidth_percent of total_bytes or below, queue one email. The dedupe key
// names the purchase level (total_bytes), so the alert goes out once per level and again only
// after a new purchase raised the level and that runs low too.
import type { Job } from '../jobs.ts';

export const LOW_BANDWIDTH_INTERVAL_MS = 30_000;
/** Alerts queued per statement; the job loops until none is left. */
const LOW_BANDWIDTH_BATCH = 500;
const BYTES_PER_GB = 1e9;

interface LowBalance {
  account_id: string;
  product: string;
  total_bytes: number;
  used_bytes: number;
  percent: number;
  email: string;
  dedupe_key: string;
}

export function lowBandwidthEmail(
  balance: Pick<LowBalance, 'product' | 'total_bytes' | 'used_bytes' | 'percent'>,
): {
  subject: string;
  body: string;
} {
  const remaining = Math.max(0, balance.total_bytes - balance.used_bytes);
  const left = `${formatGb(remaining)} GB of ${formatGb(balance.total_bytes)} GB`;
  const share = Math.floor((remaining / balance.total_bytes) * 100);
  return {
    subject:
      remaining === 0
        ? `Your ${balance.product} bandwidth is used up`
        : `Low ${balance.product} bandwidth: ${left} left`,
    body:
      `Your ${balance.product} bandwidth is running low: ${left} left (${share}%; ` +
      `this alert is sent at ${balance.percent}%).\n` +
      `Traffic stops when it runs out. Buy more bandwidth, or turn on auto-refill, to keep it flowing.\n`,
  };
}

function formatGb(bytes: number): string {
  return (bytes / BYTES_PER_GB).toLocaleString('en-US', { maximumFractionDigits: 3 });
}

export const lowBandwidthJob: Job = {
  name: 'low-bandwidth-alerts',
  intervalMs: LOW_BANDWIDTH_INTERVAL_MS,
  async run({ pool, logger }) {
    for (;;) {
      // NOT EXISTS skips levels already alerted without burning an identity value on each run;
      // ON CONFLICT below covers a race with another runner.
      const { rows } = await pool.query<LowBalance>(
        `SELECT * FROM (
           SELECT b.account_id, b.product, b.total_bytes, b.used_bytes, s.low_bandwidth_percent AS percent, a.email,
                  'low_bandwidth:' || b.account_id || ':' || b.product || ':' || b.total_bytes AS dedupe_key
             FROM balances b
             JOIN alert_settings s ON s.account_id = b.account_id AND s.low_bandwidth
             JOIN accounts a ON a.id = b.account_id
            WHERE b.total_bytes > 0
              AND (b.total_bytes - b.used_bytes) * 100 <= b.total_bytes * s.low_bandwidth_percent) low
          WHERE NOT EXISTS (SELECT 1 FROM email_outbox o WHERE o.dedupe_key = low.dedupe_key)
          ORDER BY account_id, product
          LIMIT $1`,
        [LOW_BANDWIDTH_BATCH],
      );
      let queued = 0;
      for (const balance of rows) {
        const { subject, body } = lowBandwidthEmail(balance);
        const { rowCount } = await pool.query(
          `INSERT INTO email_outbox (account_id, kind, dedupe_key, to_address, subject, body_text, message_id)
           VALUES ($1, 'low_bandwidth', $2, $3, $4, $5, $6) ON CONFLICT (dedupe_key) DO NOTHING`,
          [
            balance.account_id,
            balance.dedupe_key,
            balance.email,
            subject,
            body,
            `<low-bandwidth-${balance.account_id}-${balance.product}-${balance.total_bytes}@proxyfleet>`,
          ],
        );
        queued += rowCount ?? 0;
      }
      if (queued) logger.info({ queued }, 'low-bandwidth alerts queued');
      if (rows.length < LOW_BANDWIDTH_BATCH) return;
    }
  },
};
