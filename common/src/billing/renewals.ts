// Subscription renewals (docs/adr/0080, 0081): the worker renews each due subscription once per
// period. One transaction per period holds the subscription row lock (FOR UPDATE SKIP LOCKED: a
// second worker takes another or none), pays through charge.ts with the idempotency key
// 'subscription:<id>:period:<n>' (a retried charge does not charge twice) and records the renewal
// (subscription_renewed: unique per subscription and period). A worker killed mid-renewal rolls
// the transaction back: the period is still due and the retry uses the same key. A stopped worker
// catches up one renewal per missed period, oldest first. Paying a period (payPeriod) is shared
// with a customer's own subscription, whose first period is paid in the request that creates it.
import type { Logger } from '../logger.ts';
import { withTransaction, type Pool, type PoolClient } from '../db/pool.ts';
import type { Product } from '../products.ts';
import { countOf } from '../words.ts';
import { charge } from './charge.ts';
import type { PaymentMethods } from './payment.ts';

/** How long a failed renewal waits before it is tried again, during grace. */
export const RENEWAL_RETRY = '1 hour';

interface DueRow extends PeriodToPay {
  status: 'active' | 'past_due';
  auto_renew: boolean;
  account_status: string;
  grace_over: boolean | null;
}

export type RenewalOutcome = 'renewed' | 'failed' | 'expired' | 'none';

export interface RenewOptions {
  methods: PaymentMethods;
  graceDays: number;
  logger: Logger;
}

/** Decides one due subscription period; 'none' when nothing is due. */
export async function renewOne(
  pool: Pool,
  { methods, graceDays, logger }: RenewOptions,
): Promise<RenewalOutcome> {
  return withTransaction(pool, async (client) => {
    const { rows } = await client.query<DueRow>(
      `SELECT s.id, s.account_id, s.kind, s.product, s.gb_per_period, s.periods_paid, s.status, s.auto_renew,
              s.payment_method, a.status AS account_status,
              billing_now() >= s.grace_ends_at AS grace_over, p.cents, p.currency
         FROM subscriptions s JOIN accounts a ON a.id = s.account_id
        CROSS JOIN LATERAL subscription_price(s.kind, s.country, s.proxy_count, s.product, s.gb_per_period) p
        WHERE s.status IN ('active', 'past_due') AND s.next_renewal_at <= billing_now()
          AND (s.next_attempt_at IS NULL OR s.next_attempt_at <= billing_now()
               OR billing_now() >= s.grace_ends_at)
        ORDER BY s.next_renewal_at, s.id LIMIT 1 FOR UPDATE OF s SKIP LOCKED`,
    );
    const s = rows[0];
    if (!s) return 'none';
    const log = { subscription: s.id, period: s.periods_paid };
    // Only a failed renewal expires after grace: a period merely missed (the worker was stopped)
    // is renewed now, one renewal per missed period.
    if (!s.auto_renew || (s.status === 'past_due' && s.grace_over === true)) {
      const reason = !s.auto_renew ? 'renewal turned off' : `not paid within ${countOf(graceDays, 'day')}`;
      await client.query('SELECT subscription_expire($1, $2)', [s.id, reason]);
      logger.info({ ...log, reason }, 'subscription expired');
      return 'expired';
    }
    const fail = async (reason: string) => {
      await client.query(
        `SELECT subscription_renewal_failed($1, $2, $3, $4::interval, make_interval(days => $5))`,
        [s.id, s.periods_paid, reason, RENEWAL_RETRY, graceDays],
      );
      logger.warn({ ...log, reason }, 'subscription renewal failed; past due');
      return 'failed' as const;
    };
    if (s.account_status !== 'active') return fail('the account is suspended');
    const paid = await payPeriod(client, methods, s);
    if (!paid.ok) return fail(paid.reason);
    logger.info({ ...log, invoice: paid.invoiceId }, 'subscription renewed');
    return 'renewed';
  });
}

/** A subscription's period to pay, as its row lock holder read it (with its price now). */
export interface PeriodToPay {
  id: string;
  account_id: string;
  kind: 'isp_proxy' | 'bandwidth_plan';
  product: Product | null;
  gb_per_period: number | null;
  /** The period paid now: periods_paid. */
  periods_paid: number;
  payment_method: string;
  cents: number;
  currency: string;
}

/** What paying a period came to: the invoice, or the charge's refusal (retry: worth trying again). */
export type PeriodPayment =
  | { ok: true; invoiceId: string | null }
  | { ok: false; reason: string; retry?: true; settlement: 'deferred' | 'charge' | null };

/**
 * Pays one period of a subscription whose row the caller's transaction holds locked (FOR UPDATE):
 * the charge through charge.ts with the key 'subscription:<id>:period:<n>' (`chargeKey` in its
 * place when the caller has a key of its own that outlives the transaction), then the record
 * (subscription_renewed: the renewal, the invoice, a plan's GB, the email, the next period). The
 * worker's renewals and a customer's first period (api/src/modules/subscriptions/service.ts) both
 * pay here. On a refusal nothing is recorded; the caller decides (past due, or refused).
 */
export async function payPeriod(
  client: PoolClient,
  methods: PaymentMethods,
  s: PeriodToPay,
  chargeKey = `subscription:${s.id}:period:${s.periods_paid}`,
): Promise<PeriodPayment> {
  const settlement = methods.get(s.payment_method)?.settlement ?? null;
  // The billing room's lock order is the balance row, then the account's credit lock (ADR 0075):
  // a bill-later plan takes its balance row before charge() takes the credit lock, as a gateway's
  // draw does. Not for a method that charges first: no balance row is held while a payment
  // provider answers (the draws would wait on it). A plan's first period may find no balance row
  // yet: made first (as a customer purchase makes it), so there is a row to lock.
  if (s.kind === 'bandwidth_plan' && settlement === 'deferred') {
    const row = [s.account_id, s.product];
    await client.query(
      'INSERT INTO balances (account_id, product) VALUES ($1, $2) ON CONFLICT DO NOTHING',
      row,
    );
    await client.query('SELECT 1 FROM balances WHERE account_id = $1 AND product = $2 FOR UPDATE', row);
  }
  const outcome = await charge(client, methods, {
    accountId: s.account_id,
    amountCents: Number(s.cents),
    currency: s.currency,
    paymentMethod: s.payment_method,
    idempotencyKey: chargeKey,
    // The provider's record of what is bought: a plan's product and GB; an ISP rental has none.
    product: s.product ?? 'basic',
    bytes: (s.gb_per_period ?? 0) * 1_000_000_000,
  });
  if (!outcome.ok) return { ...outcome, settlement };
  const { rows } = await client.query<{ invoice: string | null }>(
    'SELECT subscription_renewed($1, $2, $3, $4) AS invoice',
    [s.id, s.periods_paid, outcome.settlement, s.payment_method],
  );
  return { ok: true, invoiceId: rows[0]?.invoice ?? null };
}

/** Renews until nothing is due (at most `max` periods in one pass); the counts of each outcome. */
export async function renewDue(
  pool: Pool,
  options: RenewOptions,
  max = 100,
): Promise<Record<Exclude<RenewalOutcome, 'none'>, number>> {
  const counts = { renewed: 0, failed: 0, expired: 0 };
  for (let i = 0; i < max; i++) {
    const outcome = await renewOne(pool, options);
    if (outcome === 'none') break;
    counts[outcome]++;
  }
  return counts;
}
