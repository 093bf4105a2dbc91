// PATCH /admin/v1/accounts/:id/sub-users/:subUserId: the operator suspends and resumes; refusals,
// another account's path, the token.
import { describe, expect, test } from '@jest/globals';
import { accountWithBandwidth, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { call, useTestApi } from '#test/api.ts';
import { expectAdminOnly } from '#test/route-auth.ts';
import { subUserClient } from '#test/sub-users.ts';

const fx = useTestApi();
const { create } = subUserClient(fx);
const patch = (accountId: string, id: string, body: unknown) =>
  call(fx.api.url, `/admin/v1/accounts/${accountId}/sub-users/${id}`, {
    admin: TEST_ADMIN_TOKEN,
    method: 'PATCH',
    body,
  });
const customerSees = async (key: string, id: string) =>
  (await call(fx.api.url, `/api/v1/sub-users/${id}`, { key })).body.status as string;

describe('PATCH /admin/v1/accounts/:id/sub-users/:subUserId', () => {
  test('suspends and resumes; the customer sees it', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const { body } = await create(a.apiKey, { name: 'ops' });
    expect(await patch(a.id, body.id, { status: 'suspended' })).toMatchObject({
      status: 200,
      body: { status: 'suspended' },
    });
    expect(await customerSees(a.apiKey, body.id)).toBe('suspended');
    expect((await patch(a.id, body.id, { status: 'active' })).body.status).toBe('active');
    expect(await customerSees(a.apiKey, body.id)).toBe('active');
  });
  test('refuses a bad change with 400', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const { body } = await create(a.apiKey, { name: 'ops' });
    expect(await patch(a.id, body.id, { status: 'paused' })).toMatchObject({
      status: 400,
      body: { error: 'Invalid request: status: must be one of active, suspended' },
    });
  });
  test("another account's sub-user is not reachable through this account's path", async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const b = await accountWithBandwidth(fx.db.pool);
    const { body } = await create(a.apiKey, { name: 'ops' });
    expect(await patch(b.id, body.id, { status: 'suspended' })).toMatchObject({
      status: 404,
      body: { error: 'Sub-user not found' },
    });
    expect(await customerSees(a.apiKey, body.id)).toBe('active');
  });
  test('only the admin token changes one', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const { body } = await create(a.apiKey, { name: 'ops' });
    const path = `/accounts/${a.id}/sub-users/${body.id}`;
    await expectAdminOnly(fx, a.apiKey, 'PATCH', path, { status: 'suspended' });
    expect(await customerSees(a.apiKey, body.id)).toBe('active');
  });
});
