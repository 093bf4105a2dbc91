// Payment methods for auto-refill (docs/adr/0040-auto-refill-in-the-draw.md). The refill is
// decided in SQL, in the transaction of a gateway's draw (billing_check, billing_refill). A
// method that bills later ("invoice", built in) needs no call out, so SQL buys at once there: the
// invoice it issues is the bill. A method that must charge before the bandwidth is granted
// cannot run inside a draw; SQL records the refill as 'pending' and the worker calls charge()
// with the refill's idempotency key (one per crossing), then buys, or marks it failed and emails.
import type { Product } from '../products.ts';

export interface ChargeRequest {
  accountId: string;
  product: Product;
  bytes: number;
  amountCents: number;
  currency: string;
  /** One per threshold crossing: a retried charge must not charge twice. */
  idempotencyKey: string;
}

export type ChargeResult = { ok: true } | { ok: false; reason: string };

export interface PaymentMethod {
  /** The name stored in auto_refill_settings.payment_method ([a-z][a-z0-9_-]*). */
  readonly name: string;
  /**
   * 'deferred': bills later, never fails at refill time; SQL buys inside the draw.
   * 'charge': must succeed first; the worker calls charge().
   */
  readonly settlement: 'deferred' | 'charge';
  charge(request: ChargeRequest): Promise<ChargeResult>;
}

/** Built in: the refill is billed by its invoice (status 'issued'), paid later. */
export const invoiceMethod: PaymentMethod = {
  name: 'invoice',
  settlement: 'deferred',
  charge: () => Promise.resolve({ ok: true }),
};

export type PaymentMethods = ReadonlyMap<string, PaymentMethod>;

export function paymentMethods(...extra: PaymentMethod[]): PaymentMethods {
  return new Map([invoiceMethod, ...extra].map((m) => [m.name, m]));
}
