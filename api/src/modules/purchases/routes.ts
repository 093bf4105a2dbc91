// POST /api/v1/purchases (docs/api.md): a customer buys bandwidth with an Idempotency-Key.
import type { Pool } from '#common/db/pool.ts';
import { defineRoute, ok, okSchema, type RouteDef } from '#api/http/route.ts';
import { apiKeyActor } from '#api/http/actor.ts';
import { principal } from '#api/modules/auth/middleware.ts';
import { deleteSnapshot } from '#api/modules/usage/repo.ts';
import type { WaitForApiCaches } from '#api/modules/sync/wait.ts';
import {
  customerPurchaseSchema,
  idempotencyKey,
  purchaseAnswerSchema,
  type CustomerPurchase,
  type PurchaseLimits,
} from './schemas.ts';
import { buyAsCustomer } from './service.ts';

export function purchaseRoutes(
  pool: Pool,
  limits: PurchaseLimits,
  waitForApiCaches: WaitForApiCaches,
): RouteDef[] {
  return [
    defineRoute<CustomerPurchase>({
      method: 'post',
      path: '/purchases',
      tag: 'billing',
      summary: 'Buy bandwidth, billed later by invoice (the Idempotency-Key header is required)',
      description:
        'Additive to the spec. Credits the bandwidth and issues the invoice at once, exactly once per ' +
        'Idempotency-Key: the same key and body again answers the same invoice (Idempotent-Replayed: true) ' +
        'and buys nothing; the same key with another body is 422. Bounded by PROXYFLEET_PURCHASE_MAX_GB per ' +
        'purchase, PROXYFLEET_PURCHASE_DAILY_MAX_GB per calendar day (UTC, 409) and the credit limit (409).',
      auth: 'apiKey',
      body: customerPurchaseSchema(limits),
      response: okSchema(purchaseAnswerSchema),
      status: 201,
      errors: [
        'VALIDATION_FAILED',
        'IDEMPOTENCY_KEY_REUSED',
        'PURCHASE_DAILY_LIMIT',
        'CREDIT_LIMIT_REACHED',
        'ACCOUNT_SUSPENDED',
      ],
      handler: async ({ body, req, res }) => {
        const key = idempotencyKey(req.get('Idempotency-Key'));
        const { accountId } = principal(res);
        const { invoice, replayed } = await buyAsCustomer(pool, limits, {
          accountId,
          ...body,
          idempotencyKey: key,
          actor: apiKeyActor(req, res),
        });
        if (!replayed) {
          // The usage answer and every API process's caches show the bandwidth before the answer.
          await deleteSnapshot(pool, accountId);
          await waitForApiCaches();
        }
        return { status: 201, body: ok(invoice), headers: { 'Idempotent-Replayed': String(replayed) } };
      },
    }),
  ];
}
