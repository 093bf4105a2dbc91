// DELETE /api/v1/sub-users/:subUserId: gone, then 404; another account's sub-user, the key.
import { describe, expect, test } from '@jest/globals';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { call, useTestApi } from '#test/api.ts';
import { expectApiKeyOnly } from '#test/route-auth.ts';
import { subUserClient } from '#test/sub-users.ts';

const fx = useTestApi();
const { create } = subUserClient(fx);
const del = (key: string, id: string) =>
  call(fx.api.url, `/api/v1/sub-users/${id}`, { key, method: 'DELETE' });
const notFound = { status: 404, body: { error: 'Sub-user not found' } };

describe('DELETE /api/v1/sub-users/:subUserId', () => {
  test('deletes the sub-user; a second deletion is 404', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const { body } = await create(a.apiKey, { name: 'x' });
    expect((await del(a.apiKey, body.id)).status).toBe(204);
    expect(await del(a.apiKey, body.id)).toMatchObject(notFound);
    expect((await call(fx.api.url, '/api/v1/sub-users', { key: a.apiKey })).body.subUsers).toEqual([]);
  });
  test("another account's sub-user is not deleted", async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const b = await accountWithBandwidth(fx.db.pool);
    const { body } = await create(a.apiKey, { name: 'private' });
    expect(await del(b.apiKey, body.id)).toMatchObject(notFound);
    expect((await call(fx.api.url, `/api/v1/sub-users/${body.id}`, { key: a.apiKey })).status).toBe(200);
  });
  test('only an API key deletes one', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const { body } = await create(a.apiKey, { name: 'x' });
    await expectApiKeyOnly(fx, 'DELETE', `/sub-users/${body.id}`);
    expect((await call(fx.api.url, `/api/v1/sub-users/${body.id}`, { key: a.apiKey })).status).toBe(200);
  });
});
