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
import { defineRoute, ok, okSchema, type RouteDef } from '#api/http/route.ts';
import { adminActor, apiKeyActor } from '#api/http/actor.ts';
import { accountParams } from '#api/http/schemas.ts';
import { principal } from '#api/modules/auth/middleware.ts';
import {
  adminSubscriptionParams,
  autoRenewUpdate,
  subscriptionListSchema,
  subscriptionParams,
  type AdminSubscriptionParams,
  type AutoRenewUpdate,
  type SubscriptionParams,
} from './schemas.ts';

const WHAT =
  'Monthly, on the start day’s anniversary (UTC; the last day of shorter months). Each renewal is an invoice ' +
  '(source "renewal"); a plan adds its GB (unused GB roll over); an ISP rental extends paidUntil. A failed ' +
  'payment makes it past_due until graceEndsAt, then expired.';

export function subscriptionRoutes(pool: Pool): RouteDef[] {
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
