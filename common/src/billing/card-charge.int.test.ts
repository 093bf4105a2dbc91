// The card as the charge seam's payment method (auto-refills, renewals): a PaymentIntent off-session
// on the saved card under the caller's key, against stripe-mock behind test/stripe.ts's front.
// Succeeded is charged; 3-D Secure or a decline is a refusal (the caller's failed-payment flow);
// Stripe failing is a retry (the next attempt asks under the same key); no saved card, a refusal.
import { describe, expect, test } from '@jest/globals';
import { useTestDatabase } from '#test/db.ts';
import { billingAccount } from '#test/billing.ts';
import { startFront, useStripe, type StripeFront } from '#test/stripe.ts';
import { withTransaction } from '../db/pool.ts';
import { charge } from './charge.ts';
import { paymentMethods } from './payment.ts';
import { cardMethod, stripeClient } from './stripe.ts';

const stripe = useStripe();
const fx = useTestDatabase();

async function withCard(): Promise<string> {
  const account = await billingAccount(fx.db.pool, 1e9);
  await fx.db.pool.query(
    `INSERT INTO stripe_customers (account_id, customer_id, payment_method_id) VALUES ($1::uuid, 'cus_' || $1::text, 'pm_' || $1::text)`,
    [account],
  );
  return account;
}

function pay(front: StripeFront, accountId: string, key: string) {
  const client = stripeClient({
    PROXYFLEET_STRIPE_SECRET_KEY: 'sk_test_x',
    PROXYFLEET_STRIPE_API_BASE: front.url,
    PROXYFLEET_STRIPE_TIMEOUT_MS: 2000,
  });
  const methods = paymentMethods(cardMethod(fx.db.pool, client!));
  return withTransaction(fx.db.pool, (c) =>
    charge(c, methods, {
      accountId,
      amountCents: 1234,
      currency: 'EUR',
      paymentMethod: 'card',
      idempotencyKey: key,
      product: 'basic',
      bytes: 1e9,
    }),
  );
}

describe('the card through the charge seam', () => {
  test('succeeded: charged, off-session, in the smallest unit, under the caller key', async () => {
    const account = await withCard();
    stripe.front.intentStatus = 'succeeded';
    const before = stripe.front.calls.length;
    expect(await pay(stripe.front, account, `${account}:refill:1`)).toEqual({
      ok: true,
      settlement: 'charged',
    });
    const sent = stripe.front.calls.slice(before).find((c) => c.path === '/v1/payment_intents')!;
    expect(
      Object.fromEntries(['amount', 'currency', 'off_session', 'confirm'].map((k) => [k, sent.form.get(k)])),
    ).toEqual({
      amount: '1234',
      currency: 'eur',
      off_session: 'true',
      confirm: 'true',
    });
    expect(sent.idempotencyKey).toBe(`${account}:refill:1`);
    expect(sent.form.get('metadata[kind]')).toBe('off_session');
  });

  test('3-D Secure asked or declined: refused, not retried', async () => {
    const account = await withCard();
    stripe.front.intentStatus = 'requires_action';
    expect(await pay(stripe.front, account, 'k1')).toEqual({
      ok: false,
      reason: 'the card asks its holder to confirm the payment (3-D Secure)',
    });
    stripe.front.intentStatus = 'requires_payment_method';
    expect(await pay(stripe.front, account, 'k2')).toEqual({
      ok: false,
      reason: 'the card payment is requires payment method',
    });
  });

  test('Stripe answering 500 every time: a retry, every attempt under the one key', async () => {
    const account = await withCard();
    stripe.front.intentStatus = 'succeeded';
    const before = stripe.front.calls.length;
    for (let i = 0; i < 3; i++) stripe.front.faults.push({ prefix: '/v1/payment_intents', fault: '500' });
    expect(await pay(stripe.front, account, 'k3')).toMatchObject({ ok: false, retry: true });
    expect(await pay(stripe.front, account, 'k3')).toEqual({ ok: true, settlement: 'charged' });
    expect(stripe.front.calls.slice(before).map((c) => c.idempotencyKey)).toEqual(Array(4).fill('k3'));
  });

  test('no saved card: refused without asking Stripe', async () => {
    const account = await billingAccount(fx.db.pool, 1e9);
    const front = await startFront(stripe.mock.url);
    try {
      expect(await pay(front, account, 'k4')).toEqual({ ok: false, reason: 'no card is saved' });
      expect(front.calls).toEqual([]);
    } finally {
      await front.close();
    }
  });
});
