// Auto-refill settings per account and product, shared by the admin API, the customer API and the
// dashboard: plain functions over a pool. The refill itself is decided in SQL when a gateway
// draws a lease (migrations/0060 balance_check; docs/adr/0040).
import { z } from 'zod';
import type { Pool } from '../db/pool.ts';
import { BYTES_PER_GB, type Product } from '../products.ts';

/** A typo guard, as for purchases: 1 PB. */
export const MAX_REFILL_GB = 1_000_000;

const gbAmount = z
  .number()
  .positive()
  .max(MAX_REFILL_GB)
  .refine((gb) => Math.round(gb * BYTES_PER_GB) >= 1, 'must be at least one byte (1e-9 GB)');

export const autoRefillUpdateSchema = z
  .object({
    enabled: z.boolean(),
    thresholdGb: gbAmount.describe('Refill when the remaining bandwidth drops below this many GB'),
    refillGb: gbAmount.describe('GB bought per refill; more than thresholdGb'),
    maxRefillsPerMonth: z.number().int().min(1).max(100).default(5).describe('Per calendar month (UTC)'),
  })
  .refine((v) => v.thresholdGb < v.refillGb, {
    message: 'thresholdGb must be less than refillGb',
    path: ['thresholdGb'],
  });
export type AutoRefillUpdate = z.infer<typeof autoRefillUpdateSchema>;

export const autoRefillSettingsSchema = z.object({
  product: z.string(),
  enabled: z.boolean(),
  thresholdGb: z.number().nullable().describe('null: never configured'),
  refillGb: z.number().nullable(),
  maxRefillsPerMonth: z.number().int(),
  paymentMethod: z.string(),
  refillsThisMonth: z.number().int().describe('Refills made (or being paid) this calendar month, UTC'),
});
export type AutoRefillSettings = z.infer<typeof autoRefillSettingsSchema>;

const gb = (bytes: number) => Math.round((bytes / BYTES_PER_GB) * 1e9) / 1e9;

export async function getAutoRefill(
  pool: Pool,
  accountId: string,
  product: Product,
): Promise<AutoRefillSettings> {
  const { rows } = await pool.query<{
    enabled: boolean | null;
    threshold_bytes: number | null;
    refill_bytes: number | null;
    max_refills_per_month: number | null;
    payment_method: string | null;
    month: number;
  }>(
    `SELECT s.enabled, s.threshold_bytes, s.refill_bytes, s.max_refills_per_month, s.payment_method,
            (SELECT count(*) FROM auto_refills r WHERE r.account_id = $1 AND r.product = $2 AND r.status IN ('pending', 'succeeded')
                AND r.created_at >= date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')::int AS month
       FROM (SELECT 1) one LEFT JOIN auto_refill_settings s ON s.account_id = $1 AND s.product = $2`,
    [accountId, product],
  );
  const r = rows[0]!;
  return {
    product,
    enabled: r.enabled ?? false,
    thresholdGb: r.threshold_bytes === null ? null : gb(r.threshold_bytes),
    refillGb: r.refill_bytes === null ? null : gb(r.refill_bytes),
    maxRefillsPerMonth: r.max_refills_per_month ?? 5,
    paymentMethod: r.payment_method ?? 'invoice',
    refillsThisMonth: r.month,
  };
}

/**
 * Stores the settings; the next draw (or the worker's sweep within seconds) acts on them.
 * `paymentMethod` is for operators and tests; the public APIs leave it as it is ('invoice').
 */
export async function putAutoRefill(
  pool: Pool,
  accountId: string,
  product: Product,
  update: AutoRefillUpdate,
  paymentMethod?: string,
): Promise<AutoRefillSettings> {
  await pool.query(
    `INSERT INTO auto_refill_settings (account_id, product, enabled, threshold_bytes, refill_bytes, max_refills_per_month, payment_method)
     VALUES ($1, $2, $3, $4, $5, $6, coalesce($7, 'invoice'))
     ON CONFLICT (account_id, product) DO UPDATE SET enabled = EXCLUDED.enabled, threshold_bytes = EXCLUDED.threshold_bytes,
        refill_bytes = EXCLUDED.refill_bytes, max_refills_per_month = EXCLUDED.max_refills_per_month,
        payment_method = coalesce($7, auto_refill_settings.payment_method), updated_at = now()`,
    [
      accountId,
      product,
      update.enabled,
      Math.round(update.thresholdGb * BYTES_PER_GB),
      Math.round(update.refillGb * BYTES_PER_GB),
      update.maxRefillsPerMonth,
      paymentMethod ?? null,
    ],
  );
  return getAutoRefill(pool, accountId, product);
}
