// Auto-refill settings, invoices and the credit limit (docs/api.md "Auto-refill", "Invoices",
// "Credit limit"): the customer's /api/v1 routes and the operators' invoice listing and credit
// limit, over common/src/billing.
import { z } from 'zod';
import { AppError } from '#common/errors.ts';
import type { Pool } from '#common/db/pool.ts';
import {
  autoRefillSettingsSchema,
  autoRefillUpdateSchema,
  getAutoRefill,
  putAutoRefill,
  type AutoRefillUpdate,
} from '#common/billing/auto-refill.ts';
import { invoiceListQuery, invoiceListSchema, listInvoices } from '#common/billing/invoices.ts';
import {
  creditLimitUpdateSchema,
  creditSchema,
  readCredit,
  setCreditLimit,
  toCents,
  type CreditLimitUpdate,
} from '#common/billing/credit.ts';
import { PRODUCTS } from '#common/products.ts';
import { defineRoute, ok, okSchema, validationError, type RouteDef } from '#api/http/route.ts';
import { principal } from '#api/modules/auth/middleware.ts';
import { adminActor, apiKeyActor } from '#api/http/actor.ts';
import { accountParams } from '#api/http/schemas.ts';
import type { WaitForApiCaches } from '#api/modules/sync/wait.ts';
import { adminInvoiceRoutes } from './admin-invoices.ts';

const productParams = z.object({ product: z.enum(PRODUCTS) });
type ProductParams = z.infer<typeof productParams>;

function parseQuery(query: unknown) {
  const parsed = invoiceListQuery.safeParse(query);
  if (!parsed.success) throw validationError(parsed.error);
  return parsed.data;
}

export function billingRoutes(pool: Pool): RouteDef[] {
  return [
    defineRoute<undefined, ProductParams>({
      method: 'get',
      path: '/auto-refill/:product',
      tag: 'billing',
      summary: 'Auto-refill settings of one product',
      description: 'Additive to the spec. thresholdGb and refillGb are null when never configured.',
      auth: 'apiKey',
      params: productParams,
      paramsError: 'NOT_FOUND',
      response: okSchema(autoRefillSettingsSchema),
      handler: async ({ params, res }) => ({
        body: ok(await getAutoRefill(pool, principal(res).accountId, params.product)),
      }),
    }),
    defineRoute<AutoRefillUpdate, ProductParams>({
      method: 'put',
      path: '/auto-refill/:product',
      tag: 'billing',
      summary: 'Turn auto-refill of one product on or off, with its threshold, refill amount and monthly cap',
      description:
        'Additive to the spec. When the remaining bandwidth drops below thresholdGb, refillGb is bought (an invoice, ' +
        'source "auto-refill"), at most maxRefillsPerMonth times per calendar month (UTC). thresholdGb must be less than refillGb.',
      auth: 'apiKey',
      params: productParams,
      paramsError: 'NOT_FOUND',
      body: autoRefillUpdateSchema,
      response: okSchema(autoRefillSettingsSchema),
      errors: ['VALIDATION_FAILED'],
      handler: async ({ params, body, req, res }) => ({
        body: ok(
          await putAutoRefill(
            pool,
            principal(res).accountId,
            params.product,
            body,
            undefined,
            apiKeyActor(req, res),
          ),
        ),
      }),
    }),
    defineRoute({
      method: 'get',
      path: '/invoices',
      tag: 'billing',
      summary: 'Invoices, newest first (?limit=20, 1-100; ?before=<nextBefore> for the next page)',
      auth: 'apiKey',
      response: okSchema(invoiceListSchema),
      errors: ['VALIDATION_FAILED'],
      handler: async ({ req, res }) => ({
        body: ok(await listInvoices(pool, principal(res).accountId, parseQuery(req.query))),
      }),
    }),
  ];
}

type AccountParams = z.infer<typeof accountParams>;

export function adminBillingRoutes(pool: Pool, waitForApiCaches: WaitForApiCaches): RouteDef[] {
  const mustExist = async (id: string) => {
    const { rowCount } = await pool.query('SELECT 1 FROM accounts WHERE id = $1', [id]);
    if (rowCount !== 1) throw new AppError('ACCOUNT_NOT_FOUND');
  };
  return [
    ...adminInvoiceRoutes(pool, waitForApiCaches),
    defineRoute<undefined, AccountParams>({
      method: 'get',
      path: '/accounts/:id/invoices',
      tag: 'admin',
      summary: "The account's invoices, newest first (?limit=20, 1-100; ?before=<nextBefore>)",
      auth: 'admin',
      params: accountParams,
      paramsError: 'ACCOUNT_NOT_FOUND',
      response: invoiceListSchema,
      errors: ['ACCOUNT_NOT_FOUND', 'VALIDATION_FAILED'],
      handler: async ({ params, req }) => {
        await mustExist(params.id);
        return { body: await listInvoices(pool, params.id, parseQuery(req.query)) };
      },
    }),
    defineRoute<undefined, AccountParams>({
      method: 'get',
      path: '/accounts/:id/credit-limit',
      tag: 'admin',
      summary: "The account's credit limit for bill-later payment, and what this month used of it",
      auth: 'admin',
      params: accountParams,
      paramsError: 'ACCOUNT_NOT_FOUND',
      response: creditSchema,
      errors: ['ACCOUNT_NOT_FOUND'],
      handler: async ({ params }) => {
        await mustExist(params.id);
        return { body: await readCredit(pool, params.id) };
      },
    }),
    defineRoute<CreditLimitUpdate, AccountParams>({
      method: 'put',
      path: '/accounts/:id/credit-limit',
      tag: 'admin',
      summary:
        "Set the account's credit limit per calendar month (null: the default, PROXYFLEET_CREDIT_LIMIT)",
      description:
        'Bill-later invoices of a calendar month (UTC) add up against it: an auto-refill paid by invoice that ' +
        'would pass it is not bought. Operator purchases are not limited, only counted.',
      auth: 'admin',
      params: accountParams,
      paramsError: 'ACCOUNT_NOT_FOUND',
      body: creditLimitUpdateSchema,
      response: creditSchema,
      errors: ['ACCOUNT_NOT_FOUND', 'VALIDATION_FAILED'],
      handler: async ({ params, body, req }) => {
        await mustExist(params.id);
        const credit = await setCreditLimit(
          pool,
          params.id,
          body.limit === null ? null : toCents(body.limit),
          adminActor(req),
        );
        const sync = await waitForApiCaches();
        return { body: credit, headers: { 'Proxyfleet-Cache-Sync': `${sync.synced}/${sync.total}` } };
      },
    }),
  ];
}
