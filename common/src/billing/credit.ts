// The credit limit for bill-later payment (docs/api.md "Credit limit", docs/adr/0075): per
// account and calendar month (UTC), in the price table's currency. Bill-later invoices of the
// month (operator purchases and auto-refills paid by "invoice") add up against it: an auto-refill
// that would pass it is not bought (billing_refill in SQL: the "auto-refill failed" email, and
// traffic stops as without auto-refill); operator purchases are not limited, only counted.
// The default comes from PROXYFLEET_CREDIT_LIMIT (the worker writes it to the database at start, as
// it writes the prices); an operator sets an account's own limit.
import { z } from 'zod';
import { AppError } from '../errors.ts';
import { SQLSTATE, sqlState, withTransaction, type Pool, type PoolClient } from '../db/pool.ts';
import { lockAccountForAudit, recordAudit, type AuditActor } from '../audit/record.ts';

/** A typo guard, not a business rule: 1,000,000,000.00 in any currency. */
export const MAX_CREDIT_LIMIT = 1_000_000_000;
export const DEFAULT_CREDIT_LIMIT = '1000.00';

/** An amount in currency units, 0 to MAX_CREDIT_LIMIT, at most two decimals. */
const amount = z
  .number()
  .min(0)
  .max(MAX_CREDIT_LIMIT)
  .refine((v) => Math.abs(Math.round(v * 100) - v * 100) < 1e-6, 'must have at most two decimals');

/** PROXYFLEET_CREDIT_LIMIT: "1000.00" (the default) -> 100000 cents. */
export const creditLimitEnv = z
  .string()
  .default(DEFAULT_CREDIT_LIMIT)
  .refine((text) => /^\d+(\.\d{1,2})?$/.test(text.trim()), 'must be an amount such as 1000.00')
  .transform(Number)
  .pipe(amount)
  .transform(toCents);

export const creditLimitUpdateSchema = z.strictObject({
  limit: amount
    .nullable()
    .describe(
      "The account's limit per calendar month, in the price table's currency; null: back to the default",
    ),
});
export type CreditLimitUpdate = z.infer<typeof creditLimitUpdateSchema>;

export function toCents(amount: number): number {
  return Math.round(amount * 100);
}

export const creditSchema = z.object({
  limit: z
    .number()
    .describe("Bill-later amount allowed per calendar month (UTC), in the price table's currency"),
  usedThisMonth: z
    .number()
    .describe('Bill-later invoices issued this month (operator purchases and auto-refills)'),
  available: z.number().describe('limit - usedThisMonth, never negative'),
  currency: z.string(),
  default: z
    .boolean()
    .describe("true: the operator's default limit (PROXYFLEET_CREDIT_LIMIT); false: the account's own"),
  month: z.string().describe('The calendar month (UTC) counted, YYYY-MM'),
});
export type Credit = z.infer<typeof creditSchema>;

type Queryable = Pool | PoolClient;

export async function readCredit(db: Queryable, accountId: string): Promise<Credit> {
  const { rows } = await db.query<{
    limit_cents: number;
    used_cents: number;
    currency: string;
    own_limit: boolean;
    month: string;
  }>(
    `SELECT c.limit_cents, c.used_cents, c.currency, c.own_limit,
            to_char(billing_month_start(billing_now()) AT TIME ZONE 'UTC', 'YYYY-MM') AS month
       FROM credit_status($1) c`,
    [accountId],
  );
  const r = rows[0]!;
  return {
    limit: r.limit_cents / 100,
    usedThisMonth: r.used_cents / 100,
    available: Math.max(0, r.limit_cents - r.used_cents) / 100,
    currency: r.currency,
    default: !r.own_limit,
    month: r.month,
  };
}

/**
 * Sets an account's own limit (cents), or returns it to the default (null). Pass the transaction
 * of the change: the audit log's entry for it belongs in the same one (docs/adr/0075). With a
 * pool and an actor, the change and its entry (credit_limit.updated) are one transaction here.
 */
export async function setCreditLimit(
  db: Queryable,
  accountId: string,
  limitCents: number | null,
  actor?: AuditActor,
): Promise<Credit> {
  if (actor && !('release' in db))
    return withTransaction(db, async (client) => {
      if (!(await lockAccountForAudit(client, accountId))) throw new AppError('ACCOUNT_NOT_FOUND');
      return setCreditLimit(client, accountId, limitCents, actor);
    });
  const before = actor ? await readCredit(db, accountId) : undefined;
  if (limitCents === null) {
    await db.query('DELETE FROM account_credit_limits WHERE account_id = $1', [accountId]);
  } else {
    try {
      await db.query(
        `INSERT INTO account_credit_limits (account_id, limit_cents) VALUES ($1, $2)
         ON CONFLICT (account_id) DO UPDATE SET limit_cents = EXCLUDED.limit_cents, updated_at = now()`,
        [accountId, limitCents],
      );
    } catch (err) {
      if (sqlState(err) === SQLSTATE.FOREIGN_KEY_VIOLATION) throw new AppError('ACCOUNT_NOT_FOUND');
      throw err;
    }
  }
  const credit = await readCredit(db, accountId);
  // Only a change is audited: the same limit again, or the default when it is already the default, is not.
  const unchanged = before && before.default === credit.default && before.limit === credit.limit;
  if (actor && !unchanged)
    await recordAudit(db, {
      accountId,
      actor,
      action: 'credit_limit.updated',
      target: { type: 'account', id: accountId },
      details: { limit: credit.default ? null : credit.limit, currency: credit.currency },
    });
  return credit;
}

/** The worker writes the configured default at start (credit_status reads it). */
export async function syncCreditDefault(pool: Pool, cents: number): Promise<void> {
  await pool.query(
    `UPDATE billing_settings SET credit_limit_cents = $1, updated_at = now() WHERE credit_limit_cents <> $1`,
    [cents],
  );
}
