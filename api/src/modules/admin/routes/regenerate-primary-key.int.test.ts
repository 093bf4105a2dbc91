// POST /admin/v1/accounts/:id/keys/primary/regenerate: the old key stops at once, an unknown
// account, the token.
import { describe, expect, test } from '@jest/globals';
import { API_KEY_PATTERN } from '#common/secrets.ts';
import { call, useTestApi } from '#test/api.ts';
import { adminClient } from '#test/admin.ts';
import { expectAdminOnly } from '#test/route-auth.ts';

const fx = useTestApi();
const { admin, newAccount } = adminClient(fx);

describe('POST /admin/v1/accounts/:id/keys/primary/regenerate', () => {
  test('regenerating the primary key stops the old one at once', async () => {
    const account = await newAccount();
    const res = await admin(`/accounts/${account.id}/keys/primary/regenerate`, { method: 'POST' });
    expect(res.status).toBe(200);
    expect(res.body.apiKey).toMatch(API_KEY_PATTERN);
    expect(res.headers.get('proxyfleet-cache-sync')).toBe('1/1');
    expect((await call(fx.api.url, '/api/v1/account', { key: account.apiKey })).status).toBe(401);
    expect((await call(fx.api.url, '/api/v1/account', { key: res.body.apiKey })).status).toBe(200);
  });
  test('an unknown account is 404', async () => {
    const res = await admin('/accounts/00000000-0000-4000-8000-000000000000/keys/primary/regenerate', {
      method: 'POST',
    });
    expect(res).toMatchObject({ status: 404, body: { error: 'Account not found' } });
  });
  test('only the admin token regenerates; the key keeps working', async () => {
    const account = await newAccount();
    await expectAdminOnly(fx, account.apiKey, 'POST', `/accounts/${account.id}/keys/primary/regenerate`);
    expect((await call(fx.api.url, '/api/v1/account', { key: account.apiKey })).status).toBe(200);
  });
});
