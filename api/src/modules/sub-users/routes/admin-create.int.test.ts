// POST /admin/v1/accounts/:id/sub-users: a sub-user made by the operator, seen by the customer;
// refusals, an unknown account, the token.
import { describe, expect, test } from '@jest/globals';
import { accountWithBandwidth, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { call, useTestApi } from '#test/api.ts';
import { expectAdminOnly } from '#test/route-auth.ts';

const fx = useTestApi();
const create = (accountId: string, body: unknown) =>
  call(fx.api.url, `/admin/v1/accounts/${accountId}/sub-users`, { admin: TEST_ADMIN_TOKEN, body });

describe('POST /admin/v1/accounts/:id/sub-users', () => {
  test('creates a sub-user the customer then sees', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const made = await create(a.id, { name: 'ops', trafficLimits: { light: 3 } });
    expect(made).toMatchObject({ status: 201, body: { name: 'ops', status: 'active' } });
    expect(made.body.products.light).toMatchObject({ limitGb: 3 });
    const seen = await call(fx.api.url, `/api/v1/sub-users/${made.body.id}`, { key: a.apiKey });
    // The customer's answer says success: true (docs/adr/0012); the operator's is the bare resource.
    expect(seen.body).toEqual({ ...made.body, success: true });
  });
  test('refuses a bad body (400) and a name taken (409)', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    expect(await create(a.id, { name: 'x', port: 1 })).toMatchObject({
      status: 400,
      body: { error: 'Invalid request: port: unknown field' },
    });
    expect((await create(a.id, { name: 'x' })).status).toBe(201);
    expect(await create(a.id, { name: 'x' })).toMatchObject({
      status: 409,
      body: { error: 'A sub-user with this name already exists' },
    });
  });
  test('an unknown account is 404', async () => {
    expect(await create('00000000-0000-4000-8000-000000000000', { name: 'x' })).toMatchObject({
      status: 404,
      body: { error: 'Account not found' },
    });
  });
  test('only the admin token creates one', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    await expectAdminOnly(fx, a.apiKey, 'POST', `/accounts/${a.id}/sub-users`, { name: 'x' });
    expect((await call(fx.api.url, '/api/v1/sub-users', { key: a.apiKey })).body.subUsers).toEqual([]);
  });
});
