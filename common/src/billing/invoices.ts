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
  currency: z.string(),
  source: z.enum(['purchase', 'auto-refill', 'renewal']),
  subscriptionId: z.string().nullable().describe('The subscription a renewal invoice renews'),
  description: z.string().nullable().describe('A renewal: what and which period (UTC dates)'),
  status: z.enum(['issued', 'paid', 'void']),
  issuedAt: z.string(),
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
  source: 'admin' | 'auto_refill' | 'renewal' | null;
  subscription_id: string | null;
  description: string | null;
  status: InvoiceView['status'];
  issued_at: Date;
}

export async function listInvoices(pool: Pool, accountId: string, q: InvoiceListQuery): Promise<InvoiceList> {
  const { rows } = await pool.query<Row>(
    `SELECT i.id, i.number, i.product, i.bytes, i.amount_cents, i.currency, p.source, i.status, i.issued_at,
            i.subscription_id, i.description
       FROM invoices i LEFT JOIN purchases p ON p.id = i.purchase_id
      WHERE i.account_id = $1 AND ($2::bigint IS NULL OR i.number < $2)
      ORDER BY i.number DESC LIMIT $3`,
    [accountId, q.before ?? null, q.limit + 1],
  );
  const page = rows.slice(0, q.limit);
  return {
    invoices: page.map((r) => ({
      id: r.id,
      number: r.number,
      product: r.product,
      gb: Math.round(((r.bytes ?? 0) / BYTES_PER_GB) * 1e9) / 1e9,
      bytes: r.bytes ?? 0,
      amount: r.amount_cents === null ? null : r.amount_cents / 100,
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
    })),
    nextBefore: rows.length > q.limit ? page[page.length - 1]!.number : null,
  };
}
