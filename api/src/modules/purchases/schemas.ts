// What a customer sends to buy bandwidth (POST /api/v1/purchases, the Billing page's "Buy
// bandwidth") and the limits that bound it (PROXYFLEET_PURCHASE_MAX_GB, _DAILY_MAX_GB).
import { z } from 'zod';
import { invoiceViewSchema } from '#common/billing/invoices.ts';
import { PRODUCTS } from '#common/products.ts';
import { MAX_PURCHASE_GB } from '#api/http/schemas.ts';
import { validationError } from '#api/http/route.ts';

export interface PurchaseLimits {
  /** The most one purchase may buy, GB. */
  perPurchaseGb: number;
  /** The most an account may buy itself per calendar day (UTC), GB, all products together. */
  perDayGb: number;
}

export const DEFAULT_PURCHASE_LIMITS: PurchaseLimits = { perPurchaseGb: 1000, perDayGb: 5000 };

/** A limit from the environment: GB, above 0, at most what any purchase may name. */
export const purchaseGb = (fallback: number) =>
  z.coerce.number().positive().max(MAX_PURCHASE_GB).default(fallback);

/** The body, bounded by this deployment's per-purchase limit. */
export const customerPurchaseSchema = (limits: PurchaseLimits) =>
  z.strictObject({
    product: z.enum(PRODUCTS, { error: `must be one of ${PRODUCTS.join(', ')}` }),
    gb: z
      .number()
      .positive()
      .max(limits.perPurchaseGb)
      .refine((gb) => Math.round(gb * 1e9) >= 1, 'must be at least one byte (1e-9 GB)')
      .describe(`GB (10^9 bytes) to buy, fractional allowed; at most PROXYFLEET_PURCHASE_MAX_GB`),
  });
export type CustomerPurchase = z.infer<ReturnType<typeof customerPurchaseSchema>>;

/**
 * The Idempotency-Key header: one per purchase the customer means to make; a retry sends it again.
 * Visible ASCII and spaces (an HTTP field value that every client can send), 1-200 characters.
 */
export const idempotencyKeySchema = z
  .string()
  .min(1, 'is required')
  .max(200)
  .regex(/^[\x20-\x7e]*$/, 'must be printable ASCII');

/** The Idempotency-Key header, refused as a field would be ("Idempotency-Key: is required"). */
export function idempotencyKey(value: string | undefined): string {
  const parsed = z
    .object({ 'Idempotency-Key': idempotencyKeySchema })
    .safeParse({ 'Idempotency-Key': value });
  if (!parsed.success) throw validationError(parsed.error);
  return parsed.data['Idempotency-Key'];
}

export const purchaseAnswerSchema = invoiceViewSchema;
