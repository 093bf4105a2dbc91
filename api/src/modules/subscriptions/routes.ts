// Subscriptions (docs/api.md "Subscriptions", docs/billing.md): the customer sees what renews,
// when and for how much, and turns renewal off or on; operators create, change, cancel and list.
import type { Pool } from '#common/db/pool.ts';
import { AppError } from '#common/errors.ts';
import {
  cancelSubscription,
  changeSubscription,
  createSubscription,
  listSubscriptions,
  subscriptionChangeSchema,
  subscriptionCreateSchema,
  subscriptionViewSchema,
  type SubscriptionChange,
  type SubscriptionCreate,
} from '#common/billing/subscriptions.ts';
import type { PaymentMethods } from '#common/billing/payment.ts';
import { defineRoute, ok, okSchema, type RouteDef } from '#api/http/route.ts';
import { adminActor, apiKeyActor } from '#api/http/actor.ts';
import { accountParams } from '#api/http/schemas.ts';
import { principal } from '#api/modules/auth/middleware.ts';
import { idempotencyKey } from '#api/modules/purchases/schemas.ts';
import { deleteSnapshot } from '#api/modules/usage/repo.ts';
import type { WaitForApiCaches } from '#api/modules/sync/wait.ts';
import {
  adminSubscriptionParams,
  autoRenewUpdate,
  customerSubscriptionSchema,
  subscribedSchema,
  subscriptionListSchema,
  type CustomerSubscription,
  type SubscribeLimits,
  subscriptionParams,
  type AdminSubscriptionParams,
  type AutoRenewUpdate,
  type SubscriptionParams,
} from './schemas.ts';
import { subscribeAsCustomer } from './service.ts';

const WHAT =
  'Monthly, on the start day’s anniversary (UTC; the last day of shorter months). Each renewal is an invoice ' +
  '(source "renewal"); a plan adds its GB (unused GB roll over); an ISP rental extends paidUntil. A failed ' +
  'payment makes it past_due until graceEndsAt, then expired.';

export interface SubscriptionDeps {
  pool: Pool;
  /** invoice, and card when Stripe is configured. */
  methods: PaymentMethods;
  limits: SubscribeLimits;
  waitForApiCaches: WaitForApiCaches;
}

export function subscriptionRoutes({
  pool,
  methods,
  limits,
  waitForApiCaches,
}: SubscriptionDeps): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/subscriptions',
      tag: 'billing',
      summary: 'Subscriptions: what renews, when, and for how much',
      description: WHAT,
      auth: 'apiKey',
      response: okSchema(subscriptionListSchema),
      handler: async ({ res }) => ({
        body: ok({ subscriptions: await listSubscriptions(pool, principal(res).accountId) }),
      }),
    }),
    defineRoute<CustomerSubscription>({
      method: 'post',
      path: '/subscriptions',
      tag: 'billing',
      summary:
        'Subscribe: a bandwidth plan or an ISP rental, its first month paid now (Idempotency-Key required)',
      description:
        'kind "bandwidth_plan": {product, gbPerPeriod} (whole GB, at most PROXYFLEET_PURCHASE_MAX_GB); kind ' +
        '"isp_proxy": {country, proxyCount}, renting that many of the account’s own ISP proxies in the country ' +
        'that no subscription pays for yet (409 ISP_PROXIES_UNAVAILABLE names how many there are). paymentMethod ' +
        '"invoice" (default: billed later, within the credit limit) or "card" (the saved card, charged ' +
        'off-session; a decline or 3-D Secure is 402 and nothing is subscribed). The first month is paid in ' +
        'the same transaction that creates the subscription: refused, nothing is left. The same ' +
        'Idempotency-Key and body again answers the same subscription (Idempotent-Replayed: true); another ' +
        'body under it is 422. At most PROXYFLEET_SUBSCRIPTIONS_MAX active at once. ' +
        WHAT,
      auth: 'apiKey',
      body: customerSubscriptionSchema(limits),
      response: okSchema(subscribedSchema),
      status: 201,
      errors: [
        'VALIDATION_FAILED',
        'IDEMPOTENCY_KEY_REUSED',
        'ACCOUNT_SUSPENDED',
        'CREDIT_LIMIT_REACHED',
        'ISP_PROXIES_UNAVAILABLE',
        'SUBSCRIPTION_LIMIT',
        'CARD_PAYMENTS_OFF',
        'NO_SAVED_CARD',
        'CARD_PAYMENT_REFUSED',
        'PAYMENT_PROVIDER_UNAVAILABLE',
      ],
      handler: async ({ body, req, res }) => {
        const key = idempotencyKey(req.get('Idempotency-Key'));
        const { accountId } = principal(res);
        const { subscription, replayed } = await subscribeAsCustomer(
          { pool, methods, limits },
          { accountId, request: body, idempotencyKey: key, actor: apiKeyActor(req, res) },
        );
        if (!replayed && subscription.kind === 'bandwidth_plan') {
          // The usage answer and every API process's caches show the plan's GB before the answer.
          await deleteSnapshot(pool, accountId);
          await waitForApiCaches();
        }
        return {
          status: 201,
          body: ok(subscription),
          headers: { 'Idempotent-Replayed': String(replayed) },
        };
      },
    }),
    defineRoute<AutoRenewUpdate, SubscriptionParams>({
      method: 'patch',
      path: '/subscriptions/:subscriptionId',
      tag: 'billing',
      summary: 'Turn renewal of a subscription off or on ({autoRenew})',
      description: 'Off: it ends (expired) at paidUntil and nothing more is billed. ' + WHAT,
      auth: 'apiKey',
      params: subscriptionParams,
      paramsError: 'SUBSCRIPTION_NOT_FOUND',
      body: autoRenewUpdate,
      response: okSchema(subscriptionViewSchema),
      errors: ['VALIDATION_FAILED', 'SUBSCRIPTION_NOT_FOUND'],
      handler: async ({ params, body, req, res }) => ({
        body: ok(
          await changeSubscription(
            pool,
            principal(res).accountId,
            params.subscriptionId,
            { autoRenew: body.autoRenew },
            apiKeyActor(req, res),
          ),
        ),
      }),
    }),
  ];
}

