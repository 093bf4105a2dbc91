// GET /api/v1/sub-users/:subUserId/usage: hours and totals per product from the rows the worker's
// folding writes (inserted here directly); the account's /usage unchanged; refusals, another
// account's sub-user, the key.
import { describe, expect, test } from '@jest/globals';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { call, useTestApi } from '#test/api.ts';
import { expectApiKeyOnly } from '#test/route-auth.ts';
import { subUserClient } from '#test/sub-users.ts';

const fx = useTestApi();
const { create } = subUserClient(fx);

describe('GET /api/v1/sub-users/:subUserId/usage', () => {
  test("hours and totals per product over ?days=; the account's /usage unchanged", async () => {
    const a = await accountWithBandwidth(fx.db.pool, { basic: 5e9 });
    const { body: su } = await create(a.apiKey, { name: 'metered', trafficLimits: { basic: 1 } });
    const before = await call(fx.api.url, '/api/v1/usage', { key: a.apiKey });
    await fx.db.pool.query(
      `INSERT INTO sub_user_usage_hourly (sub_user_id, account_id, product, hour, bytes_up, bytes_down, requests)
       VALUES ($1, $2, 'basic', date_trunc('hour', now()) - interval '2 hours', 100, 1000, 3),
              ($1, $2, 'basic', date_trunc('hour', now()), 10, 20, 4),
              ($1, $2, 'mobile', date_trunc('hour', now()), 2, 3, 1),
              ($1, $2, 'basic', date_trunc('hour', now()) - interval '3 days', 7, 7, 7)`,
      [su.id, a.id],
    );
    const usage = await call(fx.api.url, `/api/v1/sub-users/${su.id}/usage?days=1`, { key: a.apiKey });
    expect(usage.status).toBe(200);
    expect(usage.body).toMatchObject({ success: true, subUserId: su.id });
    expect(usage.body.totals).toEqual([
      { product: 'basic', bytesUp: 110, bytesDown: 1020, requests: 7 },
      { product: 'mobile', bytesUp: 2, bytesDown: 3, requests: 1 },
    ]);
    expect(usage.body.hours).toHaveLength(3);
    expect(usage.body.hours[0]).toMatchObject({ product: 'basic', bytesUp: 100, bytesDown: 1000 });
    const week = await call(fx.api.url, `/api/v1/sub-users/${su.id}/usage`, { key: a.apiKey });
    expect(week.body.hours).toHaveLength(4);
    // The account's own figures are the balances', untouched by the sub-user's rows.
    const after = await call(fx.api.url, '/api/v1/usage', { key: a.apiKey });
    expect(after.body.products).toEqual(before.body.products);
  });
  test('refuses ?days= past 31', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const { body: su } = await create(a.apiKey, { name: 'x' });
    expect(
      await call(fx.api.url, `/api/v1/sub-users/${su.id}/usage?days=32`, { key: a.apiKey }),
    ).toMatchObject({
      status: 400,
      body: { error: 'Invalid request: days: must be at most 31' },
    });
  });
  test("another account's sub-user is 404", async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const b = await accountWithBandwidth(fx.db.pool);
    const { body } = await create(a.apiKey, { name: 'private' });
    expect(await call(fx.api.url, `/api/v1/sub-users/${body.id}/usage`, { key: b.apiKey })).toMatchObject({
      status: 404,
      body: { error: 'Sub-user not found' },
    });
  });
  test('only an API key reads it', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const { body } = await create(a.apiKey, { name: 'x' });
    await expectApiKeyOnly(fx, 'GET', `/sub-users/${body.id}/usage`);
  });
});
