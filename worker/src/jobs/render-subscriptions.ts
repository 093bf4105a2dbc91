// The subscription emails (docs/billing.md "Emails"): a renewal's invoice, a failed renewal
// (past due, with the grace period) and an expiry, rendered when sent from the state then.
import { z } from 'zod';
import type { Pool } from '#common/db/pool.ts';

export interface SubscriptionEmail {
  subject: string;
  body: string;
}

export const renewalPayload = z.object({ renewalId: z.string() });
export const expiredPayload = z.object({ subscriptionId: z.string() });

const money = (cents: number | null, currency: string) =>
  cents === null ? '' : `${(cents / 100).toFixed(2)} ${currency}`;
const day = (d: Date) => d.toISOString().slice(0, 10);

/** The new-invoice email of a renewal invoice (source 'renewal'). */
export async function renderRenewalInvoice(
  pool: Pool,
  invoiceId: string,
): Promise<SubscriptionEmail | undefined> {
  const { rows } = await pool.query<{
    number: number;
    amount_cents: number | null;
    currency: string;
    description: string | null;
    kind: string;
    paid_until: Date;
    auto_renew: boolean;
    status: string;
    product: string | null;
  }>(
    `SELECT i.number, i.amount_cents, i.currency, i.description, s.kind, r.period_end AS paid_until, s.auto_renew,
            s.status, s.product
       FROM invoices i JOIN subscriptions s ON s.id = i.subscription_id
       JOIN subscription_renewals r ON r.invoice_id = i.id
      WHERE i.id = $1`,
    [invoiceId],
  );
  const inv = rows[0];
  if (!inv) return undefined;
  const what = inv.description ?? 'subscription';
  const renews = ['expired', 'cancelled'].includes(inv.status)
    ? `It no longer renews (${inv.status}).`
    : inv.auto_renew
      ? `It renews on ${day(inv.paid_until)}; turn renewal off on the Billing page or with PATCH /api/v1/subscriptions/:id.`
      : `Renewal is off: it ends on ${day(inv.paid_until)}.`;
  const got =
    inv.kind === 'bandwidth_plan'
      ? `The plan's GB were added to your ${inv.product} bandwidth; unused GB roll over.`
      : `Your ISP proxies are paid until ${day(inv.paid_until)}.`;
  return {
    subject: `Invoice #${inv.number}: renewal of ${what}`,
    body: `Invoice #${inv.number} was issued for the renewal of ${what}: ${money(inv.amount_cents, inv.currency)}.\n${got}\n${renews}\n`,
  };
}

export async function renderPastDue(
  pool: Pool,
  renewalId: string,
): Promise<SubscriptionEmail | { drop: string }> {
  const { rows } = await pool.query<{
    status: string;
    period_start: Date;
    amount_cents: number;
    currency: string;
    error: string | null;
    description: string;
  }>(
    `SELECT r.status, r.period_start, r.amount_cents, r.currency, r.error,
            CASE s.kind WHEN 'isp_proxy'
                 THEN s.proxy_count || ' ISP ' || CASE WHEN s.proxy_count = 1 THEN 'proxy' ELSE 'proxies' END
                      || ' (' || upper(s.country) || ')'
                 ELSE s.gb_per_period || ' GB ' || s.product || ' plan' END AS description
       FROM subscription_renewals r JOIN subscriptions s ON s.id = r.subscription_id WHERE r.id = $1`,
    [renewalId],
  );
  const r = rows[0];
  if (!r) return { drop: 'renewal gone' };
  if (r.status !== 'failed') return { drop: 'renewal paid since' };
  return {
    subject: `Renewal of ${r.description} failed: payment due`,
    body:
      `The renewal of ${r.description} due on ${day(r.period_start)} could not be paid ` +
      `(${money(r.amount_cents, r.currency)}): ${r.error ?? 'payment failed'}.\n` +
      `It is past due and is tried again; unless it is paid during the grace period it expires.\n`,
  };
}

export async function renderExpired(
  pool: Pool,
  subscriptionId: string,
): Promise<SubscriptionEmail | { drop: string }> {
  const { rows } = await pool.query<{ status: string; paid_until: Date; kind: string; description: string }>(
    `SELECT s.status, s.paid_until, s.kind,
            CASE s.kind WHEN 'isp_proxy'
                 THEN s.proxy_count || ' ISP ' || CASE WHEN s.proxy_count = 1 THEN 'proxy' ELSE 'proxies' END
                      || ' (' || upper(s.country) || ')'
                 ELSE s.gb_per_period || ' GB ' || s.product || ' plan' END AS description
       FROM subscriptions s WHERE s.id = $1`,
    [subscriptionId],
  );
  const s = rows[0];
  if (!s) return { drop: 'subscription gone' };
  if (s.status !== 'expired') return { drop: 'subscription renewed since' };
  const after =
    s.kind === 'isp_proxy'
      ? 'The proxies are listed as expired in GET /api/v1/proxies/list and no longer paid for.'
      : 'The plan adds no more GB; the bandwidth you have stays until used.';
  return {
    subject: `Subscription expired: ${s.description}`,
    body: `Your subscription ${s.description} expired; it was paid until ${day(s.paid_until)}.\n${after}\n`,
  };
}