export function adminSubscriptionRoutes(pool: Pool): RouteDef[] {
  const one = { params: adminSubscriptionParams, paramsError: 'SUBSCRIPTION_NOT_FOUND' as const };
  const mustExist = async (id: string) => {
    const { rowCount } = await pool.query('SELECT 1 FROM accounts WHERE id = $1', [id]);
    if (rowCount !== 1) throw new AppError('ACCOUNT_NOT_FOUND');
  };
  return [
    defineRoute<undefined, { id: string }>({
      method: 'get',
      path: '/accounts/:id/subscriptions',
      tag: 'admin',
      summary: "An account's subscriptions (as GET /api/v1/subscriptions)",
      auth: 'admin',
      params: accountParams,
      paramsError: 'ACCOUNT_NOT_FOUND',
      response: subscriptionListSchema,
      errors: ['ACCOUNT_NOT_FOUND'],
      handler: async ({ params }) => {
        await mustExist(params.id);
        return { body: { subscriptions: await listSubscriptions(pool, params.id) } };
      },
    }),
    defineRoute<SubscriptionCreate, { id: string }>({
      method: 'post',
      path: '/accounts/:id/subscriptions',
      tag: 'admin',
      summary: 'Start a subscription: an ISP proxy rental or a bandwidth plan',
      description:
        'kind "isp_proxy": {country, proxyCount, ispProxyIds?}, priced per proxy-month by country; kind ' +
        '"bandwidth_plan": {product, gbPerPeriod}, priced at the product’s price per GB. The first period is ' +
        'invoiced by the worker’s next pass. ' +
        WHAT,
      auth: 'admin',
      params: accountParams,
      paramsError: 'ACCOUNT_NOT_FOUND',
      body: subscriptionCreateSchema,
      response: subscriptionViewSchema,
      status: 201,
      errors: ['VALIDATION_FAILED', 'ACCOUNT_NOT_FOUND', 'ISP_PROXY_NOT_FOUND'],
      handler: async ({ params, body, req }) => ({
        status: 201,
        body: await createSubscription(pool, params.id, body, adminActor(req)),
      }),
    }),
    defineRoute<SubscriptionChange, AdminSubscriptionParams>({
      method: 'patch',
      path: '/accounts/:id/subscriptions/:subscriptionId',
      tag: 'admin',
      summary:
        'Change a subscription: proxyCount (ISP), gbPerPeriod (plan), autoRenew; from the next renewal',
      auth: 'admin',
      ...one,
      body: subscriptionChangeSchema,
      response: subscriptionViewSchema,
      errors: ['VALIDATION_FAILED', 'SUBSCRIPTION_NOT_FOUND'],
      handler: async ({ params, body, req }) => ({
        body: await changeSubscription(pool, params.id, params.subscriptionId, body, adminActor(req)),
      }),
    }),
    defineRoute<undefined, AdminSubscriptionParams>({
      method: 'post',
      path: '/accounts/:id/subscriptions/:subscriptionId/cancel',
      tag: 'admin',
      summary: 'Cancel a subscription at once: no more renewals; what was paid stays paid until paidUntil',
      auth: 'admin',
      ...one,
      response: subscriptionViewSchema,
      errors: ['SUBSCRIPTION_NOT_FOUND'],
      handler: async ({ params, req }) => ({
        body: await cancelSubscription(pool, params.id, params.subscriptionId, adminActor(req)),
      }),
    }),
  ];
}
