// PUT /admin/v1/accounts/:id/auto-refill/:product: the customer's settings, set by the operator;
// refusals, an unknown account, the token.
import { describe, expect, test } from '@jest/globals';
import { call, useTestApi } from '#test/api.ts';
import { adminClient } from '#test/admin.ts';
import { expectAdminOnly } from '#test/route-auth.ts';

const fx = useTestApi();
const { admin, newAccount } = adminClient(fx);
const customerRefill = async (apiKey: string) =>
  (await call(fx.api.url, '/api/v1/account', { key: apiKey })).body.autoRefill;
const settings = { enabled: true, thresholdGb: 0.5, refillGb: 5 };

describe('PUT /admin/v1/accounts/:id/auto-refill/:product', () => {
  test('the settings show in the account record at once', async () => {
    const account = await newAccount();
    const refill = await admin(`/accounts/${account.id}/auto-refill/basic`, {
      method: 'PUT',
      body: settings,
    });
    expect(refill).toMatchObject({ status: 200, body: { product: 'basic', ...settings } });
    expect(refill.headers.get('proxyfleet-cache-sync')).toBe('1/1');
    expect(await customerRefill(account.apiKey)).toEqual([
      { product: 'basic', enabled: true, thresholdGb: 0.5, refillGb: 5, maxRefillsPerMonth: 5 },
    ]);
  });
  test('refuses an unknown product and a bad body with 400', async () => {
    const account = await newAccount();
    const path = `/accounts/${account.id}/auto-refill`;
    expect((await admin(`${path}/gold`, { method: 'PUT', body: settings })).status).toBe(400);
    const bad = await admin(`${path}/basic`, { method: 'PUT', body: { ...settings, refillGb: -1 } });
    expect(bad).toMatchObject({ status: 400, body: { success: false } });
    expect(bad.body.error).toContain('refillGb');
    expect(await customerRefill(account.apiKey)).toEqual([]);
  });
  test('an unknown account is 404', async () => {
    const res = await admin('/accounts/00000000-0000-4000-8000-000000000000/auto-refill/basic', {
      method: 'PUT',
      body: settings,
    });
    expect(res).toMatchObject({ status: 404, body: { error: 'Account not found' } });
  });
  test('only the admin token changes them', async () => {
    const account = await newAccount();
    await expectAdminOnly(fx, account.apiKey, 'PUT', `/accounts/${account.id}/auto-refill/basic`, settings);
    expect(await customerRefill(account.apiKey)).toEqual([]);
  });
});
