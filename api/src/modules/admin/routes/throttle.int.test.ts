// PUT /admin/v1/accounts/:id/throttle/:product: an account's bandwidth cap per product
// (docs/adr/0035), shown to the operator and, read-only, to the customer in the account view.
import { describe, expect, test } from '@jest/globals';
import { call, useTestApi } from '#test/api.ts';
import { adminClient } from '#test/admin.ts';
import { expectAdminOnly } from '#test/route-auth.ts';

const fx = useTestApi();
const { admin, newAccount } = adminClient(fx);

const put = (id: string, product: string, body: unknown) =>
  admin(`/accounts/${id}/throttle/${product}`, { method: 'PUT', body });

describe('PUT /admin/v1/accounts/:id/throttle/:product', () => {
  test('sets, changes and removes a cap, shown in both account views', async () => {
    const account = await newAccount();
    const customer = async () =>
      (await call(fx.api.url, '/api/v1/account', { key: account.apiKey })).body.throttles as unknown;
    expect(await customer()).toEqual([]);

    const set = await put(account.id, 'basic', { bytesPerSecond: 524_288 });
    expect(set).toMatchObject({ status: 200, body: { product: 'basic', bytesPerSecond: 524_288 } });
    expect(set.headers.get('proxyfleet-cache-sync')).toBe('1/1');
    await put(account.id, 'mobile', { bytesPerSecond: 10_000_000_000 });
    await put(account.id, 'basic', { bytesPerSecond: 1_048_576 });
    const both = [
      { product: 'basic', bytesPerSecond: 1_048_576 },
      { product: 'mobile', bytesPerSecond: 10_000_000_000 },
    ];
    expect(await customer()).toEqual(both);
    expect((await admin(`/accounts/${account.id}`)).body.throttles).toEqual(both);

    expect(await put(account.id, 'basic', { bytesPerSecond: null })).toMatchObject({
      status: 200,
      body: { product: 'basic', bytesPerSecond: null },
    });
    expect((await put(account.id, 'basic', { bytesPerSecond: null })).status).toBe(200);
    expect(await customer()).toEqual([{ product: 'mobile', bytesPerSecond: 10_000_000_000 }]);
  });

  test.each([
    [{ bytesPerSecond: 65_535 }, 'bytesPerSecond: must be at least 65536'],
    [{ bytesPerSecond: 10_000_000_001 }, 'bytesPerSecond: must be at most 10000000000'],
    [{ bytesPerSecond: 100_000.5 }, 'bytesPerSecond'],
    [{ bytesPerSecond: '1MB' }, 'bytesPerSecond'],
    [{}, 'bytesPerSecond'],
    [{ bytesPerSecond: 100_000, burst: 1 }, 'burst: unknown field'],
  ])('refuses %j with a clear error', async (body, message) => {
    const account = await newAccount();
    const res = await put(account.id, 'basic', body);
    expect(res.status).toBe(400);
    expect(res.body.success).toBe(false);
    expect(res.body.error).toContain(message);
    expect((await admin(`/accounts/${account.id}`)).body.throttles).toEqual([]);
  });

  test('answers 404 for an unknown account and refuses an unknown product', async () => {
    const missing = await put('00000000-0000-4000-8000-000000000000', 'basic', { bytesPerSecond: 100_000 });
    expect(missing).toMatchObject({ status: 404, body: { error: 'Account not found' } });
    const account = await newAccount();
    expect((await put(account.id, 'premium', { bytesPerSecond: 100_000 })).status).toBe(400);
  });
  test('only the admin token sets a cap', async () => {
    const account = await newAccount();
    const body = { bytesPerSecond: 100_000 };
    await expectAdminOnly(fx, account.apiKey, 'PUT', `/accounts/${account.id}/throttle/basic`, body);
    expect((await admin(`/accounts/${account.id}`)).body.throttles).toEqual([]);
  });
});
