// DELETE /admin/v1/accounts/:id/keys/:keyId: a named key stops at once; not the primary key, not
// another account's key, not without the token.
import { describe, expect, test } from '@jest/globals';
import { call, useTestApi } from '#test/api.ts';
import { adminClient } from '#test/admin.ts';
import { expectAdminOnly } from '#test/route-auth.ts';

const fx = useTestApi();
const { admin, newAccount } = adminClient(fx);

describe('DELETE /admin/v1/accounts/:id/keys/:keyId', () => {
  test('revokes a named key: it stops at once, and a second revocation is 404', async () => {
    const account = await newAccount();
    const key = await admin(`/accounts/${account.id}/keys`, { body: { name: 'x' } });
    const res = await admin(`/accounts/${account.id}/keys/${key.body.id}`, { method: 'DELETE' });
    expect(res.status).toBe(204);
    expect(res.headers.get('proxyfleet-cache-sync')).toBe('1/1');
    expect((await call(fx.api.url, '/api/v1/usage', { key: key.body.apiKey })).status).toBe(401);
    expect(await admin(`/accounts/${account.id}/keys/${key.body.id}`, { method: 'DELETE' })).toMatchObject({
      status: 404,
      body: { error: 'API key not found' },
    });
  });
  test('the primary key cannot be revoked, only regenerated', async () => {
    const account = await newAccount();
    const keys = await admin(`/accounts/${account.id}/keys`);
    const primary = keys.body.keys.find((k: { kind: string }) => k.kind === 'primary');
    expect((await admin(`/accounts/${account.id}/keys/${primary.id}`, { method: 'DELETE' })).status).toBe(
      409,
    );
  });
  test('a key of another account cannot be revoked through this one', async () => {
    const a = await newAccount();
    const b = await newAccount();
    const key = await admin(`/accounts/${b.id}/keys`, { body: { name: 'x' } });
    expect((await admin(`/accounts/${a.id}/keys/${key.body.id}`, { method: 'DELETE' })).status).toBe(404);
    expect((await call(fx.api.url, '/api/v1/usage', { key: key.body.apiKey })).status).toBe(200);
  });
  test('only the admin token revokes; the key keeps working', async () => {
    const account = await newAccount();
    const key = await admin(`/accounts/${account.id}/keys`, { body: { name: 'x' } });
    await expectAdminOnly(fx, account.apiKey, 'DELETE', `/accounts/${account.id}/keys/${key.body.id}`);
    expect((await call(fx.api.url, '/api/v1/usage', { key: key.body.apiKey })).status).toBe(200);
  });
});
