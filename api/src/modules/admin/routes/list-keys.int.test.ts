// GET /admin/v1/accounts/:id/keys: the account's keys without the keys themselves, an unknown
// account, the token.
import { describe, expect, test } from '@jest/globals';
import { useTestApi } from '#test/api.ts';
import { adminClient } from '#test/admin.ts';
import { expectAdminOnly } from '#test/route-auth.ts';

const fx = useTestApi();
const { admin, newAccount } = adminClient(fx);

describe('GET /admin/v1/accounts/:id/keys', () => {
  test("lists the account's keys, revoked ones included, never a key", async () => {
    const account = await newAccount();
    const named = await admin(`/accounts/${account.id}/keys`, { body: { name: 'ci' } });
    await admin(`/accounts/${account.id}/keys/${named.body.id}`, { method: 'DELETE' });
    const res = await admin(`/accounts/${account.id}/keys`);
    expect(res.status).toBe(200);
    expect(res.body.keys).toHaveLength(2);
    expect(res.body.keys).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ kind: 'primary', revokedAt: null, createdAt: expect.any(String) }),
        expect.objectContaining({ id: named.body.id, name: 'ci', revokedAt: expect.any(String) }),
      ]),
    );
    expect(JSON.stringify(res.body)).not.toContain(account.apiKey);
    expect(JSON.stringify(res.body)).not.toContain(named.body.apiKey);
  });
  test('an unknown or malformed account is 404', async () => {
    for (const id of ['00000000-0000-4000-8000-000000000000', 'nope']) {
      expect(await admin(`/accounts/${id}/keys`)).toMatchObject({
        status: 404,
        body: { error: 'Account not found' },
      });
    }
  });
  test('only the admin token lists them', async () => {
    const account = await newAccount();
    await expectAdminOnly(fx, account.apiKey, 'GET', `/accounts/${account.id}/keys`);
  });
});
