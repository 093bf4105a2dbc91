// Email rendering (docs/alerts.md). Alerts are queued with a payload naming their cause; the
// sender renders subject and body from the state of the moment it sends, so both state the same
// numbers, and an alert whose condition no longer holds is dropped instead of sent.
import { z } from 'zod';
import type { Pool } from '#common/db/pool.ts';
import { bandwidthText } from '#common/billing/remaining.ts';
import { alertState } from '#common/billing/alerts.ts';
import { refillVerdict } from '#common/billing/auto-refill.ts';
import {
  expiredPayload,
  renderExpired,
  renderPastDue,
  renderRenewalInvoice,
  renewalPayload,
} from './render-subscriptions.ts';
import { renderSecurityNotice } from './render-security.ts';

export interface RenderedEmail {
  subject: string;
  body: string;
}

/** What to do with a queued email: send this text, or drop it (with the reason, for the log). */
export type Rendering = RenderedEmail | { drop: string };

/**
 * Bytes as the API and the dashboard show them, by one rule (docs/api.md, "Remaining
 * bandwidth"): GB rounded down, never "0 GB" while bytes remain.
 */
export const formatBytes = (bytes: number): string => bandwidthText(bytes);

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
    case 'subscription_past_due':
      return renderPastDue(pool, renewalPayload.parse(payload).renewalId);
    case 'subscription_expired':
      return renderExpired(pool, expiredPayload.parse(payload).subscriptionId);
    case 'security_notice':
      return renderSecurityNotice(payload);
    default:
      return { drop: `no renderer for ${kind}` };
  }
}

async function renderInvoice(pool: Pool, invoiceId: string): Promise<Rendering> {
  const renewal = await renderRenewalInvoice(pool, invoiceId);
  if (renewal) return renewal;
  const { rows } = await pool.query<{
    number: number;
    product: string;
    bytes: number;
    amount_cents: number | null;
    currency: string;
    source: string;
    threshold_bytes: number | null;
    remaining_bytes: number | null;
  }>(
    `SELECT i.number, i.product, i.bytes, i.amount_cents, i.currency, p.source, s.threshold_bytes, r.remaining_bytes
       FROM invoices i JOIN purchases p ON p.id = i.purchase_id
       LEFT JOIN auto_refill_settings s ON s.account_id = i.account_id AND s.product = i.product
       LEFT JOIN auto_refills r ON r.purchase_id = i.purchase_id
      WHERE i.id = $1`,
    [invoiceId],
  );
  const inv = rows[0];
  if (!inv) return { drop: 'invoice gone' };
  const amount = money(inv.amount_cents, inv.currency);
  const what = `${formatBytes(inv.bytes)} of ${inv.product} bandwidth`;
  const then = inv.remaining_bytes === null ? '' : ` ${formatBytes(inv.remaining_bytes)} was left then.`;
  const why =
    inv.source === 'auto_refill'
      ? `Auto-refill bought it: your remaining ${inv.product} bandwidth dropped below ` +
        `${formatBytes(inv.threshold_bytes ?? 0)}.${then}\n`
      : '';
  return {
    subject: `Invoice #${inv.number}: ${what}`,
    body: `Invoice #${inv.number} was issued for ${what}${amount ? `: ${amount}` : ''}.\n${why}The bandwidth is available now.\n`,
  };
}

/**
 * The low-bandwidth email, checked again and rendered from the balance now (docs/alerts.md):
 * remaining = bought - used, as GET /api/v1/usage states it. "Used up" only when nothing remains;
 * auto-refill is promised only when a refill may still be bought this month.
 */
export async function renderLowBandwidth(pool: Pool, accountId: string, product: string): Promise<Rendering> {
  const a = await alertState(pool, accountId, product);
  if (!a || a.totalBytes === 0) return { drop: 'no balance' };
  if (!a.alertOn) return { drop: 'low-bandwidth alerts turned off' };
  if (!a.low) return { drop: 'bandwidth no longer low' };
  const refill = await refillVerdict(pool, accountId, product);
  const left = `${formatBytes(a.remainingBytes)} of ${formatBytes(a.totalBytes)}`;
  const share = Math.max(0, Math.floor((a.remainingBytes / a.totalBytes) * 100));
  const refills =
    `Auto-refill is on: it buys ${formatBytes(refill.refillBytes ?? 0)} when less than ` +
    `${formatBytes(refill.thresholdBytes ?? 0)} is left, up to its monthly limit.\n`;
  if (a.remainingBytes <= 0) {
    return {
      subject: `Your ${product} bandwidth is used up`,
      body:
        `Your ${product} bandwidth is used up: ${left} left. ${product} traffic is refused until more is bought.\n` +
        (refill.allowed ? refills : 'Buy more bandwidth to keep it flowing.\n'),
    };
  }
  const advice = refill.allowed
    ? refills
    : refill.enabled
      ? `Auto-refill is on, but ${refill.reason === 'credit_limit' ? 'a refill would pass your credit limit' : 'it has made its refills'} for this month. Buy more bandwidth to keep it flowing.\n`
      : 'Buy more bandwidth, or turn on auto-refill, to keep it flowing.\n';
  const floor =
    a.floorBytes !== null && a.thresholdBytes === a.floorBytes ? ` or ${formatBytes(a.floorBytes)}` : '';
  return {
    subject: `Low ${product} bandwidth: ${left} left`,
    body:
      `Your ${product} bandwidth is running low: ${left} left (${share}%; this alert is sent at ${a.percent}%${floor}).\n` +
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
  const tried =
    r.payment_method === 'invoice'
      ? `Auto-refill did not buy ${formatBytes(r.bytes)} of ${r.product} bandwidth${r.error ? `: ${r.error}` : ''}.\n`
      : `Auto-refill tried to buy ${formatBytes(r.bytes)} of ${r.product} bandwidth with payment method ` +
        `"${r.payment_method}", and the payment failed${r.error ? `: ${r.error}` : ''}.\n`;
  return {
    subject: `Auto-refill of ${r.product} bandwidth failed`,
    body:
      tried +
      `Nothing was bought. ${r.product} traffic stops when the remaining bandwidth runs out; ` +
      `buy bandwidth${r.payment_method === 'invoice' ? '' : ' or fix the payment method'} to keep it flowing.\n`,
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
