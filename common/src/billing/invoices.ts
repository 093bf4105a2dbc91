// Invoices of an account, newest first, for the admin API, the customer API, the CLI and the
// dashboard. Amounts were fixed when the invoice was issued (product_prices at that moment).
import { z } from 'zod';
import type { Pool } from '../db/pool.ts';
import { BYTES_PER_GB, PRODUCTS, type Product } from '../products.ts';

export const invoiceListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  before: z.coerce
    .number()
    .int()
    .positive()
    .optional()
    .describe("Only invoices numbered below this (the previous page's nextBefore)"),
});
export type InvoiceListQuery = z.infer<typeof invoiceListQuery>;

export const invoiceViewSchema = z.object({
  id: z.string(),
  number: z.number().int(),
  product: z
    .enum(PRODUCTS)
    .nullable()
    .describe("null for an ISP proxy rental's renewal (no bandwidth bought)"),
  gb: z.number(),
  bytes: z.number().int().describe("0 for an ISP proxy rental's renewal"),
  amount: z.number().nullable().describe('In currency units; null for invoices issued before prices existed'),
  amountCents: z
    .number()
    .int()
    .nullable()
    .describe('The same amount in the smallest unit of the currency (whole cents), as it is kept'),
  currency: z.string(),
  source: z.enum(['purchase', 'auto-refill', 'renewal']),
  subscriptionId: z.string().nullable().describe('The subscription a renewal invoice renews'),
  description: z.string().nullable().describe('A renewal: what and which period (UTC dates)'),
  status: z
    .enum(['issued', 'paid', 'void', 'refunded'])
    .describe(
      'issued: unpaid; paid and void are set by an operator (docs/adr/0101) or by a card payment; refunded: a card payment refunded or disputed (docs/adr/0110)',
    ),
  issuedAt: z.string(),
  paidAt: z.string().nullable().describe('When it was marked paid; null unless paid'),
  voidedAt: z.string().nullable().describe('When it was voided; null unless void'),
});
export type InvoiceView = z.infer<typeof invoiceViewSchema>;

export const invoiceListSchema = z.object({
  invoices: z.array(invoiceViewSchema),
  nextBefore: z.number().int().nullable().describe('Pass as ?before= for the next page; null on the last'),
});
export type InvoiceList = z.infer<typeof invoiceListSchema>;

interface Row {
  id: string;
  number: number;
  product: Product | null;
  bytes: number | null;
  amount_cents: number | null;
  currency: string;
  source: 'admin' | 'auto_refill' | 'renewal' | 'customer' | null;
  subscription_id: string | null;
  description: string | null;
  status: InvoiceView['status'];
  issued_at: Date;
  paid_at: Date | null;
  voided_at: Date | null;
}

/** The columns every invoice answer is made of (`i`: invoices, `p`: its purchase, LEFT JOINed). */
export const INVOICE_COLUMNS = `i.id, i.number, i.product, i.bytes, i.amount_cents, i.currency, p.source, i.status,
  i.issued_at, i.paid_at, i.voided_at, i.subscription_id, i.description`;

export async function listInvoices(pool: Pool, accountId: string, q: InvoiceListQuery): Promise<InvoiceList> {
  const { rows } = await pool.query<Row>(
    `SELECT ${INVOICE_COLUMNS}
       FROM invoices i LEFT JOIN purchases p ON p.id = i.purchase_id
      WHERE i.account_id = $1 AND ($2::bigint IS NULL OR i.number < $2)
      ORDER BY i.number DESC LIMIT $3`,
    [accountId, q.before ?? null, q.limit + 1],
  );
  const page = rows.slice(0, q.limit);
  return {
    invoices: page.map(toInvoiceView),
    nextBefore: rows.length > q.limit ? page[page.length - 1]!.number : null,
  };
}

/** One invoice of the account, or null (another account's is null too: it is not found). */
export async function readInvoice(
  pool: Pool,
  accountId: string,
  invoiceId: string,
): Promise<InvoiceView | null> {
  const { rows } = await pool.query<Row>(
    `SELECT ${INVOICE_COLUMNS} FROM invoices i LEFT JOIN purchases p ON p.id = i.purchase_id
      WHERE i.account_id = $1 AND i.id = $2`,
    [accountId, invoiceId],
  );
  return rows[0] ? toInvoiceView(rows[0]) : null;
}

/** An invoice row (INVOICE_COLUMNS) as every answer shows it. Amounts: whole cents / 100. */
export function toInvoiceView(r: Row): InvoiceView {
  return {
    id: r.id,
    number: r.number,
    product: r.product,
    gb: Math.round(((r.bytes ?? 0) / BYTES_PER_GB) * 1e9) / 1e9,
    bytes: r.bytes ?? 0,
    amount: r.amount_cents === null ? null : r.amount_cents / 100,
    amountCents: r.amount_cents,
    currency: r.currency,
    source:
      r.subscription_id !== null || r.source === 'renewal'
        ? 'renewal'
        : r.source === 'auto_refill'
          ? 'auto-refill'
          : 'purchase',
    subscriptionId: r.subscription_id,
    description: r.description,
    status: r.status,
    issuedAt: r.issued_at.toISOString(),
    paidAt: r.paid_at?.toISOString() ?? null,
    voidedAt: r.voided_at?.toISOString() ?? null,
  };
}

export type InvoiceRow = Row;
