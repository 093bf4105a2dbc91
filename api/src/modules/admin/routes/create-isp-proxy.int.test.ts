// POST /admin/v1/accounts/:id/isp-proxies: a static proxy in the customer's list with its
// credentials; a generated password, refusals, an unknown account, the token.
import { describe, expect, test } from '@jest/globals';
import { call, useTestApi } from '#test/api.ts';
import { adminClient } from '#test/admin.ts';
import { expectAdminOnly } from '#test/route-auth.ts';

const fx = useTestApi();
const { admin, newAccount } = adminClient(fx);
const proxy = { host: '203.0.113.7', port: 8000, username: 'isp1', country: 'us' };

describe('POST /admin/v1/accounts/:id/isp-proxies', () => {
  test('assigned proxies appear in the customer list with credentials', async () => {
    const account = await newAccount();
    const res = await admin(`/accounts/${account.id}/isp-proxies`, {
      body: { ...proxy, password: 'secret1', country: 'US', city: 'Dallas', isp: 'Example ISP' },
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      host: '203.0.113.7',
      port: 8000,
      country: 'us',
      status: 'active',
      proxy: '203.0.113.7:8000:isp1:secret1',
    });
    const generated = await admin(`/accounts/${account.id}/isp-proxies`, {
      body: {
        host: 'isp.example.com',
        port: 9000,
        username: 'isp2',
        country: 'de',
        expiresAt: '2020-01-01T00:00:00Z',
      },
    });
    expect(generated.body.password).toMatch(/^[A-Za-z0-9]{20}$/);
    const list = await call(fx.api.url, '/api/v1/proxies/list', { key: account.apiKey });
    expect(list.body.proxies).toHaveLength(2);
    expect(list.body.proxies[1]).toMatchObject({
      host: 'isp.example.com',
      status: 'expired',
      expiresAt: '2020-01-01T00:00:00.000Z',
    });
  });
  test('refuses the same host and port twice (409) and a bad port (400)', async () => {
    const account = await newAccount();
    const body = { ...proxy, host: '203.0.113.11' };
    expect((await admin(`/accounts/${account.id}/isp-proxies`, { body })).status).toBe(201);
    expect((await admin(`/accounts/${account.id}/isp-proxies`, { body })).status).toBe(409);
    const bad = await admin(`/accounts/${account.id}/isp-proxies`, {
      body: { ...proxy, host: '203.0.113.8', port: 0 },
    });
    expect(bad).toMatchObject({ status: 400, body: { success: false } });
  });
  test('an unknown account is 404', async () => {
    const res = await admin('/accounts/00000000-0000-4000-8000-000000000000/isp-proxies', { body: proxy });
    expect(res).toMatchObject({ status: 404, body: { error: 'Account not found' } });
  });
  test('only the admin token assigns one', async () => {
    const account = await newAccount();
    await expectAdminOnly(fx, account.apiKey, 'POST', `/accounts/${account.id}/isp-proxies`, proxy);
    expect((await admin(`/accounts/${account.id}/isp-proxies`)).body.proxies).toEqual([]);
  });
});
