// MERGE NOTE (issue 12 -> issue 11): the Billing page reads invoices and auto-refill settings
// straight from their tables here, because common/src/billing/ (issue 11) was being written on
// another branch at the same time. At merge, replace these two functions with the
// common/src/billing/ operations (the invoice listing with `source`, the auto-refill settings);
// the page only needs the shapes below.
import type { Pool } from '../../../../common/src/db/pool.ts';

export interface InvoiceLine {
  number: number;
  product: string;
  bytes: number;
  status: string;
  source: string;
  amountCents: number | null;
  currency: string;
  issuedAt: Date;
}

export interface AutoRefillLine {
  product: string;
  enabled: boolean;
  thresholdBytes: number;
  refillBytes: number;
  maxRefillsPerMonth: number;
}

export async function listInvoices(pool: Pool, accountId: string, limit = 100): Promise<InvoiceLine[]> {
  const { rows } = await pool.query<InvoiceLine>(
    `SELECT i.number, i.product, i.bytes, i.status, p.source, i.amount_cents AS "amountCents", i.currency, i.issued_at AS "issuedAt"
       FROM invoices i JOIN purchases p ON p.id = i.purchase_id
      WHERE i.account_id = $1 ORDER BY i.issued_at DESC, i.number DESC LIMIT $2`,
    [accountId, limit],
  );
  return rows;
}

export async function listAutoRefill(pool: Pool, accountId: string): Promise<AutoRefillLine[]> {
  const { rows } = await pool.query<AutoRefillLine>(
    `SELECT product, enabled, threshold_bytes AS "thresholdBytes", refill_bytes AS "refillBytes",
            max_refills_per_month AS "maxRefillsPerMonth"
       FROM auto_refill_settings WHERE account_id = $1 ORDER BY product`,
    [accountId],
  );
  return rows;
}
