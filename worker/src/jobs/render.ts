// Email rendering (docs/alerts.md). Alerts are queued with a payload naming their cause; the
// sender renders subject and body from the state of the moment it sends, so both state the same
// numbers, and an alert whose condition no longer holds is dropped instead of sent.
import { z } from 'zod';
import type { Pool } from '#common/db/pool.ts';
import { BYTES_PER_GB, BYTES_PER_MB } from '#common/products.ts';

export interface RenderedEmail {
  subject: string;
  body: string;
}

/** What to do with a queued email: send this text, or drop it (with the reason, for the log). */
export type Rendering = RenderedEmail | { drop: string };

/**
 * Bytes in a unit that shows them: GB from 1 GB up, MB below (never "0 GB" while bytes remain),
 * "less than 0.1 MB" for a sliver, "0 MB" for none.
 */
export function formatBytes(bytes: number): string {
  const b = Math.max(0, bytes);
  if (b >= BYTES_PER_GB) return `${trim(b / BYTES_PER_GB)} GB`;
  if (b === 0) return '0 MB';
  if (b < BYTES_PER_MB / 10) return 'less than 0.1 MB';
  return `${trim(b / BYTES_PER_MB)} MB`;
}

/** Two decimals at most, rounded down so "left" is never overstated. */
function trim(value: number): string {
  return (Math.floor(value * 100) / 100).toLocaleString('en-US', { maximumFractionDigits: 2 });
}

function money(cents: number | null, currency: string): string {
  return cents === null ? '' : `${(cents / 100).toFixed(2)} ${currency}`;
}

const invoicePayload = z.object({ invoiceId: z.string() });
const lowPayload = z.object({ product: z.string(), crossing: z.number() });
const refillPayload = z.object({ refillId: z.string() });
const serverPayload = z.object({
  proxyId: z.string(),
  state: z.enum(['offline', 'error', 'recovered']),
  endpoint: z.string(),
  detail: z.string().nullish(),
});

export async function renderEmail(
  pool: Pool,
  kind: string,
  accountId: string | null,
  payload: unknown,
): Promise<Rendering> {
  switch (kind) {
    case 'new_invoice':
      return renderInvoice(pool, invoicePayload.parse(payload).invoiceId);
    case 'low_bandwidth':
      return renderLowBandwidth(pool, accountId ?? '', lowPayload.parse(payload).product);
    case 'auto_refill_failed':
      return renderRefillFailed(pool, refillPayload.parse(payload).refillId);
    case 'server_alert':
      return renderServerAlert(pool, accountId ?? '', serverPayload.parse(payload));
    default:
      return { drop: `no renderer for ${kind}` };
  }
}

async function renderInvoice(pool: Pool, invoiceId: string): Promise<Rendering> {
  const { rows } = await pool.query<{
    number: number;
    product: string;
    bytes: number;
    amount_cents: number | null;
    currency: string;
    source: string;
    threshold_bytes: number | null;
  }>(
    `SELECT i.number, i.product, i.bytes, i.amount_cents, i.currency, p.source, s.threshold_bytes
       FROM invoices i JOIN purchases p ON p.id = i.purchase_id
       LEFT JOIN auto_refill_settings s ON s.account_id = i.account_id AND s.product = i.product
      WHERE i.id = $1`,
    [invoiceId],
  );
  const inv = rows[0];
  if (!inv) return { drop: 'invoice gone' };
  const amount = money(inv.amount_cents, inv.currency);
  const what = `${formatBytes(inv.bytes)} of ${inv.product} bandwidth`;
  const why =
    inv.source === 'auto_refill'
      ? `Auto-refill bought it: your remaining ${inv.product} bandwidth dropped below ` +
        `${formatBytes(inv.threshold_bytes ?? 0)}.\n`
      : '';
  return {
    subject: `Invoice #${inv.number}: ${what}`,
    body: `Invoice #${inv.number} was issued for ${what}${amount ? `: ${amount}` : ''}.\n${why}The bandwidth is available now.\n`,
  };
}

