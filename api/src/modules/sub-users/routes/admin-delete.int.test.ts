// DELETE /admin/v1/accounts/:id/sub-users/:subUserId: the operator deletes; another account's
// path, the token.
import { describe, expect, test } from '@jest/globals';
import { accountWithBandwidth, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { call, useTestApi } from '#test/api.ts';
import { expectAdminOnly } from '#test/route-auth.ts';
import { subUserClient } from '#test/sub-users.ts';

const fx = useTestApi();
const { create } = subUserClient(fx);
const del = (accountId: string, id: string) =>
  call(fx.api.url, `/admin/v1/accounts/${accountId}/sub-users/${id}`, {
    admin: TEST_ADMIN_TOKEN,
    method: 'DELETE',
  });
const list = async (key: string) => (await call(fx.api.url, '/api/v1/sub-users', { key })).body.subUsers;

describe('DELETE /admin/v1/accounts/:id/sub-users/:subUserId', () => {
  test('deletes the sub-user; a second deletion is 404', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const { body } = await create(a.apiKey, { name: 'ops' });
    expect((await del(a.id, body.id)).status).toBe(204);
    expect(await list(a.apiKey)).toEqual([]);
    expect(await del(a.id, body.id)).toMatchObject({ status: 404, body: { error: 'Sub-user not found' } });
  });
  test("another account's sub-user is not reachable through this account's path", async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const b = await accountWithBandwidth(fx.db.pool);
    const { body } = await create(a.apiKey, { name: 'ops' });
    expect(await del(b.id, body.id)).toMatchObject({ status: 404, body: { error: 'Sub-user not found' } });
    expect(await list(a.apiKey)).toHaveLength(1);
  });
  test('only the admin token deletes one', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const { body } = await create(a.apiKey, { name: 'ops' });
    await expectAdminOnly(fx, a.apiKey, 'DELETE', `/accounts/${a.id}/sub-users/${body.id}`);
    expect(await list(a.apiKey)).toHaveLength(1);
  });
});
