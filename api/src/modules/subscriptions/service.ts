// A customer subscribes (docs/api.md "POST /api/v1/subscriptions", docs/adr/0114): one transaction
// creates the subscription and pays its first period through the worker's own path (payPeriod,
// common/src/billing/renewals.ts), so nothing is left behind when the payment is refused. Equal
// Idempotency-Keys take turns on the account's subscribe lock; the key and the request are kept on
// the subscription: the same key again answers it (the same request) or is refused (another).
import { AppError } from '#common/errors.ts';
import { withTransaction, type Pool, type PoolClient } from '#common/db/pool.ts';
import type { AuditActor } from '#common/audit/record.ts';
import type { PaymentMethods } from '#common/billing/payment.ts';
import { payPeriod, type PeriodToPay } from '#common/billing/renewals.ts';
import { CARD_METHOD } from '#common/billing/stripe.ts';
import { insertSubscription, readSubscription } from '#common/billing/subscriptions.ts';
import { creditRefusal } from '#api/modules/purchases/service.ts';
import type { CustomerSubscription, SubscribeLimits, Subscribed } from './schemas.ts';

export interface SubscribeDeps {
  pool: Pool;
  /** invoice, and card when Stripe is configured (cardMethod). */
  methods: PaymentMethods;
  limits: SubscribeLimits;
}

export interface SubscribeInput {
  accountId: string;
  request: CustomerSubscription;
  idempotencyKey: string;
  actor: AuditActor;
}

export interface SubscribeOutcome {
  subscription: Subscribed;
  /** true: the key was used before; nothing was subscribed or paid now. */
  replayed: boolean;
}

export async function subscribeAsCustomer(
  deps: SubscribeDeps,
  input: SubscribeInput,
): Promise<SubscribeOutcome> {
  const { pool, methods, limits } = deps;
  const { accountId, request } = input;
  const { id, replayed } = await withTransaction(pool, async (client) => {
    // One subscribe at a time per account: equal keys wait for each other, and two subscriptions
    // cannot both pass the cap or rent the same proxies. Taken first; then the account's row
    // (lockAccountForAudit's order), then payPeriod's balance row and credit lock.
    await client.query(`SELECT pg_advisory_xact_lock(hashtext('subscribe'), hashtext($1))`, [accountId]);
    const account = await client.query<{ status: string }>(
      'SELECT status FROM accounts WHERE id = $1 FOR KEY SHARE',
      [accountId],
    );
    if (account.rows[0]?.status !== 'active') throw new AppError('ACCOUNT_SUSPENDED');
    const earlier = await client.query<{ id: string; same: boolean }>(
      `SELECT id, idempotency_request = $3::jsonb AS same FROM subscriptions
        WHERE account_id = $1 AND idempotency_key = $2`,
      [accountId, input.idempotencyKey, JSON.stringify(request)],
    );
    if (earlier.rows[0]) {
      if (!earlier.rows[0].same) throw new AppError('IDEMPOTENCY_KEY_REUSED');
      return { id: earlier.rows[0].id, replayed: true };
    }
    if (request.paymentMethod === CARD_METHOD) {
      if (!methods.has(CARD_METHOD)) throw new AppError('CARD_PAYMENTS_OFF');
      await mustHaveCard(client, accountId);
    }
    await withinCap(client, accountId, limits.maxActive);
    const proxies = request.kind === 'isp_proxy' ? await freeProxies(client, accountId, request) : [];
    const created = await insertSubscription(
      client,
      accountId,
      request.kind === 'isp_proxy'
        ? { ...request, ispProxyIds: proxies, autoRenew: true }
        : { ...request, autoRenew: true },
      input.actor,
      { key: input.idempotencyKey, request },
    );
    const paid = await payPeriod(client, methods, await lockNew(client, created), stripeKey(input));
    if (!paid.ok) {
      if (paid.settlement === 'deferred') throw await creditRefusal(client, accountId);
      if ('retry' in paid) throw new AppError('PAYMENT_PROVIDER_UNAVAILABLE');
      throw new AppError('CARD_PAYMENT_REFUSED', { reason: paid.reason.replace(/\.$/, '') });
    }
    return { id: created, replayed: false };
  });
  return { subscription: await readSubscribed(pool, accountId, id), replayed };
}

