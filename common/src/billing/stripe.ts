// Stripe, the card payment method (docs/billing.md "Cards", docs/adr/0110): its configuration, the
// client (pointed at stripe-mock by PROXYFLEET_STRIPE_API_BASE in tests and `npm start`), and the
// off-session charge that auto-refills and renewals pay through the charge seam (charge.ts).
// Without PROXYFLEET_STRIPE_SECRET_KEY there is no card method: the platform bills later only.
import Stripe from 'stripe';
import { z } from 'zod';
import type { Pool } from '../db/pool.ts';
import type { ChargeRequest, ChargeResult, PaymentMethod } from './payment.ts';

export const CARD_METHOD = 'card';

/** Read by the API (purchases, webhooks) and the worker (off-session charges). */
export const stripeEnv = {
  /** sk_live_... or sk_test_...; unset: no card payments (bill-later only). A secret. */
  PROXYFLEET_STRIPE_SECRET_KEY: z.string().min(1).optional(),
  /** whsec_...: verifies POST /webhooks/stripe. A secret; required with the secret key in the API. */
  PROXYFLEET_STRIPE_WEBHOOK_SECRET: z.string().min(1).optional(),
  /** Stripe's API at another address (stripe-mock in tests and `npm start`); unset: Stripe's own. */
  PROXYFLEET_STRIPE_API_BASE: z.url({ protocol: /^https?$/ }).optional(),
  /** One request to Stripe; the package retries twice (same Idempotency-Key) before giving up. */
  PROXYFLEET_STRIPE_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(20_000),
};

export interface StripeConfig {
  PROXYFLEET_STRIPE_SECRET_KEY?: string | undefined;
  PROXYFLEET_STRIPE_API_BASE?: string | undefined;
  PROXYFLEET_STRIPE_TIMEOUT_MS?: number | undefined;
}

/** The client, or null when card payments are off. */
export function stripeClient(config: StripeConfig): Stripe | null {
  const key = config.PROXYFLEET_STRIPE_SECRET_KEY;
  if (!key) return null;
  const base = config.PROXYFLEET_STRIPE_API_BASE ? new URL(config.PROXYFLEET_STRIPE_API_BASE) : null;
  return new Stripe(key, {
    // The package retries network errors and 5xx itself, with the same Idempotency-Key.
    maxNetworkRetries: 2,
    timeout: config.PROXYFLEET_STRIPE_TIMEOUT_MS ?? 20_000,
    telemetry: false,
    ...(base
      ? {
          protocol: base.protocol === 'https:' ? 'https' : 'http',
          host: base.hostname,
          port: base.port || (base.protocol === 'https:' ? 443 : 80),
        }
      : {}),
  });
}

/**
 * What every PaymentIntent carries, so a webhook finds what it paid for without our answer:
 * account_id, idempotency_key, kind ('purchase': settled by webhook through card_payments, with
 * card_payment_id; 'off_session': by the charge seam's caller), product and bytes.
 */
export type IntentMetadata = Record<string, string> & {
  account_id: string;
  idempotency_key: string;
  kind: 'purchase' | 'off_session';
};

/** The account's saved card, or null. */
export async function savedCard(
  pool: Pool,
  accountId: string,
): Promise<{ customerId: string; paymentMethodId: string | null; label: string | null } | null> {
  const { rows } = await pool.query<{
    customer_id: string;
    payment_method_id: string | null;
    card_label: string | null;
  }>('SELECT customer_id, payment_method_id, card_label FROM stripe_customers WHERE account_id = $1', [
    accountId,
  ]);
  const r = rows[0];
  return r ? { customerId: r.customer_id, paymentMethodId: r.payment_method_id, label: r.card_label } : null;
}

/**
 * The card as an auto-refill's or renewal's payment method: a PaymentIntent off-session on the
 * saved card, confirmed at once, under the caller's idempotency key (a retry is the same charge).
 * Succeeded: ok. A card that needs its holder (3-D Secure) or is declined: not ok, and the
 * caller's failed-payment flow runs (email, past due). Stripe unreachable, 5xx, timeout: thrown,
 * which the charge seam counts as a retry.
 */
export function cardMethod(pool: Pool, stripe: Stripe): PaymentMethod {
  return {
    name: CARD_METHOD,
    settlement: 'charge',
    async charge(request: ChargeRequest): Promise<ChargeResult> {
      const card = await savedCard(pool, request.accountId);
      if (!card?.paymentMethodId) return { ok: false, reason: 'no card is saved' };
      const metadata: IntentMetadata = {
        account_id: request.accountId,
        idempotency_key: request.idempotencyKey,
        kind: 'off_session',
        product: request.product,
        bytes: String(request.bytes),
      };
      try {
        const intent = await stripe.paymentIntents.create(
          {
            amount: request.amountCents,
            currency: request.currency.toLowerCase(),
            customer: card.customerId,
            payment_method: card.paymentMethodId,
            off_session: true,
            confirm: true,
            metadata,
          },
          { idempotencyKey: request.idempotencyKey },
        );
        if (intent.status === 'succeeded') return { ok: true };
        if (intent.status === 'requires_action')
          return { ok: false, reason: 'the card asks its holder to confirm the payment (3-D Secure)' };
        return { ok: false, reason: `the card payment is ${intent.status.replaceAll('_', ' ')}` };
      } catch (err) {
        if (err instanceof Stripe.errors.StripeCardError) return { ok: false, reason: err.message };
        throw err;
      }
    },
  };
}
