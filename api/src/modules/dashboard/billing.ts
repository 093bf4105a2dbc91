// The Billing page's view of the shared billing operations (common/src/billing/): the same
// invoice listing as GET /api/v1/invoices and the same auto-refill settings as
// GET /api/v1/auto-refill/:product.
import { getAutoRefill } from '#common/billing/auto-refill.ts';
import { listInvoices as listAccountInvoices } from '#common/billing/invoices.ts';
import type { Pool } from '#common/db/pool.ts';
import { BYTES_PER_GB, PRODUCTS } from '#common/products.ts';

export interface InvoiceLine {
  number: number;
  product: string;
  bytes: number;
  status: string;
  source: 'purchase' | 'auto-refill';
  issuedAt: Date;
}

export interface AutoRefillLine {
  product: string;
  enabled: boolean;
  thresholdBytes: number;
  refillBytes: number;
  maxRefillsPerMonth: number;
}

/** The newest invoices (one page of the API's listing, its largest). */
export async function listInvoices(pool: Pool, accountId: string): Promise<InvoiceLine[]> {
  const page = await listAccountInvoices(pool, accountId, { limit: 100 });
  return page.invoices.map((i) => ({
    number: i.number,
    product: i.product,
    bytes: i.bytes,
    status: i.status,
    source: i.source,
    issuedAt: new Date(i.issuedAt),
  }));
}

/** The products whose auto-refill was ever configured. */
export async function listAutoRefill(pool: Pool, accountId: string): Promise<AutoRefillLine[]> {
  const settings = await Promise.all(PRODUCTS.map((p) => getAutoRefill(pool, accountId, p)));
  return settings.flatMap((s) =>
    s.thresholdGb === null || s.refillGb === null
      ? []
      : [
          {
            product: s.product,
            enabled: s.enabled,
            thresholdBytes: Math.round(s.thresholdGb * BYTES_PER_GB),
            refillBytes: Math.round(s.refillGb * BYTES_PER_GB),
            maxRefillsPerMonth: s.maxRefillsPerMonth,
          },
        ],
  );
}
