// POST /admin/v1/accounts/:id/suspend and /reactivate: every key refused until reactivated, an
// unknown account, the token.
import { describe, expect, test } from '@jest/globals';
import { call, useTestApi } from '#test/api.ts';
import { adminClient } from '#test/admin.ts';
import { expectAdminOnly } from '#test/route-auth.ts';

const fx = useTestApi();
const { admin, newAccount } = adminClient(fx);

describe('POST /admin/v1/accounts/:id/suspend and /reactivate', () => {
  test('a suspended account is refused with 401 until reactivated', async () => {
    const account = await newAccount();
    expect((await call(fx.api.url, '/api/v1/usage', { key: account.apiKey })).status).toBe(200);
    const suspended = await admin(`/accounts/${account.id}/suspend`, { method: 'POST' });
    expect(suspended).toMatchObject({ status: 200, body: { id: account.id, status: 'suspended' } });
    expect(suspended.headers.get('proxyfleet-cache-sync')).toBe('1/1');
    expect((await call(fx.api.url, '/api/v1/usage', { key: account.apiKey })).status).toBe(401);
    expect(await admin(`/accounts/${account.id}/reactivate`, { method: 'POST' })).toMatchObject({
      status: 200,
      body: { status: 'active' },
    });
    expect((await call(fx.api.url, '/api/v1/usage', { key: account.apiKey })).status).toBe(200);
  });
  test.each(['suspend', 'reactivate'])('%s: an unknown or malformed account is 404', async (action) => {
    for (const id of ['00000000-0000-4000-8000-000000000000', 'nope']) {
      expect(await admin(`/accounts/${id}/${action}`, { method: 'POST' })).toMatchObject({
        status: 404,
        body: { error: 'Account not found' },
      });
    }
  });
  test('only the admin token suspends or reactivates', async () => {
    const account = await newAccount();
    await expectAdminOnly(fx, account.apiKey, 'POST', `/accounts/${account.id}/suspend`);
    expect((await call(fx.api.url, '/api/v1/usage', { key: account.apiKey })).status).toBe(200);
    await admin(`/accounts/${account.id}/suspend`, { method: 'POST' });
    await expectAdminOnly(fx, account.apiKey, 'POST', `/accounts/${account.id}/reactivate`);
    expect((await admin(`/accounts/${account.id}`)).body.status).toBe('suspended');
  });
});
