// GET /admin/v1/accounts/:id/isp-proxies: the account's proxies only, an unknown account, the token.
import { describe, expect, test } from '@jest/globals';
import { useTestApi } from '#test/api.ts';
import { adminClient } from '#test/admin.ts';
import { expectAdminOnly } from '#test/route-auth.ts';

const fx = useTestApi();
const { admin, newAccount } = adminClient(fx);

describe('GET /admin/v1/accounts/:id/isp-proxies', () => {
  test("lists the account's proxies, as the customer sees them, and no other account's", async () => {
    const a = await newAccount();
    const b = await newAccount();
    const body = { host: '203.0.113.9', port: 8000, username: 'isp1', password: 'secret1', country: 'us' };
    const made = await admin(`/accounts/${a.id}/isp-proxies`, { body });
    await admin(`/accounts/${b.id}/isp-proxies`, { body: { ...body, port: 8001 } });
    const res = await admin(`/accounts/${a.id}/isp-proxies`);
    expect(res).toMatchObject({ status: 200, body: { proxies: [made.body] } });
  });
  test('an unknown or malformed account is 404', async () => {
    for (const id of ['00000000-0000-4000-8000-000000000000', 'nope']) {
      expect(await admin(`/accounts/${id}/isp-proxies`)).toMatchObject({
        status: 404,
        body: { error: 'Account not found' },
      });
    }
  });
  test('only the admin token lists them', async () => {
    const account = await newAccount();
    await expectAdminOnly(fx, account.apiKey, 'GET', `/accounts/${account.id}/isp-proxies`);
  });
});
