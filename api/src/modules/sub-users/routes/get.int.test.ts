// GET /api/v1/sub-users/:subUserId: the sub-user with its password and its use per product; an
// unknown one, another account's, the key.
import { describe, expect, test } from '@jest/globals';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { call, useTestApi } from '#test/api.ts';
import { expectApiKeyOnly } from '#test/route-auth.ts';
import { noLimit, subUserClient } from '#test/sub-users.ts';

const fx = useTestApi();
const { create } = subUserClient(fx);
const notFound = { status: 404, body: { error: 'Sub-user not found' } };

describe('GET /api/v1/sub-users/:subUserId', () => {
  test('reads the sub-user as created: the password can be read again', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const made = await create(a.apiKey, { name: 'Team A', trafficLimits: { basic: 1 } });
    const one = await call(fx.api.url, `/api/v1/sub-users/${made.body.id}`, { key: a.apiKey });
    expect(one).toMatchObject({ status: 200, body: made.body });
  });
  test("lifetime use per product, which the limits count, from what the worker's fold writes", async () => {
    const a = await accountWithBandwidth(fx.db.pool, { basic: 5e9 });
    const { body: su } = await create(a.apiKey, { name: 'metered', trafficLimits: { basic: 1 } });
    await fx.db.pool.query(
      `INSERT INTO sub_user_products (sub_user_id, account_id, product, used_bytes, requests_count)
       VALUES ($1, $2, 'basic', 300000000, 7), ($1, $2, 'mobile', 5, 1)
       ON CONFLICT (sub_user_id, product) DO UPDATE SET used_bytes = EXCLUDED.used_bytes,
                                                        requests_count = EXCLUDED.requests_count`,
      [su.id, a.id],
    );
    const read = await call(fx.api.url, `/api/v1/sub-users/${su.id}`, { key: a.apiKey });
    expect(read.body.products.basic).toEqual({
      limitGb: 1,
      limitBytes: 1e9,
      usedBytes: 3e8,
      usedGb: 0.3,
      requests: 7,
    });
    expect(read.body.products.mobile).toEqual({ ...noLimit, usedBytes: 5, requests: 1 });
  });
  test("an unknown or malformed id, and another account's sub-user, are 404", async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const b = await accountWithBandwidth(fx.db.pool);
    const { body } = await create(a.apiKey, { name: 'private' });
    for (const id of ['00000000-0000-4000-8000-000000000000', 'nope'])
      expect(await call(fx.api.url, `/api/v1/sub-users/${id}`, { key: a.apiKey })).toMatchObject(notFound);
    expect(await call(fx.api.url, `/api/v1/sub-users/${body.id}`, { key: b.apiKey })).toMatchObject(notFound);
  });
  test('only an API key reads one', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const { body } = await create(a.apiKey, { name: 'x' });
    await expectApiKeyOnly(fx, 'GET', `/sub-users/${body.id}`);
  });
});
