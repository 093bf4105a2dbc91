// DELETE /admin/v1/accounts/:id/isp-proxies/:proxyId: gone from the lists; not another account's
// proxy, not without the token.
import { describe, expect, test } from '@jest/globals';
import { call, useTestApi } from '#test/api.ts';
import { adminClient, type AdminAccount } from '#test/admin.ts';
import { expectAdminOnly } from '#test/route-auth.ts';

const fx = useTestApi();
const { admin, newAccount } = adminClient(fx);
const assign = async (account: AdminAccount, port = 8000) =>
  (
    await admin(`/accounts/${account.id}/isp-proxies`, {
      body: { host: '203.0.113.10', port, username: 'isp1', country: 'us' },
    })
  ).body.id as string;

describe('DELETE /admin/v1/accounts/:id/isp-proxies/:proxyId', () => {
  test('removes the proxy from both lists; a second removal is 404', async () => {
    const account = await newAccount();
    const kept = await assign(account, 8001);
    const id = await assign(account);
    expect((await admin(`/accounts/${account.id}/isp-proxies/${id}`, { method: 'DELETE' })).status).toBe(204);
    expect(await admin(`/accounts/${account.id}/isp-proxies/${id}`, { method: 'DELETE' })).toMatchObject({
      status: 404,
      body: { error: 'ISP proxy not found' },
    });
    const listed = (await admin(`/accounts/${account.id}/isp-proxies`)).body.proxies;
    expect(listed.map((p: { id: string }) => p.id)).toEqual([kept]);
    const customer = await call(fx.api.url, '/api/v1/proxies/list', { key: account.apiKey });
    expect(customer.body.proxies).toHaveLength(1);
  });
  test("another account's proxy is not removed through this one", async () => {
    const a = await newAccount();
    const b = await newAccount();
    const id = await assign(b, 8002);
    expect((await admin(`/accounts/${a.id}/isp-proxies/${id}`, { method: 'DELETE' })).status).toBe(404);
    expect((await admin(`/accounts/${b.id}/isp-proxies`)).body.proxies).toHaveLength(1);
  });
  test('only the admin token removes one', async () => {
    const account = await newAccount();
    const id = await assign(account, 8003);
    await expectAdminOnly(fx, account.apiKey, 'DELETE', `/accounts/${account.id}/isp-proxies/${id}`);
    expect((await admin(`/accounts/${account.id}/isp-proxies`)).body.proxies).toHaveLength(1);
  });
});
