// Request and response schemas of the subscription routes (docs/api.md "Subscriptions").
import { z } from 'zod';
import { subscriptionViewSchema } from '#common/billing/subscriptions.ts';
import { PRODUCTS } from '#common/products.ts';
import { uuid } from '#api/http/schemas.ts';

/** The database's bounds (migrations/0120_subscriptions.sql). */
const MAX_PLAN_GB = 100_000;
const MAX_PROXY_COUNT = 1000;

export const subscriptionParams = z.object({ subscriptionId: uuid });
export type SubscriptionParams = z.infer<typeof subscriptionParams>;

export const adminSubscriptionParams = z.object({ id: uuid, subscriptionId: uuid });
export type AdminSubscriptionParams = z.infer<typeof adminSubscriptionParams>;

export const autoRenewUpdate = z.strictObject({
  autoRenew: z.boolean().describe('false: it ends at paidUntil; true: it renews then'),
});
export type AutoRenewUpdate = z.infer<typeof autoRenewUpdate>;

export const subscriptionListSchema = z.object({ subscriptions: z.array(subscriptionViewSchema) });

/** Subscriptions an account may hold active or past due when it subscribes itself (docs/adr/0114). */
export const DEFAULT_SUBSCRIPTIONS_MAX = 20;

export interface SubscribeLimits {
  /** A plan's GB per period are at most what one purchase may buy (PROXYFLEET_PURCHASE_MAX_GB). */
  perPurchaseGb: number;
  /** PROXYFLEET_SUBSCRIPTIONS_MAX. */
  maxActive: number;
}

/** The payment methods a customer chooses from; "card" needs Stripe and a saved card. */
export const CUSTOMER_PAYMENT_METHODS = ['invoice', 'card'] as const;

const paymentMethod = z
  .enum(CUSTOMER_PAYMENT_METHODS, { error: 'must be "invoice" or "card"' })
  .default('invoice')
  .describe('"invoice": billed later, within the credit limit; "card": the saved card (Stripe), off-session');

/** POST /api/v1/subscriptions: a bandwidth plan or an ISP rental, bounded by this deployment's limits. */
export const customerSubscriptionSchema = (limits: Pick<SubscribeLimits, 'perPurchaseGb'>) =>
  z.discriminatedUnion(
    'kind',
    [
      z.strictObject({
        kind: z.literal('bandwidth_plan'),
        product: z.enum(PRODUCTS, { error: `must be one of ${PRODUCTS.join(', ')}` }),
        gbPerPeriod: z
          .number()
          .int()
          .min(1)
          .max(Math.min(MAX_PLAN_GB, Math.floor(limits.perPurchaseGb)))
          .describe('Whole GB added every month; at most PROXYFLEET_PURCHASE_MAX_GB'),
        paymentMethod,
      }),
      z.strictObject({
        kind: z.literal('isp_proxy'),
        country: z
          .string()
          .regex(/^[a-z]{2}$/, 'must be a two-letter country code in lower case')
          .describe("The country of the account's ISP proxies to rent"),
        proxyCount: z
          .number()
          .int()
          .min(1)
          .max(MAX_PROXY_COUNT)
          .describe("How many of the account's ISP proxies in that country to rent"),
        paymentMethod,
      }),
    ],
    { error: 'must be "bandwidth_plan" or "isp_proxy"' },
  );
export type CustomerSubscription = z.infer<ReturnType<typeof customerSubscriptionSchema>>;

export const subscribedSchema = subscriptionViewSchema.extend({
  invoiceId: z.string().describe("The first month's invoice (GET /api/v1/invoices)"),
});
export type Subscribed = z.infer<typeof subscribedSchema>;
