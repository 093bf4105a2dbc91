// POST /admin/v1/accounts/:id/keys: named keys up to 10 active, names unique, refusals, the token.
import { describe, expect, test } from '@jest/globals';
import { call, useTestApi } from '#test/api.ts';
import { adminClient } from '#test/admin.ts';
import { expectAdminOnly } from '#test/route-auth.ts';

const fx = useTestApi();
const { admin, newAccount } = adminClient(fx);

describe('POST /admin/v1/accounts/:id/keys', () => {
  test('named keys: create, list without the key, revoke; the 11th active is refused', async () => {
    const account = await newAccount();
    const created = [];
    for (let i = 1; i <= 10; i++) {
      const res = await admin(`/accounts/${account.id}/keys`, { body: { name: `int-${i}` } });
      expect(res.status).toBe(201);
      expect(Object.keys(res.body).sort()).toEqual(['apiKey', 'id', 'name', 'prefix']);
      created.push(res.body as { id: string; apiKey: string });
    }
    const eleventh = await admin(`/accounts/${account.id}/keys`, { body: { name: 'int-11' } });
    expect(eleventh).toMatchObject({
      status: 409,
      body: { success: false, error: 'An account can have at most 10 named API keys' },
    });
    expect((await admin(`/accounts/${account.id}/keys`, { body: { name: 'int-1' } })).status).toBe(409);
    expect((await call(fx.api.url, '/api/v1/usage', { key: created[0]!.apiKey })).status).toBe(200);

    const del = await admin(`/accounts/${account.id}/keys/${created[0]!.id}`, { method: 'DELETE' });
    expect(del.status).toBe(204);
    expect((await call(fx.api.url, '/api/v1/usage', { key: created[0]!.apiKey })).status).toBe(401);
    expect((await admin(`/accounts/${account.id}/keys/${created[0]!.id}`, { method: 'DELETE' })).status).toBe(
      404,
    );
    expect((await admin(`/accounts/${account.id}/keys`, { body: { name: 'int-11' } })).status).toBe(201);

    const list = await admin(`/accounts/${account.id}/keys`);
    expect(list.body.keys).toHaveLength(12);
    expect(JSON.stringify(list.body)).not.toContain(created[1]!.apiKey);
    expect(list.body.keys.filter((k: { revokedAt: string | null }) => k.revokedAt)).toHaveLength(1);
  });
  test('a bad key name is 400', async () => {
    const account = await newAccount();
    expect((await admin(`/accounts/${account.id}/keys`, { body: { name: '' } })).status).toBe(400);
    expect((await admin(`/accounts/${account.id}/keys`, { body: { name: 'x'.repeat(65) } })).status).toBe(
      400,
    );
  });
  test('an unknown account is 404', async () => {
    const res = await admin('/accounts/00000000-0000-4000-8000-000000000000/keys', { body: { name: 'x' } });
    expect(res).toMatchObject({ status: 404, body: { error: 'Account not found' } });
  });
  test('only the admin token creates one', async () => {
    const account = await newAccount();
    await expectAdminOnly(fx, account.apiKey, 'POST', `/accounts/${account.id}/keys`, { name: 'x' });
    expect((await admin(`/accounts/${account.id}/keys`)).body.keys).toHaveLength(1);
  });
});
