// Auto-refills paid by a method that charges first (docs/adr/0073): SQL records the crossing's
// refill as 'pending' (billing_refill), because no payment provider is called under a balance row
// lock in a gateway's draw; the worker pays it here. The refill row stays locked while the method
// answers, then the purchase is recorded in the same transaction, so a worker killed mid-refill
// leaves the row pending; the retry charges with the same idempotency key (one per crossing) and
// purchase_record cannot buy twice for it.
import type { Logger } from '../logger.ts';
import type { Pool, PoolClient } from '../db/pool.ts';
import type { Product } from '../products.ts';
import { charge } from './charge.ts';
import type { PaymentMethods } from './payment.ts';
import { recordPurchaseIn } from './purchases.ts';
import { recordAudit, type AuditActor } from '../audit/record.ts';

/** The audit log's actor of every auto-refill, bought in SQL (billing_refill) or here. */
const AUTO_REFILL: AuditActor = { kind: 'system', id: 'auto-refill' };

/** Temporary charge failures (exceptions, timeouts) before the refill is marked failed. */
export const CHARGE_MAX_ATTEMPTS = 5;
const CHARGE_RETRY_BASE_MS = 5_000;

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

/** Pays one due pending refill; false when none was due. */
export async function payPendingRefill(
  pool: Pool,
  methods: PaymentMethods,
  logger: Logger,
): Promise<boolean> {
  return inTransaction(pool, async (client) => {
    const { rows } = await client.query<PendingRefill>(
      `SELECT r.id, r.account_id, r.product, r.idempotency_key, r.bytes, r.payment_method, r.attempts, p.cents, p.currency
         FROM auto_refills r CROSS JOIN LATERAL price_cents(r.product, r.bytes) p
        WHERE r.status = 'pending' AND r.next_attempt_at <= now()
        ORDER BY r.next_attempt_at, r.id LIMIT 1 FOR UPDATE OF r SKIP LOCKED`,
    );
    const refill = rows[0];
    if (!refill) return false;
    const outcome = await charge(client, methods, {
      accountId: refill.account_id,
      amountCents: refill.cents,
      currency: refill.currency,
      paymentMethod: refill.payment_method,
      idempotencyKey: `${refill.account_id}:${refill.idempotency_key}`,
      product: refill.product,
      bytes: refill.bytes,
    });
    const retry = !outcome.ok && 'retry' in outcome;
    if (retry && refill.attempts + 1 < CHARGE_MAX_ATTEMPTS) {
      logger.warn({ refill: refill.id, err: outcome.reason }, 'auto-refill charge failed; will retry');
      await client.query(
        `UPDATE auto_refills SET attempts = attempts + 1, next_attempt_at = now() + make_interval(secs => $2::double precision / 1000)
          WHERE id = $1`,
        [refill.id, CHARGE_RETRY_BASE_MS * 2 ** refill.attempts],
      );
      return true;
    }
    if (outcome.ok) {
      const invoice = await recordPurchaseIn(client, {
        accountId: refill.account_id,
        product: refill.product,
        bytes: refill.bytes,
        source: 'auto_refill',
        idempotencyKey: refill.idempotency_key,
        settlement: outcome.settlement,
        paymentMethod: refill.payment_method,
      });
      await client.query(
        `UPDATE auto_refills SET status = 'succeeded', purchase_id = $2, attempts = attempts + 1, decided_at = billing_now()
          WHERE id = $1`,
        [refill.id, invoice.purchaseId],
      );
      await recordAudit(client, {
        accountId: refill.account_id,
        actor: AUTO_REFILL,
        action: 'auto_refill.bought',
        target: { type: 'invoice', id: invoice.id },
        details: {
          product: refill.product,
          bytes: refill.bytes,
          invoiceNumber: invoice.number,
          amountCents: invoice.amountCents,
          currency: invoice.currency,
          paymentMethod: refill.payment_method,
        },
      });
      logger.info({ refill: refill.id, invoice: invoice.number }, 'auto-refill paid and bought');
      return true;
    }
    const reason = retry ? 'the payment method did not answer' : outcome.reason;
    await client.query(
      `UPDATE auto_refills SET status = 'failed', error = $2, attempts = attempts + 1, decided_at = billing_now() WHERE id = $1`,
      [refill.id, reason.slice(0, 500)],
    );
    await client.query(
      `SELECT email_enqueue($1, 'auto_refill_failed', $2, jsonb_build_object('refillId', $2::text))`,
      [refill.account_id, refill.id],
    );
    await recordAudit(client, {
      accountId: refill.account_id,
      actor: AUTO_REFILL,
      action: 'auto_refill.failed',
      target: { type: 'auto_refill', id: refill.id },
      details: { product: refill.product, bytes: refill.bytes, paymentMethod: refill.payment_method, reason },
    });
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