/**
 * The card payment's key at Stripe: the customer's key, scoped to the account (Stripe's keys are
 * the platform's, not an account's), so a retry after a transaction that charged but did not
 * commit asks Stripe under the same key and is answered the first payment: one charge.
 */
const stripeKey = (input: SubscribeInput) => `${input.accountId}:subscription:${input.idempotencyKey}`;

async function mustHaveCard(client: PoolClient, accountId: string) {
  const { rowCount } = await client.query(
    'SELECT 1 FROM stripe_customers WHERE account_id = $1 AND payment_method_id IS NOT NULL',
    [accountId],
  );
  if (!rowCount) throw new AppError('NO_SAVED_CARD');
}

/** SUBSCRIPTION_LIMIT when the account already holds the most it may (active or past due). */
async function withinCap(client: PoolClient, accountId: string, max: number) {
  const { rows } = await client.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM subscriptions WHERE account_id = $1 AND status IN ('active', 'past_due')`,
    [accountId],
  );
  if (rows[0]!.n >= max) throw new AppError('SUBSCRIPTION_LIMIT', { limit: max });
}

/**
 * The account's own ISP proxies in the country that no subscription pays for (none links them, or
 * the one that does has expired, or was cancelled and its paid time is over), oldest first,
 * locked; ISP_PROXIES_UNAVAILABLE, naming how many there are, when fewer than asked for. An
 * operator assigns proxies to accounts: a customer never pays for a proxy it does not have.
 */
async function freeProxies(
  client: PoolClient,
  accountId: string,
  request: { country: string; proxyCount: number },
): Promise<string[]> {
  const { rows } = await client.query<{ id: string }>(
    `SELECT p.id FROM isp_proxies p LEFT JOIN subscriptions s ON s.id = p.subscription_id
      WHERE p.account_id = $1 AND p.country = $2 AND p.status <> 'suspended'
        AND (p.expires_at IS NULL OR p.expires_at > billing_now())
        AND (s.id IS NULL OR s.status = 'expired' OR (s.status = 'cancelled' AND s.paid_until <= billing_now()))
      ORDER BY p.created_at, p.id
      FOR UPDATE OF p`,
    [accountId, request.country],
  );
  if (rows.length < request.proxyCount)
    throw new AppError('ISP_PROXIES_UNAVAILABLE', {
      country: request.country.toUpperCase(),
      available: rows.length,
      requested: request.proxyCount,
    });
  return rows.slice(0, request.proxyCount).map((r) => r.id);
}

/** The new subscription's first period, its row locked as the worker's renewal locks it. */
async function lockNew(client: PoolClient, id: string): Promise<PeriodToPay> {
  const { rows } = await client.query<PeriodToPay>(
    `SELECT s.id, s.account_id, s.kind, s.product, s.gb_per_period, s.periods_paid, s.payment_method,
            p.cents, p.currency
       FROM subscriptions s
      CROSS JOIN LATERAL subscription_price(s.kind, s.country, s.proxy_count, s.product, s.gb_per_period) p
      WHERE s.id = $1 FOR UPDATE OF s`,
    [id],
  );
  return rows[0]!;
}

/** The subscription as GET /api/v1/subscriptions shows it, with its first month's invoice. */
export async function readSubscribed(pool: Pool, accountId: string, id: string): Promise<Subscribed> {
  const [view, first] = await Promise.all([
    readSubscription(pool, accountId, id),
    pool.query<{ invoice_id: string }>(
      'SELECT invoice_id FROM subscription_renewals WHERE subscription_id = $1 AND period = 0',
      [id],
    ),
  ]);
  return { ...view, invoiceId: first.rows[0]?.invoice_id ?? '' };
}
