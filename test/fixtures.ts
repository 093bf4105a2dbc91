// Test data built through the same domain operations the admin API uses.
import { randomBytes, randomUUID } from 'node:crypto';
import { createAccount, type NewAccount } from '#common/accounts/accounts.ts';
import { putAutoRefill, type AutoRefillUpdate } from '#common/billing/auto-refill.ts';
import { recordPurchase } from '#common/billing/purchases.ts';
import type { Pool } from '#common/db/pool.ts';
import type { Product } from '#common/products.ts';

/** A fixed key for tests: proxy passwords sealed with it can be read back by the test. */
export const TEST_CREDENTIALS_KEY = Buffer.alloc(32, 7);
export const TEST_ADMIN_TOKEN = 'test-admin-token-' + randomBytes(12).toString('hex');

export const exampleEmail = (label = 'user') => `${label}-${randomUUID().slice(0, 8)}@example.test`;

/** An account with `bytes` of bandwidth bought for each listed product. */
export async function accountWithBandwidth(
  pool: Pool,
  purchases: Partial<Record<Product, number>> = {},
): Promise<NewAccount> {
  const account = await createAccount(pool, { email: exampleEmail() }, TEST_CREDENTIALS_KEY);
  for (const [product, bytes] of Object.entries(purchases)) {
    await recordPurchase(pool, { accountId: account.id, product: product as Product, bytes });
  }
  return account;
}

/** Basic auto-refill switched on for an account with these settings (docs/api.md "Auto-refill"). */
export async function enableAutoRefill(
  pool: Pool,
  accountId: string,
  settings: Omit<AutoRefillUpdate, 'enabled'>,
): Promise<void> {
  await putAutoRefill(pool, accountId, 'basic', { enabled: true, ...settings });
}

/** An account with `bytes` of basic bandwidth bought and basic auto-refill on with `settings`. */
export async function accountWithAutoRefill(
  pool: Pool,
  bytes: number,
  settings: Omit<AutoRefillUpdate, 'enabled'>,
): Promise<NewAccount> {
  const account = await accountWithBandwidth(pool, { basic: bytes });
  await enableAutoRefill(pool, account.id, settings);
  return account;
}
