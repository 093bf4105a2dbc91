// Counts in the subscription emails agree with their number: a rental of one ISP proxy is
// "1 ISP proxy (US)", not "1 ISP proxies (US)" as the expiry and past-due emails wrote it.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { createSubscription, subscriptionCreateSchema } from '#common/billing/subscriptions.ts';
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
