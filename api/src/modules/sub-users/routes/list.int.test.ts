// GET /api/v1/sub-users: the account's sub-users in order of creation with the cap; another
// account's key sees none of them; the key. The API here runs with a cap of 3.
import { describe, expect, test } from '@jest/globals';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { call, useTestApi } from '#test/api.ts';
import { expectApiKeyOnly } from '#test/route-auth.ts';
import { subUserClient } from '#test/sub-users.ts';

const fx = useTestApi({ env: { PROXYFLEET_SUB_USERS_MAX: '3' } });
const { create } = subUserClient(fx);
const list = (key: string) => call(fx.api.url, '/api/v1/sub-users', { key });

describe('GET /api/v1/sub-users', () => {
  test("lists the account's sub-users with the cap", async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const made = await create(a.apiKey, { name: 'Team A' });
    await create(a.apiKey, { name: 'scraper-2', status: 'suspended' });
    const res = await list(a.apiKey);
    expect(res.status).toBe(200);
    expect(res.body.limit).toBe(3);
    expect(res.body.subUsers.map((s: { name: string }) => s.name)).toEqual(['Team A', 'scraper-2']);
    const { success, ...subUser } = made.body as { success: boolean };
    expect([success, res.body.subUsers[0]]).toEqual([true, subUser]);
  });
  test("another account's key sees none of my sub-users", async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const b = await accountWithBandwidth(fx.db.pool);
    await create(a.apiKey, { name: 'private' });
    expect((await list(b.apiKey)).body.subUsers).toEqual([]);
  });
  test('only an API key lists them', async () => {
    await expectApiKeyOnly(fx, 'GET', '/sub-users');
  });
});
