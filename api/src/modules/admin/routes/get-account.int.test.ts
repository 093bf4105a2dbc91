// GET /admin/v1/accounts/:id: the account's record without its keys, an unknown account, the token.
import { describe, expect, test } from '@jest/globals';
import { useTestApi } from '#test/api.ts';
import { adminClient } from '#test/admin.ts';
import { expectAdminOnly } from '#test/route-auth.ts';

const fx = useTestApi();
const { admin, newAccount } = adminClient(fx);

describe('GET /admin/v1/accounts/:id', () => {
  test('shows the record without keys', async () => {
    const account = await newAccount();
    const res = await admin(`/accounts/${account.id}`);
    expect(res.body).toMatchObject({ id: account.id, email: account.email, status: 'active' });
    expect(JSON.stringify(res.body)).not.toContain(account.apiKey);
  });
  test('an unknown or malformed id is 404', async () => {
    for (const id of ['00000000-0000-4000-8000-000000000000', 'nope']) {
      expect(await admin(`/accounts/${id}`)).toMatchObject({
        status: 404,
        body: { success: false, error: 'Account not found' },
      });
    }
  });
  test('only the admin token reads it', async () => {
    const account = await newAccount();
    await expectAdminOnly(fx, account.apiKey, 'GET', `/accounts/${account.id}`);
  });
});