export async function renderLowBandwidth(pool: Pool, accountId: string, product: string): Promise<Rendering> {
  const { rows } = await pool.query<{
    total: number;
    remaining: number;
    percent: number | null;
    on: boolean | null;
    refill_on: boolean | null;
    threshold_bytes: number | null;
    refill_bytes: number | null;
  }>(
    `SELECT b.total_bytes AS total, greatest(0, b.total_bytes - b.used_bytes - b.leased_bytes) AS remaining,
            s.low_bandwidth_percent AS percent, s.low_bandwidth AS on,
            r.enabled AS refill_on, r.threshold_bytes, r.refill_bytes
       FROM balances b
       LEFT JOIN alert_settings s ON s.account_id = b.account_id
       LEFT JOIN auto_refill_settings r ON r.account_id = b.account_id AND r.product = b.product
      WHERE b.account_id = $1 AND b.product = $2`,
    [accountId, product],
  );
  const b = rows[0];
  if (!b || b.total === 0) return { drop: 'no balance' };
  if (!b.on) return { drop: 'low-bandwidth alerts turned off' };
  const percent = b.percent ?? 10;
  if (b.remaining * 100 > b.total * percent) return { drop: 'bandwidth no longer low' };
  const left = `${formatBytes(b.remaining)} of ${formatBytes(b.total)}`;
  const share = Math.floor((b.remaining / b.total) * 100);
  const advice = b.refill_on
    ? `Auto-refill is on: it buys ${formatBytes(b.refill_bytes ?? 0)} when less than ` +
      `${formatBytes(b.threshold_bytes ?? 0)} is left, up to its monthly limit.\n`
    : 'Buy more bandwidth, or turn on auto-refill, to keep it flowing.\n';
  if (b.remaining === 0) {
    return {
      subject: `Your ${product} bandwidth is used up`,
      body: `Your ${product} bandwidth is used up: ${left} left. ${product} traffic is refused until more is bought.\n${advice}`,
    };
  }
  return {
    subject: `Low ${product} bandwidth: ${left} left`,
    body:
      `Your ${product} bandwidth is running low: ${left} left (${share}%; this alert is sent at ${percent}%).\n` +
      `Traffic stops when it runs out. ${advice}`,
  };
}

async function renderRefillFailed(pool: Pool, refillId: string): Promise<Rendering> {
  const { rows } = await pool.query<{
    product: string;
    bytes: number;
    payment_method: string;
    error: string | null;
  }>('SELECT product, bytes, payment_method, error FROM auto_refills WHERE id = $1', [refillId]);
  const r = rows[0];
  if (!r) return { drop: 'refill gone' };
  return {
    subject: `Auto-refill of ${r.product} bandwidth failed`,
    body:
      `Auto-refill tried to buy ${formatBytes(r.bytes)} of ${r.product} bandwidth with payment method ` +
      `"${r.payment_method}", and the payment failed${r.error ? `: ${r.error}` : ''}.\n` +
      `Nothing was bought. ${r.product} traffic stops when the remaining bandwidth runs out; ` +
      `buy bandwidth or fix the payment method to keep it flowing.\n`,
  };
}

async function renderServerAlert(
  pool: Pool,
  accountId: string,
  p: z.infer<typeof serverPayload>,
): Promise<Rendering> {
  const { rows } = await pool.query<{ on: boolean | null }>(
    `SELECT s.server_alerts AS on FROM isp_proxies i LEFT JOIN alert_settings s ON s.account_id = i.account_id
      WHERE i.id = $1 AND i.account_id = $2`,
    [p.proxyId, accountId],
  );
  if (!rows[0]) return { drop: 'server gone' };
  if (!rows[0].on) return { drop: 'server alerts turned off' };
  const detail = p.detail ? ` (${p.detail})` : '';
  switch (p.state) {
    case 'offline':
      return {
        subject: `Server ${p.endpoint} is offline`,
        body: `Your ISP proxy ${p.endpoint} did not accept connections on two checks in a row${detail}.\nYou get one more email when it recovers.\n`,
      };
    case 'error':
      return {
        subject: `Server ${p.endpoint} reports an error`,
        body: `Your ISP proxy ${p.endpoint} accepts connections, but a request through it failed${detail}.\nYou get one more email when it recovers.\n`,
      };
    case 'recovered':
      return {
        subject: `Server ${p.endpoint} recovered`,
        body: `Your ISP proxy ${p.endpoint} answers requests again.\n`,
      };
  }
}
