// Test data built through the same domain operations the admin API uses.
import { randomBytes, randomUUID } from 'node:crypto';
import { createAccount, type NewAccount } from '#common/accounts/accounts.ts';
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
