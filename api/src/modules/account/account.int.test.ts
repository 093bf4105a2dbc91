import { describe, expect, test } from '@jest/globals';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { createNamedKey, revokeKey } from '#common/accounts/keys.ts';
import { recordPurchase } from '#common/billing/purchases.ts';
import { call, useTestApi } from '#test/api.ts';

const fx = useTestApi();

/** Changes made straight in the database reach the cache through the change feed within moments. */
async function eventually(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('condition not met within 2 s');
}

describe('GET /api/v1/account', () => {
  test('the record: identity, balances, settings and keys by name and prefix, never a key', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1e9 });
    const named = await createNamedKey(fx.db.pool, account.id, 'scraper');
    const res = await call(fx.api.url, '/api/v1/account', { key: account.apiKey });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      success: true,
      id: account.id,
      email: account.email,
      status: 'active',
      proxyUsername: account.proxyUsername,
      products: {
        basic: { totalGb: 1, usedGb: 0, remainingGb: 1 },
        light: { totalGb: 0, usedGb: 0, remainingGb: 0 },
      },
      alerts: { lowBandwidth: true, newInvoice: true, serverAlerts: false },
      autoRefill: [],
      namedKeysLimit: 10,
    });
    expect(res.body.apiKeys.map((k: { name: string; kind: string }) => [k.kind, k.name])).toEqual([
      ['primary', 'primary'],
      ['named', 'scraper'],
    ]);
    expect(res.body.apiKeys[1].prefix).toBe(named.prefix);
    const text = JSON.stringify(res.body);
    expect(text).not.toContain(account.apiKey);
    expect(text).not.toContain(named.apiKey);
    expect(text).not.toContain(account.proxyPassword);
  });

  test('changes made elsewhere (keys, purchases) replace the cached record', async () => {
    const account = await accountWithBandwidth(fx.db.pool);
    expect((await call(fx.api.url, '/api/v1/account', { key: account.apiKey })).body.apiKeys).toHaveLength(1);
    const named = await createNamedKey(fx.db.pool, account.id, 'late');
    await eventually(
      async () =>
        (await call(fx.api.url, '/api/v1/account', { key: account.apiKey })).body.apiKeys.length === 2,
    );
    await revokeKey(fx.db.pool, account.id, named.id);
    await eventually(
      async () =>
        (await call(fx.api.url, '/api/v1/account', { key: account.apiKey })).body.apiKeys.length === 1,
    );
    await recordPurchase(fx.db.pool, { accountId: account.id, product: 'mobile', bytes: 2e9 });
    await fx.db.pool.query('DELETE FROM api_usage_snapshots WHERE account_id = $1', [account.id]);
    await eventually(
      async () =>
        (await call(fx.api.url, '/api/v1/account', { key: account.apiKey })).body.products.mobile.totalGb ===
        2,
    );
  });
});
