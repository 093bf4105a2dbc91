// Settling an invoice (docs/adr/0101): an operator marks a bill-later invoice paid (the money came
// in) or void (it will not be paid; issued in error, written off). Either is final: paid -> void
// and void -> paid are refused, the same request again answers the invoice as it is and records
// nothing more. Voiding takes back the unused part of what the invoice bought (at most its bytes):
// bandwidth is "bought first", and an invoice nobody pays bought nothing. Each change is audited in
// its own transaction (invoice.paid, invoice.voided).
import { AppError } from '../errors.ts';
import { withTransaction, type Pool, type PoolClient } from '../db/pool.ts';
import { lockAccountForAudit, recordAudit, type AuditActor } from '../audit/record.ts';
import { INVOICE_COLUMNS, toInvoiceView, type InvoiceRow, type InvoiceView } from './invoices.ts';

export type Settlement = 'paid' | 'void';

export interface SettledInvoice extends InvoiceView {
  accountId: string;
  /** Bytes voiding took back from the balance (0 when all was used; null unless void). */
  voidedBytes: number | null;
}

interface Row extends InvoiceRow {
  account_id: string;
  voided_bytes: number | null;
}

const select = (where: string, lock = '') =>
  `SELECT ${INVOICE_COLUMNS}, i.account_id, i.voided_bytes
     FROM invoices i LEFT JOIN purchases p ON p.id = i.purchase_id WHERE ${where} ${lock}`;

const view = (r: Row): SettledInvoice => ({
  ...toInvoiceView(r),
  accountId: r.account_id,
  voidedBytes: r.voided_bytes,
});

/** Marks the invoice paid or void; idempotent; INVOICE_NOT_FOUND, INVOICE_SETTLED (the other state). */
export async function settleInvoice(
  pool: Pool,
  invoiceId: string,
  to: Settlement,
  actor: AuditActor,
): Promise<SettledInvoice> {
  const first = await pool.query<{ account_id: string }>('SELECT account_id FROM invoices WHERE id = $1', [
    invoiceId,
  ]);
  const accountId = first.rows[0]?.account_id;
  if (!accountId) throw new AppError('INVOICE_NOT_FOUND');
  return withTransaction(pool, async (client) => {
    // The account row first (the audit entry's lock), then the invoice, then the balance: the
    // order purchases and draws take them in.
    await lockAccountForAudit(client, accountId);
    const { rows } = await client.query<Row>(select('i.id = $1', 'FOR UPDATE OF i'), [invoiceId]);
    const row = rows[0];
    if (!row) throw new AppError('INVOICE_NOT_FOUND');
    if (row.status === to) return view(row);
    if (row.status !== 'issued') throw new AppError('INVOICE_SETTLED', { status: row.status });
    const taken = to === 'void' ? await takeBackInvoice(client, row) : null;
    await client.query(
      to === 'paid'
        ? `UPDATE invoices SET status = 'paid', paid_at = billing_now() WHERE id = $1`
        : `UPDATE invoices SET status = 'void', voided_at = billing_now(), voided_bytes = $2 WHERE id = $1`,
      to === 'paid' ? [invoiceId] : [invoiceId, taken],
    );
    await recordAudit(client, {
      accountId,
      actor,
      action: to === 'paid' ? 'invoice.paid' : 'invoice.voided',
      target: { type: 'invoice', id: invoiceId },
      details: {
        invoiceNumber: row.number,
        amountCents: row.amount_cents,
        currency: row.currency,
        ...(to === 'void' ? { bytesTakenBack: taken } : {}),
      },
    });
    const after = await client.query<Row>(select('i.id = $1'), [invoiceId]);
    return view(after.rows[0]!);
  });
}

/**
 * Lowers the product's bought total by what of this invoice's bytes is still unused (takeBackUnused).
 * An ISP rental's renewal bought no bytes: nothing to take back.
 */
async function takeBackInvoice(client: PoolClient, row: Row): Promise<number> {
  if (row.product === null || !row.bytes) return 0;
  return takeBackUnused(client, row.account_id, row.product, row.bytes);
}

/**
 * Lowers the product's bought total by at most `bytes`, as far as they are unused: remaining
 * (total - used, docs/adr/0073) less what gateways hold in leases, never below 0. Voiding takes
 * back an invoice's bytes, a card refund or dispute the part its money paid for (card-settle.ts).
 * A hot balance's stripes give their free bytes back first (docs/adr/0107: after the balance row,
 * the lock order); what their leases hold stays in striped_bytes.
 */
export async function takeBackUnused(
  client: PoolClient,
  accountId: string,
  product: string,
  bytes: number,
): Promise<number> {
  await client.query('SELECT 1 FROM balances WHERE account_id = $1 AND product = $2 FOR UPDATE', [
    accountId,
    product,
  ]);
  await client.query('SELECT balance_stripes_drain($1, $2)', [accountId, product]);
  const { rows } = await client.query<{ taken: string }>(
    `WITH b AS (
       SELECT account_id, product,
              least($3::bigint, greatest(0, total_bytes - billing_used(used_bytes, reported_used_bytes)
                                               - leased_bytes - striped_bytes)) AS taken
         FROM balances WHERE account_id = $1 AND product = $2 FOR UPDATE)
     UPDATE balances x SET total_bytes = x.total_bytes - b.taken, updated_at = now()
       FROM b WHERE x.account_id = b.account_id AND x.product = b.product
     RETURNING b.taken`,
    [accountId, product, bytes],
  );
  return Number(rows[0]?.taken ?? 0);
}
