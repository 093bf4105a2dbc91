// POST /admin/v1/accounts/:id/purchases: bandwidth bought, an invoice issued; usage shows it at once.
import { recordPurchase } from '#common/billing/purchases.ts';
import { gbToBytes } from '#common/products.ts';
import { adminActor } from '#api/http/actor.ts';
import { deleteSnapshot } from '#api/modules/usage/repo.ts';
import { gb } from '#api/modules/usage/service.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import * as s from '../schemas.ts';
import { type AdminContext, type IdParams, oneAccount } from '../context.ts';

export function purchaseRoute(ctx: AdminContext): RouteDef {
  return defineRoute<s.PurchaseRequest, IdParams>({
    method: 'post',
    path: '/accounts/:id/purchases',
    tag: 'admin',
    summary: 'Buy bandwidth (fractional GB allowed); issues an invoice',
    auth: 'admin',
    ...oneAccount,
    body: s.purchaseSchema,
    response: s.invoiceSchema,
    status: 201,
    errors: ['VALIDATION_FAILED', 'ACCOUNT_NOT_FOUND', 'IDEMPOTENCY_KEY_REUSED'],
    handler: async ({ params, body, req }) => {
      const idempotencyKey = body.idempotencyKey ?? req.get('Idempotency-Key');
      const invoice = await recordPurchase(ctx.pool, {
        accountId: params.id,
        product: body.product,
        bytes: gbToBytes(body.gb),
        ...(idempotencyKey ? { idempotencyKey } : {}),
        actor: adminActor(req),
      });
      await deleteSnapshot(ctx.pool, params.id);
      return ctx.synced({
        status: 201,
        body: { ...invoice, gb: gb(invoice.bytes), issuedAt: invoice.issuedAt.toISOString() },
      });
    },
  });
}
