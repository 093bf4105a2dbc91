// Auto-refill in the worker (docs/adr/0040). The refill is decided in SQL when a gateway draws a
// lease (migrations/0060 balance_check); two jobs complete it:
// - balance-sweep: runs the same decision for balances no draw looks at (a balance already dry
//   when auto-refill is turned on, a new month, usage folded past its lease), and queues missed
//   low-bandwidth alerts the same way;
// - auto-refill: pays refills left 'pending' by a method that must charge first. It holds the
//   refill row locked while it charges, then buys in the same transaction, so a worker killed
//   mid-refill leaves the row pending; the retry charges with the same idempotency key (one per
//   crossing) and purchase_record cannot buy twice for it.
import type { Pool, PoolClient } from '#common/db/pool.ts';
import { recordPurchaseIn } from '#common/accounts/accounts.ts';
import { syncPrices, type PriceTable } from '#common/billing/prices.ts';
import type { ChargeResult, PaymentMethods } from '#common/billing/payment.ts';
import type { Product } from '#common/products.ts';
import type { Logger } from '#common/logger.ts';
import type { Job } from '../jobs.ts';

export const BALANCE_SWEEP_INTERVAL_MS = 5_000;
const BALANCE_SWEEP_BATCH = 100;
export const AUTO_REFILL_INTERVAL_MS = 1_000;
/** A charge that takes longer counts as a temporary failure (retried). */
export const CHARGE_TIMEOUT_MS = 30_000;
/** Temporary charge failures (exceptions, timeouts) before the refill is marked failed. */
export const CHARGE_MAX_ATTEMPTS = 5;
const CHARGE_RETRY_BASE_MS = 5_000;

export const balanceSweepJob: Job = {
  name: 'balance-sweep',
  intervalMs: BALANCE_SWEEP_INTERVAL_MS,
  async run({ pool, logger }) {
    const { rows } = await pool.query<{ n: number }>('SELECT balance_sweep($1) AS n', [BALANCE_SWEEP_BATCH]);
    if (rows[0]?.n) logger.debug({ checked: rows[0].n }, 'balances checked by the sweep');
  },
};

/** Writes the configured price table to the database once, at start (then hourly, harmlessly). */
export function priceSyncJob(table: PriceTable): Job {
  return { name: 'price-sync', intervalMs: 3_600_000, run: ({ pool }) => syncPrices(pool, table) };
}

interface PendingRefill {
  id: string;
  account_id: string;
  product: Product;
  idempotency_key: string;
  bytes: number;
  payment_method: string;
  attempts: number;
  cents: number;
  currency: string;
}

export function autoRefillJob(methods: PaymentMethods): Job {
  return {
    name: 'auto-refill',
    intervalMs: AUTO_REFILL_INTERVAL_MS,
    async run({ pool, logger }) {
      // One refill per transaction; a handful per run so one slow method cannot hold the job.
      for (let i = 0; i < 20; i++) if (!(await payOne(pool, methods, logger))) return;
    },
  };
}

/** Pays one due pending refill; false when none was due. */
export async function payOne(pool: Pool, methods: PaymentMethods, logger: Logger): Promise<boolean> {
  return inTransaction(pool, async (client) => {
    const { rows } = await client.query<PendingRefill>(
      `SELECT r.id, r.account_id, r.product, r.idempotency_key, r.bytes, r.payment_method, r.attempts,
              coalesce(round(r.bytes * p.cents_per_gb / 1000000000), 0)::bigint AS cents, coalesce(p.currency, 'USD') AS currency
         FROM auto_refills r LEFT JOIN product_prices p ON p.product = r.product
        WHERE r.status = 'pending' AND r.next_attempt_at <= now()
        ORDER BY r.next_attempt_at, r.id LIMIT 1 FOR UPDATE OF r SKIP LOCKED`,
    );
    const refill = rows[0];
    if (!refill) return false;
    const method = methods.get(refill.payment_method);
    let result: ChargeResult | 'retry';
    if (!method) {
      result = { ok: false, reason: `unknown payment method "${refill.payment_method}"` };
    } else {
      result = await withTimeout(
        method.charge({
          accountId: refill.account_id,
          product: refill.product,
          bytes: refill.bytes,
          amountCents: refill.cents,
          currency: refill.currency,
          idempotencyKey: `${refill.account_id}:${refill.idempotency_key}`,
        }),
        CHARGE_TIMEOUT_MS,
      ).catch((err: unknown) => {
        logger.warn(
          { refill: refill.id, err: err instanceof Error ? err.message : String(err) },
          'auto-refill charge failed; will retry',
        );
        return 'retry' as const;
      });
    }
    if (result === 'retry' && refill.attempts + 1 < CHARGE_MAX_ATTEMPTS) {
      await client.query(
        `UPDATE auto_refills SET attempts = attempts + 1, next_attempt_at = now() + make_interval(secs => $2::double precision / 1000)
          WHERE id = $1`,
        [refill.id, CHARGE_RETRY_BASE_MS * 2 ** refill.attempts],
      );
      return true;
    }
    if (result !== 'retry' && result.ok) {
      const invoice = await recordPurchaseIn(client, {
        accountId: refill.account_id,
        product: refill.product,
        bytes: refill.bytes,
        source: 'auto_refill',
        idempotencyKey: refill.idempotency_key,
      });
      await client.query(
        `UPDATE auto_refills SET status = 'succeeded', purchase_id = $2, attempts = attempts + 1, decided_at = now() WHERE id = $1`,
        [refill.id, invoice.purchaseId],
      );
      logger.info({ refill: refill.id, invoice: invoice.number }, 'auto-refill paid and bought');
      return true;
    }
    const reason = result === 'retry' ? 'the payment method did not answer' : result.reason;
    await client.query(
      `UPDATE auto_refills SET status = 'failed', error = $2, attempts = attempts + 1, decided_at = now() WHERE id = $1`,
      [refill.id, reason.slice(0, 500)],
    );
    await client.query(
      `INSERT INTO email_outbox (account_id, kind, dedupe_key, to_address, payload, message_id)
       SELECT $1, 'auto_refill_failed', 'auto_refill_failed:' || $2::text, a.email, jsonb_build_object('refillId', $2::text),
              '<auto-refill-failed-' || $2::text || '@proxyfleet>'
         FROM accounts a WHERE a.id = $1
       ON CONFLICT (dedupe_key) DO NOTHING`,
      [refill.account_id, refill.id],
    );
    logger.warn({ refill: refill.id, reason }, 'auto-refill failed; nothing bought');
    return true;
  });
}

/**
 * A transaction that may sit idle while a payment method answers: a connection lost meanwhile
 * (the database restarted, the session was killed) makes the idle client emit 'error', which
 * would kill the worker unhandled; here it fails this refill's transaction instead (retried).
 */
async function inTransaction<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let lost: Error | undefined;
  const onError = (err: Error) => (lost = err);
  client.on('error', onError);
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    if (lost) throw lost;
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.off('error', onError);
    client.release(lost ?? false);
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
