// Every account's invoices for operators (GET /admin/v1/invoices and its CSV export for
// accounting), filtered by status and account, newest first.
import { z } from 'zod';
import type { Pool } from '#common/db/pool.ts';
import {
  INVOICE_COLUMNS,
  invoiceListQuery,
  invoiceViewSchema,
  toInvoiceView,
  type InvoiceRow,
} from '#common/billing/invoices.ts';
import { uuid } from '#api/http/schemas.ts';

/** The most rows one CSV export holds; a larger export is cut by `before` as the list is. */
export const CSV_MAX_ROWS = 100_000;

const filters = {
  status: z.enum(['issued', 'paid', 'void']).optional().describe('Only invoices in this status'),
  accountId: uuid.optional().describe("Only this account's invoices"),
  before: invoiceListQuery.shape.before,
};
export const adminInvoiceQuery = z.strictObject({
  ...filters,
  limit: z.coerce.number().int().min(1).max(100).default(20),
});
export const adminInvoiceCsvQuery = z.strictObject({
  ...filters,
  limit: z.coerce.number().int().min(1).max(CSV_MAX_ROWS).default(CSV_MAX_ROWS),
});
export type AdminInvoiceQuery = z.infer<typeof adminInvoiceQuery>;

export const adminInvoiceSchema = invoiceViewSchema.extend({
  accountId: z.string(),
  accountEmail: z.string(),
  settlement: z.enum(['deferred', 'charged']).describe('deferred: billed later; charged: paid when bought'),
  paymentMethod: z.string(),
});
export type AdminInvoice = z.infer<typeof adminInvoiceSchema>;

export const adminInvoiceListSchema = z.object({
  invoices: z.array(adminInvoiceSchema),
  nextBefore: z.number().int().nullable().describe('Pass as ?before= for the next page; null on the last'),
});

interface Row extends InvoiceRow {
  account_id: string;
  email: string;
  settlement: AdminInvoice['settlement'];
  payment_method: string;
}

export async function listAllInvoices(
  pool: Pool,
  q: AdminInvoiceQuery,
): Promise<{ invoices: AdminInvoice[]; nextBefore: number | null }> {
  const { rows } = await pool.query<Row>(
    `SELECT ${INVOICE_COLUMNS}, i.account_id, a.email, i.settlement, i.payment_method
       FROM invoices i LEFT JOIN purchases p ON p.id = i.purchase_id JOIN accounts a ON a.id = i.account_id
      WHERE ($1::text IS NULL OR i.status = $1) AND ($2::uuid IS NULL OR i.account_id = $2)
        AND ($3::bigint IS NULL OR i.number < $3)
      ORDER BY i.number DESC LIMIT $4`,
    [q.status ?? null, q.accountId ?? null, q.before ?? null, q.limit + 1],
  );
  const page = rows.slice(0, q.limit);
  return {
    invoices: page.map((r) => ({
      ...toInvoiceView(r),
      accountId: r.account_id,
      accountEmail: r.email,
      settlement: r.settlement,
      paymentMethod: r.payment_method,
    })),
    nextBefore: rows.length > q.limit ? page[page.length - 1]!.number : null,
  };
}

const CSV_COLUMNS = [
  'number',
  'id',
  'accountId',
  'accountEmail',
  'issuedAt',
  'status',
  'paidAt',
  'voidedAt',
  'source',
  'product',
  'bytes',
  'amount',
  'currency',
  'settlement',
  'paymentMethod',
  'description',
] as const;

/** Whole cents as a decimal text ("20.00"), without going through a float. */
export function centsText(cents: number): string {
  const sign = cents < 0 ? '-' : '';
  const abs = Math.abs(cents);
  return `${sign}${Math.trunc(abs / 100)}.${String(abs % 100).padStart(2, '0')}`;
}

/**
 * One CSV field (RFC 4180: quoted when it holds a comma, quote or line break). A text a
 * spreadsheet would run as a formula (starting with = + - @, a tab or CR; OWASP "CSV Injection")
 * is prefixed with a quote mark.
 */
function field(value: string | number | null): string {
  if (value === null) return '';
  let text = String(value);
  if (typeof value === 'string' && /^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** The invoices as CSV, a header line first, CRLF line ends (RFC 4180). Amounts in units of the currency. */
export function invoicesCsv(invoices: AdminInvoice[]): string {
  const lines = invoices.map((i) =>
    CSV_COLUMNS.map((c) =>
      c === 'amount' ? field(i.amountCents === null ? null : centsText(i.amountCents)) : field(i[c]),
    ).join(','),
  );
  return [CSV_COLUMNS.join(','), ...lines].map((l) => `${l}\r\n`).join('');
}
