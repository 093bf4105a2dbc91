// The billing room's charge entry point (docs/adr/0075): pays an amount for an account with one
// of its payment methods, in the caller's transaction, before the caller records what was bought
// (an auto-refill's purchase today; a subscription's renewal is meant to call it the same way).
// - A bill-later method ("invoice", settlement 'deferred') needs no call out: the amount must fit
//   in the account's credit limit for this month (billing_credit_check, under the account's credit
//   lock, which the caller's transaction keeps until it has recorded its invoice).
// - A method that charges first is called with the caller's idempotency key (a retried charge
//   must not charge twice), with a timeout; an exception or a timeout is 'retry'.
import type { PoolClient } from '../db/pool.ts';
import type { Product } from '../products.ts';
import type { PaymentMethods } from './payment.ts';

/** A charge that takes longer counts as a temporary failure (retried). */
export const CHARGE_TIMEOUT_MS = 30_000;

export interface ChargeInput {
  accountId: string;
  amountCents: number;
  currency: string;
  /** The name stored with the settings (auto_refill_settings.payment_method). */
  paymentMethod: string;
  /** One per thing paid for (an auto-refill's crossing): a retry must not charge twice. */
  idempotencyKey: string;
  /** What is bought, for the payment provider's records. */
  product: Product;
  bytes: number;
}

export type ChargeOutcome =
  | { ok: true; settlement: 'deferred' | 'charged' }
  | { ok: false; reason: string }
  | { ok: false; retry: true; reason: string };

export async function charge(
  client: PoolClient,
  methods: PaymentMethods,
  input: ChargeInput,
): Promise<ChargeOutcome> {
  const method = methods.get(input.paymentMethod);
  if (!method) return { ok: false, reason: `unknown payment method "${input.paymentMethod}"` };
  if (method.settlement === 'deferred') {
    const { rows } = await client.query<{ reason: string | null }>(
      'SELECT billing_credit_check($1, $2) AS reason',
      [input.accountId, input.amountCents],
    );
    const reason = rows[0]?.reason;
    return reason ? { ok: false, reason } : { ok: true, settlement: 'deferred' };
  }
  try {
    const result = await withTimeout(
      method.charge({
        accountId: input.accountId,
        product: input.product,
        bytes: input.bytes,
        amountCents: input.amountCents,
        currency: input.currency,
        idempotencyKey: input.idempotencyKey,
      }),
      CHARGE_TIMEOUT_MS,
    );
    return result.ok ? { ok: true, settlement: 'charged' } : result;
  } catch (err) {
    return { ok: false, retry: true, reason: err instanceof Error ? err.message : String(err) };
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
