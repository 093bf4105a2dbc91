// What Stripe's answers and webhooks do to card payments and their invoices (docs/billing.md
// "Cards", docs/adr/0110), each in the caller's transaction:
// - a payment succeeded: the card_payments row (locked) buys through purchase_record once, and the
//   invoice is paid at once (settlement 'charged'); the row's purchase_id is the proof of "once";
// - a payment failed or was canceled: the row says so; nothing was bought;
// - 3-D Secure: the row keeps where the customer confirms; nothing is bought until it succeeds;
// - a refund or dispute: the invoice's refunded or disputed amount is raised to what Stripe
//   reports (cumulative, so order does not matter), and the bandwidth it paid for is taken back
//   down to what is unused, in proportion to the money returned; audited and emailed.
import type { PoolClient } from '../db/pool.ts';
import { recordAudit, type AuditActor } from '../audit/record.ts';
import { bandwidthText } from './remaining.ts';
import { recordPurchaseIn } from './purchases.ts';
import { takeBackUnused } from './settle.ts';
import { CARD_METHOD } from './stripe.ts';

export const STRIPE_ACTOR: AuditActor = { kind: 'system', id: 'stripe' };

/** What an event did: applied, or why nothing changed; 'retry': not yet (answer non-2xx). */
export type Outcome = 'applied' | `ignored: ${string}` | 'retry';

export interface CardPaymentRow {
  id: string;
  account_id: string;
  idempotency_key: string;
  product: string;
  bytes: number;
  amount_cents: number;
  currency: string;
  status: 'creating' | 'requires_action' | 'processing' | 'succeeded' | 'failed' | 'canceled';
  payment_intent_id: string | null;
  action_url: string | null;
  failure: string | null;
  purchase_id: string | null;
}

export async function lockCardPayment(
  client: PoolClient,
  where: { id?: string | undefined; intent?: string | undefined },
): Promise<CardPaymentRow | null> {
  const { rows } = await client.query<CardPaymentRow>(
    `SELECT id, account_id, idempotency_key, product, bytes::float8 AS bytes, amount_cents::float8 AS amount_cents,
            currency, status, payment_intent_id, action_url, failure, purchase_id
       FROM card_payments WHERE id = $1 OR payment_intent_id = $2 ORDER BY id LIMIT 1 FOR UPDATE`,
    [where.id && /^[0-9a-f-]{36}$/.test(where.id) ? where.id : null, where.intent ?? null],
  );
  return rows[0] ?? null;
}

/** The PaymentIntent succeeded for `received` cents: buys, once. */
export async function cardPaymentSucceeded(
  client: PoolClient,
  row: CardPaymentRow,
  intent: { id: string; received: number; currency: string },
): Promise<Outcome> {
  if (row.status === 'succeeded') return 'ignored: already bought';
  if (row.payment_intent_id && row.payment_intent_id !== intent.id) return 'ignored: another payment intent';
  if (intent.received !== row.amount_cents || intent.currency.toUpperCase() !== row.currency)
    return `ignored: received ${intent.received} ${intent.currency}, expected ${row.amount_cents} ${row.currency}`;
  const invoice = await recordPurchaseIn(client, {
    accountId: row.account_id,
    product: row.product as Parameters<typeof recordPurchaseIn>[1]['product'],
    bytes: row.bytes,
    source: 'customer',
    idempotencyKey: row.idempotency_key,
    settlement: 'charged',
    paymentMethod: CARD_METHOD,
    actor: STRIPE_ACTOR,
  });
  await client.query(
    `UPDATE invoices SET status = 'paid', paid_at = billing_now() WHERE id = $1 AND status = 'issued'`,
    [invoice.id],
  );
  await client.query(
    `UPDATE card_payments SET status = 'succeeded', purchase_id = $2, payment_intent_id = $3, action_url = NULL,
            failure = NULL, updated_at = now() WHERE id = $1`,
    [row.id, invoice.purchaseId, intent.id],
  );
  return 'applied';
}

/** Not (yet) paid: 3-D Secure waiting, processing, failed or canceled. A success is final. */
export async function cardPaymentPending(
  client: PoolClient,
  row: CardPaymentRow,
  change: {
    intent: string;
    status: 'requires_action' | 'processing' | 'failed' | 'canceled';
    actionUrl?: string | null;
    failure?: string | null;
  },
): Promise<Outcome> {
  if (row.status === 'succeeded') return 'ignored: already bought';
  if (row.status === 'canceled') return 'ignored: canceled';
  await client.query(
    `UPDATE card_payments SET status = $2, payment_intent_id = $3, action_url = $4, failure = $5, updated_at = now()
      WHERE id = $1`,
    [row.id, change.status, change.intent, change.actionUrl ?? null, change.failure ?? null],
  );
  return 'applied';
}

