// What a customer files (docs/api.md "GET /api/v1/invoices/:id/pdf", "Billing details"): each
// invoice as a PDF naming the seller and the customer, and the customer's billing details it uses.
import type { z } from 'zod';
import type { Pool } from '#common/db/pool.ts';
import { AppError } from '#common/errors.ts';
import { defineRoute, ok, okSchema, type RouteDef } from '#api/http/route.ts';
import { apiKeyActor } from '#api/http/actor.ts';
import { invoiceParams } from '#api/http/schemas.ts';
import { principal } from '#api/modules/auth/middleware.ts';
import {
  billingDetailsSchema,
  readBillingDetails,
  saveBillingDetails,
  type BillingDetails,
} from './details.ts';
import { accountInvoicePdf, pdfHeaders, type Seller } from './pdf.ts';

type InvoiceParams = z.infer<typeof invoiceParams>;

export function invoiceFileRoutes(pool: Pool, seller: Seller): RouteDef[] {
  return [
    defineRoute<undefined, InvoiceParams>({
      method: 'get',
      path: '/invoices/:invoiceId/pdf',
      tag: 'billing',
      summary:
        'One invoice as a PDF (application/pdf) to file: seller, billing details, line, amount, status',
      description:
        'Additive to the spec. The seller from PROXYFLEET_SELLER_*, the customer from the billing details ' +
        "(company, address, VAT id; else the account email). Another account's invoice is 404.",
      auth: 'apiKey',
      params: invoiceParams,
      paramsError: 'INVOICE_NOT_FOUND',
      rawTypes: { 'application/pdf': 'the invoice as a PDF document' },
      errors: ['INVOICE_NOT_FOUND'],
      handler: async ({ params, res }) => {
        const file = await accountInvoicePdf(pool, seller, principal(res).accountId, params.invoiceId);
        if (!file) throw new AppError('INVOICE_NOT_FOUND');
        return { raw: { contentType: 'application/pdf', body: file.pdf }, headers: pdfHeaders(file.number) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/billing-details',
      tag: 'billing',
      summary: "The billing details invoices name the customer by (company, address, VAT id; '' when unset)",
      auth: 'apiKey',
      response: okSchema(billingDetailsSchema),
      handler: async ({ res }) => ({ body: ok(await readBillingDetails(pool, principal(res).accountId)) }),
    }),
    defineRoute<BillingDetails>({
      method: 'put',
      path: '/billing-details',
      tag: 'billing',
      summary: 'Set the billing details (all three fields; an empty string clears one)',
      description: 'Additive to the spec. Used by every invoice PDF from then on, earlier invoices included.',
      auth: 'apiKey',
      body: billingDetailsSchema,
      response: okSchema(billingDetailsSchema),
      errors: ['VALIDATION_FAILED'],
      handler: async ({ body, req, res }) => {
        const { accountId } = principal(res);
        await saveBillingDetails(pool, accountId, body, apiKeyActor(req, res));
        return { body: ok(await readBillingDetails(pool, accountId)) };
      },
    }),
  ];
}
