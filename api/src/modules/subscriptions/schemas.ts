// Request and response schemas of the subscription routes (docs/api.md "Subscriptions").
import { z } from 'zod';
import { subscriptionViewSchema } from '#common/billing/subscriptions.ts';
import { uuid } from '#api/http/schemas.ts';

export const subscriptionParams = z.object({ subscriptionId: uuid });
export type SubscriptionParams = z.infer<typeof subscriptionParams>;

export const adminSubscriptionParams = z.object({ id: uuid, subscriptionId: uuid });
export type AdminSubscriptionParams = z.infer<typeof adminSubscriptionParams>;

export const autoRenewUpdate = z.strictObject({
  autoRenew: z.boolean().describe('false: it ends at paidUntil; true: it renews then'),
});
export type AutoRenewUpdate = z.infer<typeof autoRenewUpdate>;

export const subscriptionListSchema = z.object({ subscriptions: z.array(subscriptionViewSchema) });
