// Auto-refill settings per account and product, shared by the admin API, the customer API and the
// dashboard, and whether a refill may be bought now (the email renderer). The refill itself is
// decided in SQL on remaining = bought - used, once per crossing of the threshold (billing_check,
// billing_refill; docs/adr/0073).
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { withTransaction, type Pool, type PoolClient } from '../db/pool.ts';
import { lockAccountForAudit, recordAudit, type AuditActor } from '../audit/record.ts';
import { BYTES_PER_GB, type Product } from '../products.ts';

/** A typo guard, as for purchases: 1 PB. */
export const MAX_REFILL_GB = 1_000_000;

const gbAmount = z
  .number()
  .positive()
  .max(MAX_REFILL_GB)
  .refine((gb) => Math.round(gb * BYTES_PER_GB) >= 1, 'must be at least one byte (1e-9 GB)');

export const autoRefillUpdateSchema = z
  .strictObject({
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

export interface RefillVerdict {
  enabled: boolean;
  /** A refill may be bought now: on, under the monthly cap and (bill later) the credit limit. */
  allowed: boolean;
  reason: 'off' | 'monthly_cap' | 'credit_limit' | null;
  thresholdBytes: number | null;
  refillBytes: number | null;
  paymentMethod: string;
  refillsThisMonth: number;
  maxRefillsPerMonth: number;
}

/** Whether an auto-refill of the product may be bought now, and why not (billing_refill_verdict). */
export async function refillVerdict(
  db: Pool | PoolClient,
  accountId: string,
  product: string,
): Promise<RefillVerdict> {
  const { rows } = await db.query<RefillVerdict>(
    `SELECT enabled, allowed, reason, threshold_bytes AS "thresholdBytes", refill_bytes AS "refillBytes",
            payment_method AS "paymentMethod", refills_this_month AS "refillsThisMonth",
            max_refills_per_month AS "maxRefillsPerMonth"
       FROM billing_refill_verdict($1, $2)`,
    [accountId, product],
  );
  return rows[0]!;
}

export async function getAutoRefill(
  pool: Pool | PoolClient,
  accountId: string,
  product: Product,
): Promise<AutoRefillSettings> {
  const v = await refillVerdict(pool, accountId, product);
  return {
    product,
    enabled: v.enabled,
    thresholdGb: v.thresholdBytes === null ? null : gb(v.thresholdBytes),
    refillGb: v.refillBytes === null ? null : gb(v.refillBytes),
    maxRefillsPerMonth: v.maxRefillsPerMonth,
    paymentMethod: v.paymentMethod,
    refillsThisMonth: v.refillsThisMonth,
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
  actor?: AuditActor,
): Promise<AutoRefillSettings> {
  if (actor)
    return withTransaction(pool, async (client) => {
      await lockAccountForAudit(client, accountId);
      const before = await getAutoRefill(client, accountId, product);
      await writeAutoRefill(client, accountId, product, update, paymentMethod);
      const after = await getAutoRefill(client, accountId, product);
      // Only a change is audited (docs/security.md "Audit log").
      if (isDeepStrictEqual(before, after)) return after;
      await recordAudit(client, {
        accountId,
        actor,
        action: 'auto_refill.updated',
        target: { type: 'product', id: product },
        details: { ...update, ...(paymentMethod ? { paymentMethod } : {}) },
      });
      return after;
    });
  await writeAutoRefill(pool, accountId, product, update, paymentMethod);
  return getAutoRefill(pool, accountId, product);
}

async function writeAutoRefill(
  db: Pool | PoolClient,
  accountId: string,
  product: Product,
  update: AutoRefillUpdate,
  paymentMethod: string | undefined,
): Promise<void> {
  await db.query(
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
}
