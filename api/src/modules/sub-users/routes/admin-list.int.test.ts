// GET /admin/v1/accounts/:id/sub-users: an account's sub-users for the operator; an unknown
// account, the token.
import { describe, expect, test } from '@jest/globals';
import { accountWithBandwidth, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { call, useTestApi } from '#test/api.ts';
import { expectAdminOnly } from '#test/route-auth.ts';
import { subUserClient } from '#test/sub-users.ts';

const fx = useTestApi();
const { create } = subUserClient(fx);
const admin = { admin: TEST_ADMIN_TOKEN };

describe('GET /admin/v1/accounts/:id/sub-users', () => {
  test("lists the account's sub-users, and no other account's", async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const b = await accountWithBandwidth(fx.db.pool);
    const made = await create(a.apiKey, { name: 'ops' });
    await create(b.apiKey, { name: 'other' });
    const res = await call(fx.api.url, `/admin/v1/accounts/${a.id}/sub-users`, admin);
    // The customer's answer says success: true (docs/adr/0012); the operator's list holds bare resources.
    const { success, ...subUser } = made.body as { success: boolean };
    expect(success).toBe(true);
    expect(res).toMatchObject({
      status: 200,
      body: { subUsers: [subUser], limit: expect.any(Number) },
    });
  });
  test('an unknown or malformed account is 404', async () => {
    for (const id of ['00000000-0000-4000-8000-000000000000', 'nope']) {
      expect(await call(fx.api.url, `/admin/v1/accounts/${id}/sub-users`, admin)).toMatchObject({
        status: 404,
        body: { error: 'Account not found' },
      });
    }
  });
  test('only the admin token lists them', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    await expectAdminOnly(fx, a.apiKey, 'GET', `/accounts/${a.id}/sub-users`);
  });
});
