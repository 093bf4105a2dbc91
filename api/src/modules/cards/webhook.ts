// POST /webhooks/stripe (docs/api.md "Stripe webhooks", docs/adr/0110): Stripe's events settle
// card payments. The raw body is verified with the package's constructEvent (signature and a
// 5-minute timestamp tolerance): forged or replayed later, 400 and nothing changes. Each event is
// applied once, by its id (stripe_events, inserted in the transaction that applies it: a
// duplicate waits for the first and then finds its id). Out of order is fine: a success is final,
// refunds and disputes are cumulative, and a refund that comes before its payment's success
// answers 409 without recording the event, so Stripe delivers it again later.
import express from 'express';
import type Stripe from 'stripe';
import { withTransaction, type Pool, type PoolClient } from '#common/db/pool.ts';
import type { Logger } from '#common/logger.ts';
import { cardMoneyReturned, lockCardPayment, type Outcome } from '#common/billing/card-settle.ts';
import { deleteSnapshot } from '#api/modules/usage/repo.ts';
import { applyIntentIn } from './service.ts';

export const WEBHOOK_PATH = '/webhooks/stripe';

export interface WebhookDeps {
  pool: Pool;
  stripe: Stripe;
  secret: string;
  logger: Logger;
}

/** A refund or dispute before its payment's success: answered 409, not recorded; Stripe delivers it again. */
export class NotYet extends Error {}

export function stripeWebhook(deps: WebhookDeps): express.Router {
  const router = express.Router();
  router.post(WEBHOOK_PATH, express.raw({ type: () => true, limit: '1mb' }), (req, res, next) => {
    const signature = req.get('stripe-signature');
    const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    let event: Stripe.Event;
    try {
      if (!signature) throw new Error('no Stripe-Signature header');
      event = deps.stripe.webhooks.constructEvent(body, signature, deps.secret);
    } catch (err) {
      deps.logger.warn({ err: (err as Error).message }, 'stripe webhook refused');
      res.status(400).json({ success: false, error: 'The Stripe signature does not verify' });
      return;
    }
    handleStripeEvent(deps, event)
      .then((outcome) => {
        if (outcome.bought) return settleCaches(deps, outcome.accountId).then(() => outcome);
        return outcome;
      })
      .then(({ outcome }) => void res.status(200).json({ received: true, outcome }))
      .catch((err: unknown) => {
        if (err instanceof NotYet) {
          res.status(409).json({ success: false, error: 'Not yet: deliver this event again later' });
          return;
        }
        next(err);
      });
  });
  return router;
}

/**
 * The usage answer shows the bandwidth at once. No wait for every API process's caches, unlike a
 * purchase's answer: nobody reads this answer but Stripe, which only needs it to come in time.
 */
async function settleCaches(deps: WebhookDeps, accountId: string | null) {
  if (accountId) await deleteSnapshot(deps.pool, accountId);
}

export interface Handled {
  outcome: Outcome | 'duplicate';
  bought: boolean;
  accountId: string | null;
}

/**
 * One verified event, applied once by its id in its own transaction (the money model test,
 * test/billing-model-payments.ts, calls it directly); throws NotYet for 'retry'.
 */
export async function handleStripeEvent(deps: WebhookDeps, event: Stripe.Event): Promise<Handled> {
  return withTransaction(deps.pool, async (client) => {
    const first = await client.query(
      `INSERT INTO stripe_events (id, type, outcome) VALUES ($1, $2, 'applying') ON CONFLICT (id) DO NOTHING`,
      [event.id, event.type],
    );
    if (!first.rowCount) return { outcome: 'duplicate', bought: false, accountId: null };
    const result = await apply(deps, client, event);
    if (result.outcome === 'retry') throw new NotYet();
    await client.query('UPDATE stripe_events SET outcome = $2 WHERE id = $1', [event.id, result.outcome]);
    if (result.outcome !== 'applied')
      deps.logger.info(
        { event: event.id, type: event.type, outcome: result.outcome },
        'stripe event not applied',
      );
    return result;
  });
}

