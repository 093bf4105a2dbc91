// PUT /admin/v1/accounts/:id/alerts: toggles and the low-bandwidth floor, shown to the customer at
// once; refusals, an unknown account, the token.
import { describe, expect, test } from '@jest/globals';
import { call, useTestApi } from '#test/api.ts';
import { adminClient } from '#test/admin.ts';
import { expectAdminOnly } from '#test/route-auth.ts';

const fx = useTestApi();
const { admin, newAccount } = adminClient(fx);
const customerAlerts = async (apiKey: string) =>
  (await call(fx.api.url, '/api/v1/account', { key: apiKey })).body.alerts;

describe('PUT /admin/v1/accounts/:id/alerts', () => {
  test('toggles show in the account record at once', async () => {
    const account = await newAccount();
    expect(await customerAlerts(account.apiKey)).toEqual({
      lowBandwidth: true,
      newInvoice: true,
      serverAlerts: false,
      lowBandwidthPercent: 10,
      lowBandwidthFloorGb: null,
    });
    const res = await admin(`/accounts/${account.id}/alerts`, {
      method: 'PUT',
      body: { lowBandwidth: false, newInvoice: false, serverAlerts: true },
    });
    expect(res.body).toEqual({
      lowBandwidth: false,
      newInvoice: false,
      serverAlerts: true,
      lowBandwidthPercent: 10,
      lowBandwidthFloorGb: null,
    });
    expect(await customerAlerts(account.apiKey)).toMatchObject({ lowBandwidth: false, serverAlerts: true });
    const floor = await admin(`/accounts/${account.id}/alerts`, {
      method: 'PUT',
      body: { lowBandwidthFloorGb: 0.2 },
    });
    expect(floor.body).toMatchObject({
      lowBandwidth: false,
      lowBandwidthPercent: 10,
      lowBandwidthFloorGb: 0.2,
    });
    expect(await customerAlerts(account.apiKey)).toMatchObject({ lowBandwidthFloorGb: 0.2 });
    const cleared = await admin(`/accounts/${account.id}/alerts`, {
      method: 'PUT',
      body: { lowBandwidthFloorGb: null },
    });
    expect(cleared.body).toMatchObject({ lowBandwidthFloorGb: null });
  });
  test.each([[{ lowBandwidthFloorGb: -1 }], [{}], [{ serverAlerts: 'yes' }]])(
    'refuses %j with 400',
    async (body) => {
      const account = await newAccount();
      expect((await admin(`/accounts/${account.id}/alerts`, { method: 'PUT', body })).status).toBe(400);
    },
  );
  test('an unknown account is 404', async () => {
    const res = await admin('/accounts/00000000-0000-4000-8000-000000000000/alerts', {
      method: 'PUT',
      body: { lowBandwidth: false },
    });
    expect(res).toMatchObject({ status: 404, body: { error: 'Account not found' } });
  });
  test('only the admin token changes them', async () => {
    const account = await newAccount();
    const path = `/accounts/${account.id}/alerts`;
    await expectAdminOnly(fx, account.apiKey, 'PUT', path, { lowBandwidth: false });
    expect(await customerAlerts(account.apiKey)).toMatchObject({ lowBandwidth: true });
  });
});
