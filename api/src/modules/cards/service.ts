// Card purchases and saved cards through Stripe (docs/api.md "Card payments", docs/adr/0110).
// A card purchase: (1) one transaction checks the account, the key, the daily limit and the
// price, and commits a card_payments row 'creating'; (2) Stripe is asked for a PaymentIntent on
// the saved card, confirmed at once, under the purchase's idempotency key; (3) its answer is
// written. Committing before asking means a webhook always finds the row, and a retry (the same
// Idempotency-Key after Stripe failed or timed out) asks Stripe again under the same key, which
// Stripe answers with the first PaymentIntent: one charge. Bandwidth is bought only by a
// succeeded PaymentIntent (its answer here, or the webhook), once (card-settle.ts).
import Stripe from 'stripe';
import { AppError } from '#common/errors.ts';
import { withTransaction, type Pool } from '#common/db/pool.ts';
import { gbToBytes, BYTES_PER_GB, type Product } from '#common/products.ts';
import {
  cardPaymentPending,
  cardPaymentSucceeded,
  lockCardPayment,
  type CardPaymentRow,
} from '#common/billing/card-settle.ts';
import { savedCard, type IntentMetadata } from '#common/billing/stripe.ts';
import type { PurchaseLimits } from '#api/modules/purchases/schemas.ts';
import { KEY_PREFIX, withinDailyLimit } from '#api/modules/purchases/service.ts';
import type { CardPaymentView } from './schemas.ts';

export interface CardPurchaseInput {
  accountId: string;
  product: Product;
  gb: number;
  idempotencyKey: string;
  /** Where Stripe sends the customer back after 3-D Secure (the dashboard's Billing page). */
  returnUrl: string;
}

export interface CardPurchaseOutcome {
  payment: CardPaymentView;
  /** true: the key was used before; no new payment was started. */
  replayed: boolean;
  /** true: this call bought the bandwidth (the PaymentIntent answered succeeded). */
  bought: boolean;
}

export async function buyByCard(
  pool: Pool,
  stripe: Stripe,
  limits: PurchaseLimits,
  input: CardPurchaseInput,
): Promise<CardPurchaseOutcome> {
  const bytes = gbToBytes(input.gb);
  const key = KEY_PREFIX + input.idempotencyKey;
  const card = await savedCard(pool, input.accountId);
  const { row, replayed } = await withTransaction(pool, async (client) => {
    const account = await client.query<{ status: string }>(
      'SELECT status FROM accounts WHERE id = $1 FOR KEY SHARE',
      [input.accountId],
    );
    if (account.rows[0]?.status !== 'active') throw new AppError('ACCOUNT_SUSPENDED');
    // One customer purchase at a time per account, bill-later ones too (their key and day share ours).
    await client.query('SELECT billing_credit_lock($1)', [input.accountId]);
    const earlier = await lockCardPayment(client, { id: await idOfKey(client, input.accountId, key) });
    if (earlier) {
      if (earlier.product !== input.product || earlier.bytes !== bytes)
        throw new AppError('IDEMPOTENCY_KEY_REUSED');
      return { row: earlier, replayed: true };
    }
    const bought = await client.query(
      'SELECT 1 FROM purchases WHERE account_id = $1 AND idempotency_key = $2',
      [input.accountId, key],
    );
    if (bought.rowCount) throw new AppError('IDEMPOTENCY_KEY_REUSED');
    if (!card?.paymentMethodId) throw new AppError('NO_SAVED_CARD');
    await withinDailyLimit(client, limits, input.accountId, bytes);
    const { rows } = await client.query<CardPaymentRow>(
      `INSERT INTO card_payments (account_id, idempotency_key, product, bytes, amount_cents, currency)
       SELECT $1, $2, $3, $4, pc.cents, pc.currency FROM price_cents($3, $4) pc
       RETURNING id, account_id, idempotency_key, product, bytes::float8 AS bytes, amount_cents::float8 AS amount_cents,
                 currency, status, payment_intent_id, action_url, failure, purchase_id`,
      [input.accountId, key, input.product, bytes],
    );
    return { row: rows[0]!, replayed: false };
  });
  if (row.status !== 'creating')
    return { payment: await readCardPayment(pool, row.account_id, row.id), replayed, bought: false };
  if (!card?.paymentMethodId) throw new AppError('NO_SAVED_CARD');

  let intent: Stripe.PaymentIntent;
  try {
    const metadata: IntentMetadata = {
      account_id: row.account_id,
      idempotency_key: row.idempotency_key,
      kind: 'purchase',
      card_payment_id: row.id,
      product: row.product,
      bytes: String(row.bytes),
    };
    intent = await stripe.paymentIntents.create(
      {
        amount: row.amount_cents,
        currency: row.currency.toLowerCase(),
        customer: card.customerId,
        payment_method: card.paymentMethodId,
        confirm: true,
        return_url: input.returnUrl,
        metadata,
      },
      // Stripe's keys are the platform's, not one customer's: the account in it, as refills do, or
      // two customers' "order-1" would meet at Stripe and the second purchase be refused.
      { idempotencyKey: `${row.account_id}:${row.idempotency_key}` },
    );
  } catch (err) {
    if (
      err instanceof Stripe.errors.StripeCardError ||
      err instanceof Stripe.errors.StripeInvalidRequestError
    ) {
      await withTransaction(pool, async (client) => {
        const locked = await lockCardPayment(client, { id: row.id });
        if (locked)
          await cardPaymentPending(client, locked, {
            intent: intentOf(err) ?? '',
            status: 'failed',
            failure: err.message,
          });
      });
      return { payment: await readCardPayment(pool, row.account_id, row.id), replayed, bought: false };
    }
    // Unreachable, 5xx after the package's own retries, a timeout: the row stays 'creating'.
    throw new AppError('PAYMENT_PROVIDER_UNAVAILABLE');
  }
  const bought = await applyIntent(pool, row.id, intent);
  return { payment: await readCardPayment(pool, row.account_id, row.id), replayed, bought };
}