async function apply(deps: WebhookDeps, client: PoolClient, event: Stripe.Event): Promise<Handled> {
  const none = (outcome: Outcome): Handled => ({ outcome, bought: false, accountId: null });
  switch (event.type) {
    case 'payment_intent.succeeded':
    case 'payment_intent.payment_failed':
    case 'payment_intent.canceled':
    case 'payment_intent.requires_action':
    case 'payment_intent.processing': {
      const intent = event.data.object;
      if (intent.metadata?.kind === 'off_session') return none('ignored: settled by the charge that made it');
      const row = await lockCardPayment(client, { id: intent.metadata?.card_payment_id, intent: intent.id });
      if (!row) return none('ignored: no card payment for this payment intent');
      // The event's type is the truth of that moment; the object may already show a later state.
      const status = event.type.slice('payment_intent.'.length);
      const as = {
        ...intent,
        status: status === 'payment_failed' ? 'requires_payment_method' : status,
      } as Stripe.PaymentIntent;
      const outcome = await applyIntentIn(client, row, as);
      return { outcome, bought: outcome === 'applied' && status === 'succeeded', accountId: row.account_id };
    }
    case 'charge.refunded': {
      const charge = event.data.object;
      const ref = await paymentRef(deps, client, charge.metadata, intentId(charge.payment_intent));
      if (!ref) return none('ignored: no purchase for this charge');
      const outcome = await cardMoneyReturned(client, ref, {
        kind: 'refund',
        cents: charge.amount_refunded,
        eventId: event.id,
      });
      return { outcome, bought: false, accountId: ref.accountId };
    }
    case 'charge.dispute.created':
    case 'charge.dispute.funds_withdrawn': {
      const dispute = event.data.object;
      const ref = await paymentRef(deps, client, null, intentId(dispute.payment_intent));
      if (!ref) return none('ignored: no purchase for this dispute');
      const outcome = await cardMoneyReturned(client, ref, {
        kind: 'dispute',
        cents: dispute.amount,
        eventId: event.id,
      });
      return { outcome, bought: false, accountId: ref.accountId };
    }
    case 'setup_intent.succeeded': {
      const setup = event.data.object;
      const customer = typeof setup.customer === 'string' ? setup.customer : setup.customer?.id;
      const method =
        typeof setup.payment_method === 'string' ? setup.payment_method : setup.payment_method?.id;
      if (!customer || !method) return none('ignored: no customer or payment method');
      const label = await cardLabel(deps.stripe, method);
      const saved = await client.query(
        `UPDATE stripe_customers SET payment_method_id = $2, card_label = $3, updated_at = now() WHERE customer_id = $1
         RETURNING account_id`,
        [customer, method, label],
      );
      return saved.rowCount ? none('applied') : none('ignored: unknown customer');
    }
    default:
      return none(`ignored: ${event.type} is not handled`);
  }
}

const intentId = (value: string | { id: string } | null | undefined): string | null =>
  typeof value === 'string' ? value : (value?.id ?? null);

/**
 * The account and purchase key a charge paid: its metadata when it carries ours, else the card
 * payment that made its PaymentIntent, else the PaymentIntent's metadata from Stripe (off-session
 * charges keep no PaymentIntent id here).
 */
async function paymentRef(
  deps: WebhookDeps,
  client: PoolClient,
  metadata: Stripe.Metadata | null,
  intent: string | null,
): Promise<{ accountId: string; idempotencyKey: string } | null> {
  if (metadata?.account_id && metadata.idempotency_key)
    return { accountId: metadata.account_id, idempotencyKey: metadata.idempotency_key };
  if (!intent) return null;
  const row = await lockCardPayment(client, { intent });
  if (row) return { accountId: row.account_id, idempotencyKey: row.idempotency_key };
  const fetched = await deps.stripe.paymentIntents.retrieve(intent);
  const m = fetched.metadata;
  return m?.account_id && m.idempotency_key
    ? { accountId: m.account_id, idempotencyKey: m.idempotency_key }
    : null;
}

/** "visa 4242", or null when Stripe does not say. */
async function cardLabel(stripe: Stripe, method: string): Promise<string | null> {
  try {
    const pm = await stripe.paymentMethods.retrieve(method);
    return pm.card ? `${pm.card.brand} ${pm.card.last4}` : null;
  } catch {
    return null;
  }
}
