// POST /admin/v1/accounts/:id/proxy-password/reset: a new password, the same username; an unknown
// account, the token.
import { describe, expect, test } from '@jest/globals';
import { useTestApi } from '#test/api.ts';
import { adminClient } from '#test/admin.ts';
import { expectAdminOnly } from '#test/route-auth.ts';

const fx = useTestApi();
const { admin, newAccount } = adminClient(fx);
const path = (id: string) => `/accounts/${id}/proxy-password/reset`;

describe('POST /admin/v1/accounts/:id/proxy-password/reset', () => {
  test('resetting the proxy password changes generated proxies', async () => {
    const account = await newAccount();
    const res = await admin(path(account.id), { method: 'POST' });
    expect(res.body).toEqual({
      proxyUsername: account.proxyUsername,
      proxyPassword: expect.stringMatching(/^[A-Za-z0-9]+$/),
    });
    expect(res.body.proxyPassword).not.toBe(account.proxyPassword);
    expect(res.headers.get('proxyfleet-cache-sync')).toBe('1/1');
  });
  test('an unknown account is 404', async () => {
    const res = await admin(path('00000000-0000-4000-8000-000000000000'), { method: 'POST' });
    expect(res).toMatchObject({ status: 404, body: { error: 'Account not found' } });
  });
  test('only the admin token resets it', async () => {
    const account = await newAccount();
    const sealed = async () =>
      (
        await fx.db.pool.query('SELECT password_enc FROM proxy_credentials WHERE account_id = $1', [
          account.id,
        ])
      ).rows;
    const before = await sealed();
    await expectAdminOnly(fx, account.apiKey, 'POST', path(account.id));
    expect(await sealed()).toEqual(before);
  });
});
