// Card payments (docs/api.md "Card payments"): the saved card, Stripe's hosted page that saves
// one, a purchase paid by the saved card (the Idempotency-Key header is required), and reading a
// card payment again. Without PROXYFLEET_STRIPE_SECRET_KEY they answer CARD_PAYMENTS_OFF.
import type Stripe from 'stripe';
import { z } from 'zod';
import type { Pool } from '#common/db/pool.ts';
import { AppError } from '#common/errors.ts';
import { savedCard } from '#common/billing/stripe.ts';
import { defineRoute, ok, okSchema, type RouteDef } from '#api/http/route.ts';
import { principal } from '#api/modules/auth/middleware.ts';
import { deleteSnapshot } from '#api/modules/usage/repo.ts';
import type { WaitForApiCaches } from '#api/modules/sync/wait.ts';
import {
  customerPurchaseSchema,
  idempotencyKey,
  type CustomerPurchase,
  type PurchaseLimits,
} from '#api/modules/purchases/schemas.ts';
import { cardPaymentSchema, cardSetupSchema, cardStatusSchema } from './schemas.ts';
import { buyByCard, cardSetupUrl, readCardPayment } from './service.ts';

export interface CardDeps {
  pool: Pool;
  /** null: card payments are off. */
  stripe: Stripe | null;
  limits: PurchaseLimits;
  waitForApiCaches: WaitForApiCaches;
  /** The dashboard's base URL (Stripe sends the customer back there). */
  linkBase: () => string;
}

const idParams = z.object({ id: z.uuid() });
type IdParams = z.infer<typeof idParams>;

export function cardRoutes(deps: CardDeps): RouteDef[] {
  const stripe = (): Stripe => {
    if (!deps.stripe) throw new AppError('CARD_PAYMENTS_OFF');
    return deps.stripe;
  };
  return [
    defineRoute({
      method: 'get',
      path: '/card',
      tag: 'billing',
      summary: 'Whether card payments are on, and the saved card',
      auth: 'apiKey',
      response: okSchema(cardStatusSchema),
      handler: async ({ res }) => {
        const card = deps.stripe ? await savedCard(deps.pool, principal(res).accountId) : null;
        return {
          body: ok({
            available: deps.stripe !== null,
            card: card?.paymentMethodId ? (card.label ?? 'card') : null,
          }),
        };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/card/setup',
      tag: 'billing',
      summary: "Stripe's hosted page where the customer saves a card",
      description:
        'A Checkout Session in setup mode: the card is entered on Stripe, never here. The card is saved when ' +
        "Stripe's setup_intent.succeeded webhook arrives, not by the redirect back to the dashboard.",
      auth: 'apiKey',
      status: 201,
      response: okSchema(cardSetupSchema),
      errors: ['CARD_PAYMENTS_OFF', 'PAYMENT_PROVIDER_UNAVAILABLE'],
      handler: async ({ res }) => {
        const base = `${deps.linkBase()}/billing`;
        const url = await cardSetupUrl(deps.pool, stripe(), principal(res).accountId, {
          success: `${base}?card=saved`,
          cancel: `${base}?card=canceled`,
        });
        return { status: 201, body: ok({ url }) };
      },
    }),
    defineRoute<CustomerPurchase>({
      method: 'post',
      path: '/card-purchases',
      tag: 'billing',
      summary: 'Buy bandwidth paid by the saved card (the Idempotency-Key header is required)',
      description:
        'Starts a Stripe PaymentIntent on the saved card under the Idempotency-Key; the bandwidth is bought when ' +
        'Stripe says the payment succeeded (its answer, or the webhook), exactly once. requires_action: the ' +
        'customer confirms at actionUrl (3-D Secure). 503 PAYMENT_PROVIDER_UNAVAILABLE: retry with the same key ' +
        '(one charge). Bounded as POST /api/v1/purchases.',
      auth: 'apiKey',
      body: customerPurchaseSchema(deps.limits),
      response: okSchema(cardPaymentSchema),
      status: 201,
      errors: [
        'VALIDATION_FAILED',
        'IDEMPOTENCY_KEY_REUSED',
        'PURCHASE_DAILY_LIMIT',
        'ACCOUNT_SUSPENDED',
        'CARD_PAYMENTS_OFF',
        'NO_SAVED_CARD',
        'PAYMENT_PROVIDER_UNAVAILABLE',
      ],
      handler: async ({ body, req, res }) => {
        const key = idempotencyKey(req.get('Idempotency-Key'));
        const { accountId } = principal(res);
        const { payment, replayed, bought } = await buyByCard(deps.pool, stripe(), deps.limits, {
          accountId,
          ...body,
          idempotencyKey: key,
          returnUrl: `${deps.linkBase()}/billing`,
        });
        if (bought) {
          await deleteSnapshot(deps.pool, accountId);
          await deps.waitForApiCaches();
        }
        return {
          status: replayed ? 200 : 201,
          body: ok(payment),
          headers: { 'Idempotent-Replayed': String(replayed) },
        };
      },
    }),
    defineRoute<undefined, IdParams>({
      method: 'get',
      path: '/card-payments/:id',
      tag: 'billing',
      summary: 'One card payment, as it stands',
      auth: 'apiKey',
      params: idParams,
      paramsError: 'NOT_FOUND',
      response: okSchema(cardPaymentSchema),
      errors: ['NOT_FOUND'],
      handler: async ({ params, res }) => ({
        body: ok(await readCardPayment(deps.pool, principal(res).accountId, params.id)),
      }),
    }),
  ];
}
