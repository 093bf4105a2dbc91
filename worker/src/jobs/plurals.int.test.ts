// Counts in the subscription emails agree with their number: a rental of one ISP proxy is
// "1 ISP proxy (US)", not "1 ISP proxies (US)" as the expiry and past-due emails wrote it; an
// expiry after a grace period of one day is "not paid within 1 day" in the audit log.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { paymentMethods, type PaymentMethod } from '#common/billing/payment.ts';
import { renewDue } from '#common/billing/renewals.ts';
import { createSubscription, subscriptionCreateSchema } from '#common/billing/subscriptions.ts';
import { createLogger } from '#common/logger.ts';
import { setBillingClock } from '#test/billing.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { renderExpired } from './render-subscriptions.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

test.each([
  [1, 'Subscription expired: 1 ISP proxy (US)'],
  [2, 'Subscription expired: 2 ISP proxies (US)'],
])('an expired rental of %d: %s', async (proxyCount, subject) => {
  const account = await accountWithBandwidth(db.pool);
  const input = subscriptionCreateSchema.parse({ kind: 'isp_proxy', country: 'us', proxyCount });
  const sub = await createSubscription(db.pool, account.id, input, { kind: 'admin', id: 'test' });
  await db.pool.query(`UPDATE subscriptions SET status = 'expired' WHERE id = $1`, [sub.id]);
  expect(await renderExpired(db.pool, sub.id)).toMatchObject({ subject });
});

test('an expiry after a one-day grace period: "not paid within 1 day"', async () => {
  const declines: PaymentMethod = {
    name: 'card',
    settlement: 'charge',
    charge: () => Promise.resolve({ ok: false as const, reason: 'card declined' }),
  };
  const options = { methods: paymentMethods(declines), graceDays: 1, logger: createLogger('test', 'silent') };
  const account = await accountWithBandwidth(db.pool);
  const input = subscriptionCreateSchema.parse({
    kind: 'bandwidth_plan',
    product: 'basic',
    gbPerPeriod: 1,
    paymentMethod: 'card',
  });
  const sub = await createSubscription(db.pool, account.id, input, { kind: 'admin', id: 'test' });
  try {
    await renewDue(db.pool, options);
    await setBillingClock(db.pool, '2 days');
    await renewDue(db.pool, options);
  } finally {
    await setBillingClock(db.pool, null);
  }
  const { rows } = await db.pool.query<{ details: { reason?: string } }>(
    `SELECT details FROM audit_log WHERE target_id = $1 AND action = 'subscription.expired'`,
    [sub.id],
  );
  expect(rows.map((r) => r.details.reason)).toEqual(['not paid within 1 day']);
});
