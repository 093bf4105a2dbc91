// A customer's billing details (the Billing page's form; the invoice PDF's "Bill to"): company,
// address and VAT id, each optional. Changes are audited (billing_details.changed).
import { z } from 'zod';
import type { Pool } from '#common/db/pool.ts';
import { withTransaction } from '#common/db/pool.ts';
import { lockAccountForAudit, recordAudit, type AuditActor } from '#common/audit/record.ts';

/** Text a person typed: no control characters but line breaks in the address. */
const typed = (max: number, multiline = false) =>
  z
    .string()
    .trim()
    .max(max)
    .refine(
      (v) =>
        !(multiline ? /[\u0000-\u0009\u000b\u000c\u000e-\u001f\u007f]/ : /[\u0000-\u001f\u007f]/).test(v),
      'must not contain control characters',
    )
    // A lone surrogate cannot be stored (PostgreSQL refuses it in the audit entry's JSON: a 500).
    .refine((v) => !/\p{Cs}/u.test(v), 'must be well-formed text');

export const billingDetailsSchema = z.strictObject({
  company: typed(200),
  address: typed(1000, true),
  vatId: typed(50).refine(
    (v) => v === '' || /^[A-Za-z0-9 .-]+$/.test(v),
    'must be letters, digits, spaces, dots or dashes',
  ),
});
export type BillingDetails = z.infer<typeof billingDetailsSchema>;

export const NO_DETAILS: BillingDetails = { company: '', address: '', vatId: '' };

export async function readBillingDetails(pool: Pool, accountId: string): Promise<BillingDetails> {
  const { rows } = await pool.query<{ company: string; address: string; vat_id: string }>(
    'SELECT company, address, vat_id FROM account_billing_details WHERE account_id = $1',
    [accountId],
  );
  const r = rows[0];
  return r ? { company: r.company, address: r.address, vatId: r.vat_id } : NO_DETAILS;
}

export async function saveBillingDetails(
  pool: Pool,
  accountId: string,
  details: BillingDetails,
  actor: AuditActor,
): Promise<void> {
  await withTransaction(pool, async (client) => {
    await lockAccountForAudit(client, accountId);
    await client.query(
      `INSERT INTO account_billing_details (account_id, company, address, vat_id) VALUES ($1, $2, $3, $4)
       ON CONFLICT (account_id) DO UPDATE SET company = $2, address = $3, vat_id = $4, updated_at = now()`,
      // One line break, whatever the browser sent (a textarea posts CRLF).
      [accountId, details.company, details.address.replace(/\r\n?/g, '\n'), details.vatId],
    );
    await recordAudit(client, {
      accountId,
      actor,
      action: 'billing_details.changed',
      details: { company: details.company, vatId: details.vatId },
    });
  });
}
