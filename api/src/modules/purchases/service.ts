// A customer buys bandwidth (docs/api.md "POST /api/v1/purchases", docs/adr/0101): through the
// billing room's one way to buy (recordPurchaseIn, as operator purchases) after its one way to
// charge (charge(): the built-in bill-later "invoice" method must fit the credit limit), bounded by
// the deployment's limits per purchase and per day, refused to a suspended account. Bandwidth is
// credited in the same transaction as the invoice, so exactly once: the same Idempotency-Key again
// (at once or later) answers the first purchase's invoice and buys nothing more.
import { AppError } from '#common/errors.ts';
import { withTransaction, type Pool, type PoolClient } from '#common/db/pool.ts';
import type { AuditActor } from '#common/audit/record.ts';
import { charge } from '#common/billing/charge.ts';
import { paymentMethods } from '#common/billing/payment.ts';
import { recordPurchaseIn } from '#common/billing/purchases.ts';
import { readInvoice, type InvoiceView } from '#common/billing/invoices.ts';
import { bandwidthText } from '#common/billing/remaining.ts';
import { BYTES_PER_GB, gbToBytes, type Product } from '#common/products.ts';
import type { PurchaseLimits } from './schemas.ts';

/**
 * Customer keys live beside the platform's own in one unique index per account (auto-refill's
 * `auto-refill:<product>:crossing:<n>`, renewals', operators'): prefixed, a customer's key can
 * never name, and so pre-empt, a purchase the platform makes.
 */
export const KEY_PREFIX = 'customer:';

/** The built-in method: bill later, within the credit limit. Card payments are not built yet. */
const METHODS = paymentMethods();
const METHOD = 'invoice';

export interface CustomerPurchaseInput {
  accountId: string;
  product: Product;
  gb: number;
  idempotencyKey: string;
  actor: AuditActor;
}

export interface PurchaseOutcome {
  invoice: InvoiceView;
  /** true: the key was used before; nothing was bought now. */
  replayed: boolean;
}

export async function buyAsCustomer(
  pool: Pool,
  limits: PurchaseLimits,
  input: CustomerPurchaseInput,
): Promise<PurchaseOutcome> {
  const bytes = gbToBytes(input.gb);
  const key = KEY_PREFIX + input.idempotencyKey;
  const invoiceId = await withTransaction(pool, async (client) => {
    // Lock order as draws and settlements take it: the account (key share), the balance row, then
    // the account's credit lock (charge). Equal keys wait here for each other (same product: the
    // balance row; another product: the credit lock, taken before the key is looked up).
    const account = await client.query<{ status: string }>(
      'SELECT status FROM accounts WHERE id = $1 FOR KEY SHARE',
      [input.accountId],
    );
    if (account.rows[0]?.status !== 'active') throw new AppError('ACCOUNT_SUSPENDED');
    await client.query(`INSERT INTO balances (account_id, product) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [
      input.accountId,
      input.product,
    ]);
    await client.query('SELECT 1 FROM balances WHERE account_id = $1 AND product = $2 FOR UPDATE', [
      input.accountId,
      input.product,
    ]);
    await client.query('SELECT billing_credit_lock($1)', [input.accountId]);

    const earlier = await client.query<{ id: string; product: string; bytes: number }>(
      `SELECT i.id, p.product, p.bytes FROM purchases p JOIN invoices i ON i.purchase_id = p.id
        WHERE p.account_id = $1 AND p.idempotency_key = $2`,
      [input.accountId, key],
    );
    const first = earlier.rows[0];
    const card = await client.query(
      'SELECT 1 FROM card_payments WHERE account_id = $1 AND idempotency_key = $2',
      [input.accountId, key],
    );
    if (card.rowCount) throw new AppError('IDEMPOTENCY_KEY_REUSED');
    if (first) {
      if (first.product !== input.product || Number(first.bytes) !== bytes)
        throw new AppError('IDEMPOTENCY_KEY_REUSED');
      return { id: first.id, replayed: true };
    }

    await withinDailyLimit(client, limits, input.accountId, bytes);
    const price = await client.query<{ cents: number; currency: string }>(
      'SELECT cents, currency FROM price_cents($1, $2)',
      [input.product, bytes],
    );
    const { cents, currency } = price.rows[0]!;
    const paid = await charge(client, METHODS, {
      accountId: input.accountId,
      amountCents: Number(cents),
      currency,
      paymentMethod: METHOD,
      idempotencyKey: key,
      product: input.product,
      bytes,
    });
    if (!paid.ok) throw await creditRefusal(client, input.accountId);
    const invoice = await recordPurchaseIn(client, {
      accountId: input.accountId,
      product: input.product,
      bytes,
      source: 'customer',
      idempotencyKey: key,
      settlement: paid.settlement,
      paymentMethod: METHOD,
      actor: input.actor,
    });
    return { id: invoice.id, replayed: false };
  });
  const invoice = await readInvoice(pool, input.accountId, invoiceId.id);
  return { invoice: invoice!, replayed: invoiceId.replayed };
}

/**
 * PURCHASE_DAILY_LIMIT when this purchase would take the day's customer purchases past the limit:
 * those bought today and the card payments still open (a card purchase counts from its request).
 * The caller holds the account's credit lock, so two purchases cannot both fit the last room.
 */
export async function withinDailyLimit(
  client: PoolClient,
  limits: PurchaseLimits,
  accountId: string,
  bytes: number,
) {
  const { rows } = await client.query<{ bought: string }>(
    `WITH today AS (SELECT date_trunc('day', billing_now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS start)
     SELECT (SELECT coalesce(sum(bytes), 0) FROM purchases, today
               WHERE account_id = $1 AND source = 'customer' AND created_at >= today.start)
          + (SELECT coalesce(sum(bytes), 0) FROM card_payments
               WHERE account_id = $1 AND status IN ('creating', 'requires_action', 'processing')) AS bought`,
    [accountId],
  );
  const bought = Number(rows[0]!.bought);
  const limit = Math.round(limits.perDayGb * BYTES_PER_GB);
  if (bought + bytes > limit)
    throw new AppError('PURCHASE_DAILY_LIMIT', {
      limit: bandwidthText(limit),
      left: bandwidthText(Math.max(0, limit - bought)),
    });
}

/** CREDIT_LIMIT_REACHED, naming the limit and what is left of it this month. */
export async function creditRefusal(client: PoolClient, accountId: string): Promise<AppError> {
  const { rows } = await client.query<{ limit_cents: string; used_cents: string; currency: string }>(
    'SELECT limit_cents, used_cents, currency FROM credit_status($1)',
    [accountId],
  );
  const c = rows[0]!;
  const money = (cents: number) => `${(cents / 100).toFixed(2)} ${c.currency}`;
  return new AppError('CREDIT_LIMIT_REACHED', {
    limit: money(Number(c.limit_cents)),
    available: money(Math.max(0, Number(c.limit_cents) - Number(c.used_cents))),
  });
}
