// Purchases: the billing room's one way to buy bandwidth (docs/adr/0075). Every purchase is
// purchase_record in SQL (migrations/functions/billing/purchase_record.sql): the purchase, the balance,
// the invoice priced by price_cents, the new-invoice email. Operator purchases bill later
// (settlement 'deferred') and are not limited by the credit limit, but counted in it; auto-refills
// buy through the same function (billing_refill in SQL for bill-later, refills.ts for methods that
// charge first).
import { AppError } from '../errors.ts';
import { SQLSTATE, sqlState, withTransaction, type Pool, type PoolClient } from '../db/pool.ts';
import type { Product } from '../products.ts';
import { recordAudit, type AuditActor } from '../audit/record.ts';

export interface Invoice {
  id: string;
  number: number;
  accountId: string;
  purchaseId: string;
  product: Product;
  bytes: number;
  amountCents: number | null;
  currency: string;
  status: 'issued' | 'paid' | 'void' | 'refunded';
  /** 'deferred': billed later (counted against the credit limit); 'charged': paid when bought. */
  settlement: 'deferred' | 'charged';
  paymentMethod: string;
  issuedAt: Date;
  /** When an operator marked it paid (docs/adr/0101); null until then. */
  paidAt: Date | null;
}

export interface PurchaseInput {
  accountId: string;
  product: Product;
  bytes: number;
  source?: 'admin' | 'auto_refill' | 'customer';
  /** A retried call with the same key returns the first call's invoice and buys nothing more. */
  idempotencyKey?: string;
  /** How it is paid: billed later (default), or charged by `paymentMethod` before this call. */
  settlement?: 'deferred' | 'charged';
  paymentMethod?: string;
  /**
   * Who bought it, for the audit log (purchase.created, once per purchase: a retry under the same
   * idempotency key records nothing more). Auto-refills are recorded by their callers instead
   * (auto_refill.bought).
   */
  actor?: AuditActor;
}

/** Buys bandwidth: purchase, invoice (priced), balance and (if on) the new-invoice email, atomically. */
export async function recordPurchase(pool: Pool, input: PurchaseInput): Promise<Invoice> {
  return withTransaction(pool, (client) => recordPurchaseIn(client, input));
}

/** As recordPurchase, in the caller's transaction. */
export async function recordPurchaseIn(client: PoolClient, input: PurchaseInput): Promise<Invoice> {
  // No account row lock: purchase_record is also called inside a gateway's draw, which holds the
  // balance row lock; the unique idempotency index serialises equal keys.
  const exists = await client.query('SELECT 1 FROM accounts WHERE id = $1', [input.accountId]);
  if (exists.rowCount !== 1) throw new AppError('ACCOUNT_NOT_FOUND');
  try {
    const { rows } = await client.query<InvoiceRow>(
      'SELECT * FROM purchase_record($1, $2, $3, $4, $5, $6, $7)',
      [
        input.accountId,
        input.product,
        input.bytes,
        input.source ?? 'admin',
        input.idempotencyKey ?? null,
        input.settlement ?? 'deferred',
        input.paymentMethod ?? 'invoice',
      ],
    );
    const row = rows[0]!;
    // A retry must be the same purchase: another body under the same key is a client bug.
    if (input.idempotencyKey && (row.product !== input.product || row.bytes !== input.bytes))
      throw new AppError('IDEMPOTENCY_KEY_REUSED');
    const invoice = toInvoice(row);
    if (input.actor) await auditPurchase(client, invoice, input.actor);
    return invoice;
  } catch (err) {
    if (sqlState(err) === SQLSTATE.FOREIGN_KEY_VIOLATION) throw new AppError('ACCOUNT_NOT_FOUND');
    throw err;
  }
}

/**
 * purchase.created, unless this invoice has its entry (a retry under the same idempotency key
 * returned the first call's invoice; a concurrent retry waited on the key's unique index until the
 * first committed, so it sees that entry).
 */
async function auditPurchase(client: PoolClient, invoice: Invoice, actor: AuditActor): Promise<void> {
  const { rowCount } = await client.query(
    `SELECT 1 FROM audit_log WHERE account_id = $1 AND action = 'purchase.created' AND target_type = 'invoice'
        AND target_id = $2`,
    [invoice.accountId, invoice.id],
  );
  if (rowCount) return;
  await recordAudit(client, {
    accountId: invoice.accountId,
    actor,
    action: 'purchase.created',
    target: { type: 'invoice', id: invoice.id },
    details: {
      product: invoice.product,
      bytes: invoice.bytes,
      invoiceNumber: invoice.number,
      amountCents: invoice.amountCents,
      currency: invoice.currency,
      settlement: invoice.settlement,
    },
  });
}

interface InvoiceRow {
  id: string;
  number: number;
  account_id: string;
  purchase_id: string;
  product: Product;
  bytes: number;
  amount_cents: number | null;
  currency: string;
  status: Invoice['status'];
  settlement: Invoice['settlement'];
  payment_method: string;
  issued_at: Date;
  paid_at: Date | null;
}

function toInvoice(row: InvoiceRow): Invoice {
  return {
    id: row.id,
    number: row.number,
    accountId: row.account_id,
    purchaseId: row.purchase_id,
    product: row.product,
    bytes: row.bytes,
    amountCents: row.amount_cents,
    currency: row.currency,
    status: row.status,
    settlement: row.settlement,
    paymentMethod: row.payment_method,
    issuedAt: row.issued_at,
    paidAt: row.paid_at,
  };
}