/** The card_payments id under this key (locked by the caller), or undefined. */
async function idOfKey(client: Parameters<typeof lockCardPayment>[0], accountId: string, key: string) {
  const { rows } = await client.query<{ id: string }>(
    'SELECT id FROM card_payments WHERE account_id = $1 AND idempotency_key = $2',
    [accountId, key],
  );
  return rows[0]?.id;
}

const intentOf = (err: Stripe.errors.StripeError): string | undefined =>
  (err.raw as { payment_intent?: { id?: string } } | undefined)?.payment_intent?.id;

/** Writes what a PaymentIntent says (its answer here, a webhook); true when it bought now. */
export async function applyIntent(pool: Pool, id: string, intent: Stripe.PaymentIntent): Promise<boolean> {
  return withTransaction(pool, async (client) => {
    const row = await lockCardPayment(client, { id });
    if (!row) return false;
    return (await applyIntentIn(client, row, intent)) === 'applied' && intent.status === 'succeeded';
  });
}

export function applyIntentIn(
  client: Parameters<typeof lockCardPayment>[0],
  row: CardPaymentRow,
  intent: Stripe.PaymentIntent,
) {
  switch (intent.status) {
    case 'succeeded':
      return cardPaymentSucceeded(client, row, {
        id: intent.id,
        received: intent.amount_received,
        currency: intent.currency,
      });
    case 'requires_action':
      return cardPaymentPending(client, row, {
        intent: intent.id,
        status: 'requires_action',
        actionUrl: intent.next_action?.redirect_to_url?.url ?? null,
      });
    case 'canceled':
      return cardPaymentPending(client, row, { intent: intent.id, status: 'canceled' });
    case 'requires_payment_method':
      // After a confirmation this is a decline (Stripe keeps the reason in last_payment_error).
      return cardPaymentPending(client, row, {
        intent: intent.id,
        status: 'failed',
        failure: intent.last_payment_error?.message ?? 'the card was declined',
      });
    default:
      return cardPaymentPending(client, row, { intent: intent.id, status: 'processing' });
  }
}

export async function readCardPayment(pool: Pool, accountId: string, id: string): Promise<CardPaymentView> {
  const { rows } = await pool.query<CardPaymentRow & { invoice_id: string | null; created_at: Date }>(
    `SELECT c.id, c.product, c.bytes::float8 AS bytes, c.amount_cents::float8 AS amount_cents, c.currency, c.status,
            c.action_url, c.failure, i.id AS invoice_id, c.created_at
       FROM card_payments c LEFT JOIN invoices i ON i.purchase_id = c.purchase_id
      WHERE c.account_id = $1 AND c.id = $2`,
    [accountId, /^[0-9a-f-]{36}$/.test(id) ? id : '00000000-0000-0000-0000-000000000000'],
  );
  const r = rows[0];
  if (!r) throw new AppError('NOT_FOUND');
  return {
    id: r.id,
    product: r.product as Product,
    gb: r.bytes / BYTES_PER_GB,
    bytes: r.bytes,
    amountCents: r.amount_cents,
    currency: r.currency,
    status: r.status,
    actionUrl: r.action_url,
    failure: r.failure,
    invoiceId: r.invoice_id,
    createdAt: r.created_at.toISOString(),
  };
}

/** The account's Stripe customer, created once (Stripe's idempotency key: the account id). */
async function customerOf(pool: Pool, stripe: Stripe, accountId: string): Promise<string> {
  const card = await savedCard(pool, accountId);
  if (card) return card.customerId;
  const customer = await stripe.customers.create(
    { metadata: { account_id: accountId } },
    { idempotencyKey: `customer:${accountId}` },
  );
  await pool.query(
    'INSERT INTO stripe_customers (account_id, customer_id) VALUES ($1, $2) ON CONFLICT (account_id) DO NOTHING',
    [accountId, customer.id],
  );
  return (await savedCard(pool, accountId))!.customerId;
}

/** A hosted Stripe page where the customer saves a card (Checkout in setup mode). */
export async function cardSetupUrl(
  pool: Pool,
  stripe: Stripe,
  accountId: string,
  urls: { success: string; cancel: string },
): Promise<string> {
  try {
    const customer = await customerOf(pool, stripe, accountId);
    const price = await pool.query<{ currency: string }>(`SELECT currency FROM price_cents('basic', 1)`);
    const session = await stripe.checkout.sessions.create({
      mode: 'setup',
      customer,
      currency: (price.rows[0]?.currency ?? 'USD').toLowerCase(),
      success_url: urls.success,
      cancel_url: urls.cancel,
      metadata: { account_id: accountId },
    });
    if (!session.url) throw new Error('Stripe answered a session without a URL');
    return session.url;
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw new AppError('PAYMENT_PROVIDER_UNAVAILABLE');
  }
}
