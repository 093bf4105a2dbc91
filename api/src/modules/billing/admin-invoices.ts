// Operators settle invoices and list them for accounting (docs/operator.md "Invoices",
// docs/adr/0101): every account's invoices by status, their CSV export, and marking a bill-later
// invoice paid or void (audited, idempotent, final).
import { z } from 'zod';
import type { Pool } from '#common/db/pool.ts';
import { invoiceViewSchema } from '#common/billing/invoices.ts';
import { settleInvoice, type Settlement } from '#common/billing/settle.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import { adminActor } from '#api/http/actor.ts';
import { invoiceParams } from '#api/http/schemas.ts';
import { deleteSnapshot } from '#api/modules/usage/repo.ts';
import type { WaitForApiCaches } from '#api/modules/sync/wait.ts';
import {
  adminInvoiceCsvQuery,
  adminInvoiceListSchema,
  adminInvoiceQuery,
  invoicesCsv,
  listAllInvoices,
  type AdminInvoiceQuery,
} from './invoice-repo.ts';

type InvoiceParams = z.infer<typeof invoiceParams>;

const settledSchema = invoiceViewSchema.extend({
  accountId: z.string(),
  voidedBytes: z
    .number()
    .int()
    .nullable()
    .describe("Void only: the bytes of the purchase's bandwidth that voiding took back (the unused part)"),
});

const SETTLE = {
  paid: {
    summary: 'Mark a bill-later invoice paid: it no longer counts against the credit limit',
    description:
      'Idempotent: an invoice already paid is answered as it is. A void invoice cannot be paid (409). ' +
      'Audited as invoice.paid.',
  },
  void: {
    summary: 'Void an invoice: it will not be paid; the unused part of what it bought is taken back',
    description:
      'Idempotent: an invoice already void is answered as it is. A paid invoice cannot be voided (409). ' +
      "Takes back what is unused of the invoice's bandwidth (at most what it bought; docs/adr/0101). " +
      'Audited as invoice.voided.',
  },
} as const satisfies Record<Settlement, { summary: string; description: string }>;

export function adminInvoiceRoutes(pool: Pool, waitForApiCaches: WaitForApiCaches): RouteDef[] {
  const settle = (to: Settlement) =>
    defineRoute<undefined, InvoiceParams>({
      method: 'post',
      path: `/invoices/:invoiceId/${to}`,
      tag: 'admin',
      ...SETTLE[to],
      auth: 'admin',
      params: invoiceParams,
      paramsError: 'INVOICE_NOT_FOUND',
      response: settledSchema,
      errors: ['INVOICE_NOT_FOUND', 'INVOICE_SETTLED'],
      handler: async ({ params, req }) => {
        const invoice = await settleInvoice(pool, params.invoiceId, to, adminActor(req));
        if (to === 'void') {
          // The balance changed: the customer's usage answer and every API cache must show it.
          await deleteSnapshot(pool, invoice.accountId);
          const sync = await waitForApiCaches();
          return { body: invoice, headers: { 'Proxyfleet-Cache-Sync': `${sync.synced}/${sync.total}` } };
        }
        return { body: invoice };
      },
    });
  return [
    defineRoute<undefined, Record<string, string>, AdminInvoiceQuery>({
      method: 'get',
      path: '/invoices',
      tag: 'admin',
      summary:
        "Every account's invoices, newest first (?status=issued|paid|void, ?accountId=, ?limit=, ?before=)",
      auth: 'admin',
      query: adminInvoiceQuery,
      response: adminInvoiceListSchema,
      errors: ['VALIDATION_FAILED'],
      handler: async ({ query }) => ({ body: await listAllInvoices(pool, query) }),
    }),
    defineRoute<undefined, Record<string, string>, AdminInvoiceQuery>({
      method: 'get',
      path: '/invoices.csv',
      tag: 'admin',
      summary: 'The same invoices as CSV for accounting (text/csv, a header line, amounts as 20.00)',
      description:
        'Takes the filters of GET /admin/v1/invoices; limit defaults to and is at most 100000 rows.',
      auth: 'admin',
      query: adminInvoiceCsvQuery,
      rawTypes: { 'text/csv': 'one line per invoice, a header line, amounts as 20.00' },
      errors: ['VALIDATION_FAILED'],
      handler: async ({ query }) => {
        const { invoices } = await listAllInvoices(pool, query);
        return {
          raw: { contentType: 'text/csv; charset=utf-8', body: invoicesCsv(invoices) },
          headers: { 'Content-Disposition': 'attachment; filename="invoices.csv"' },
        };
      },
    }),
    settle('paid'),
    settle('void'),
  ];
}