interface PaidInvoice {
  id: string;
  number: number;
  account_id: string;
  product: string | null;
  bytes: number | null;
  amount_cents: number;
  currency: string;
  status: string;
  refunded_cents: number;
  disputed_cents: number;
  refund_taken_bytes: number;
}

/**
 * A refund (amount refunded so far) or a dispute (its amount) of the payment whose metadata names
 * the account and the purchase's idempotency key. 'retry' when the purchase is not bought yet (its
 * success event is still to come): Stripe delivers the refund again later.
 */
export async function cardMoneyReturned(
  client: PoolClient,
  ref: { accountId: string; idempotencyKey: string },
  returned: { kind: 'refund' | 'dispute'; cents: number; eventId: string },
): Promise<Outcome> {
  if (!/^[0-9a-f-]{36}$/.test(ref.accountId)) return 'ignored: no such account';
  const { rows } = await client.query<PaidInvoice>(
    `SELECT i.id, i.number, i.account_id, i.product, i.bytes::float8 AS bytes, i.amount_cents::float8 AS amount_cents,
            i.currency, i.status, i.refunded_cents::float8 AS refunded_cents, i.disputed_cents::float8 AS disputed_cents,
            i.refund_taken_bytes::float8 AS refund_taken_bytes
       FROM purchases p JOIN invoices i ON i.purchase_id = p.id
      WHERE p.account_id = $1 AND (p.idempotency_key = $2 OR $1 || ':' || p.idempotency_key = $2)
      FOR UPDATE OF i`,
    [ref.accountId, ref.idempotencyKey],
  );
  const inv = rows[0];
  if (!inv) {
    const open = await client.query(
      `SELECT 1 FROM card_payments WHERE account_id = $1 AND idempotency_key = $2`,
      [ref.accountId, ref.idempotencyKey],
    );
    return open.rowCount ? 'retry' : 'ignored: no invoice for this payment';
  }
  if (inv.status !== 'paid' && inv.status !== 'refunded') return `ignored: the invoice is ${inv.status}`;
  const column = returned.kind === 'refund' ? 'refunded_cents' : 'disputed_cents';
  const seen = returned.kind === 'refund' ? inv.refunded_cents : inv.disputed_cents;
  const cents = Math.min(inv.amount_cents, returned.cents);
  const other = returned.kind === 'refund' ? inv.disputed_cents : inv.refunded_cents;
  const back = Math.min(inv.amount_cents, cents + other);
  if (cents <= seen || back <= Math.min(inv.amount_cents, seen + other))
    return 'ignored: no more money returned than before';
  // Bytes paid for by the money returned, rounded up (the customer keeps no byte not paid for).
  const owed = inv.bytes && inv.amount_cents ? Math.ceil((inv.bytes * back) / inv.amount_cents) : 0;
  const wanted = Math.max(0, owed - inv.refund_taken_bytes);
  const taken =
    wanted > 0 && inv.product ? await takeBackUnused(client, inv.account_id, inv.product, wanted) : 0;
  const full = back >= inv.amount_cents;
  await client.query(
    `UPDATE invoices SET ${column} = $2, refund_taken_bytes = refund_taken_bytes + $3,
            status = CASE WHEN $4 THEN 'refunded' ELSE status END,
            refunded_at = CASE WHEN $4 THEN coalesce(refunded_at, billing_now()) ELSE refunded_at END
      WHERE id = $1`,
    [inv.id, cents, taken, full],
  );
  const money = (c: number) => `${(c / 100).toFixed(2)} ${inv.currency}`;
  await recordAudit(client, {
    accountId: inv.account_id,
    actor: STRIPE_ACTOR,
    action: returned.kind === 'refund' ? 'invoice.refunded' : 'invoice.disputed',
    target: { type: 'invoice', id: inv.id },
    details: { invoiceNumber: inv.number, amountCents: cents, currency: inv.currency, bytesTakenBack: taken },
  });
  const what = returned.kind === 'refund' ? 'refunded' : 'disputed';
  await client.query(`SELECT email_enqueue($1, 'card_refund', $2, NULL, $3, $4)`, [
    inv.account_id,
    returned.eventId.replace(/[^A-Za-z0-9_-]/g, '_'),
    `Invoice ${inv.number}: ${money(cents)} ${what}`,
    `${money(cents)} of invoice ${inv.number} (${money(inv.amount_cents)}) was ${what} on your card.\n` +
      `The bandwidth it paid for was taken back from your balance, as far as it was unused: ` +
      `${bandwidthText(taken)}${full ? '; the invoice is refunded' : ''}.\n`,
  ]);
  return 'applied';
}
