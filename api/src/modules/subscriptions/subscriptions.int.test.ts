// The subscription routes, customer and admin, through the real API and database: what renews,
// when and for how much; renewal off; bad amounts and periods refused in the documented format;
// every change in the audit log; renewal invoices in the invoice list.
import { describe, expect, test } from '@jest/globals';
import { periodStart } from '#common/billing/periods.ts';
import { renewDue } from '#common/billing/renewals.ts';
import { paymentMethods } from '#common/billing/payment.ts';
import { createLogger } from '#common/logger.ts';
import { exampleEmail, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { call, useTestApi } from '#test/api.ts';

const fx = useTestApi();
const admin = (path: string, options: Parameters<typeof call>[2] = {}) =>
  call(fx.api.url, `/admin/v1${path}`, { admin: TEST_ADMIN_TOKEN, ...options });

async function newAccount() {
  const res = await admin('/accounts', { body: { email: exampleEmail() } });
  expect(res.status).toBe(201);
  const account = res.body as { id: string; apiKey: string };
  const me = (path: string, options: Parameters<typeof call>[2] = {}) =>
    call(fx.api.url, `/api/v1${path}`, { key: account.apiKey, ...options });
  return { ...account, me };
}

describe('subscriptions', () => {
  test('an operator starts a plan and an ISP rental; the customer sees what renews, when and for how much', async () => {
    const a = await newAccount();
    const plan = await admin(`/accounts/${a.id}/subscriptions`, {
      body: { kind: 'bandwidth_plan', product: 'basic', gbPerPeriod: 10 },
    });
    expect(plan).toMatchObject({
      status: 201,
      body: {
        kind: 'bandwidth_plan',
        status: 'active',
        autoRenew: true,
        price: 20,
        currency: 'USD',
        nextRenewalAt: expect.any(String),
      },
    });
    const isp = await admin(`/accounts/${a.id}/subscriptions`, {
      body: { kind: 'isp_proxy', country: 'de', proxyCount: 3 },
    });
    expect(isp.body).toMatchObject({ proxyCount: 3, price: 15, unusedGb: null });
    // The worker renews the first period of each (billing_now() is after startAt).
    await renewDue(fx.db.pool, {
      methods: paymentMethods(),
      graceDays: 3,
      logger: createLogger('test', 'silent'),
    });
    const list = await a.me('/subscriptions');
    expect(list.status).toBe(200);
    const subs = (list.body as { subscriptions: Record<string, unknown>[] }).subscriptions;
    expect(subs.map((s) => [s.kind, s.paidUntil, s.nextRenewalAt, s.price])).toEqual([
      ['bandwidth_plan', expect.any(String), expect.any(String), 20],
      ['isp_proxy', expect.any(String), expect.any(String), 15],
    ]);
    // Paid for one month from the start, on its anniversary.
    expect(subs[0]!.paidUntil).toBe(periodStart(new Date(subs[0]!.startedAt as string), 1).toISOString());
    expect(subs[0]!.nextRenewalAt).toBe(subs[0]!.paidUntil);
    const invoices = await a.me('/invoices');
    expect(
      (invoices.body as { invoices: { source: string; amount: number }[] }).invoices.map((i) => i.source),
    ).toContain('renewal');

    // Turn renewal off: no next renewal; on again.
    const id = (plan.body as { id: string }).id;
    const off = await a.me(`/subscriptions/${id}`, { method: 'PATCH', body: { autoRenew: false } });
    expect(off).toMatchObject({ status: 200, body: { autoRenew: false, nextRenewalAt: null } });
    expect((await a.me(`/subscriptions/${id}`, { method: 'PATCH', body: { autoRenew: 'no' } })).status).toBe(
      400,
    );
    // Another account's subscription is not found.
    const b = await newAccount();
    expect(await b.me(`/subscriptions/${id}`, { method: 'PATCH', body: { autoRenew: true } })).toMatchObject({
      status: 404,
      body: { success: false, error: 'Subscription not found' },
    });

    // Operators change and cancel.
    const changed = await admin(`/accounts/${a.id}/subscriptions/${id}`, {
      method: 'PATCH',
      body: { gbPerPeriod: 20 },
    });
    expect(changed.body).toMatchObject({ gbPerPeriod: 20, price: 40 });
    const cancelled = await admin(`/accounts/${a.id}/subscriptions/${id}/cancel`, { method: 'POST' });
    expect(cancelled.body).toMatchObject({ status: 'cancelled', autoRenew: false, nextRenewalAt: null });

    const audit = await admin(`/accounts/${a.id}/audit-log?limit=50`);
    const actions = (audit.body as { entries: { action: string; actor: { kind: string } }[] }).entries
      .filter((e) => e.action.startsWith('subscription.'))
      .map((e) => `${e.action} ${e.actor.kind}`)
      .reverse();
    expect(actions).toEqual([
      'subscription.created admin',
      'subscription.created admin',
      'subscription.renewed system',
      'subscription.renewed system',
      'subscription.auto_renew_changed api_key',
      'subscription.changed admin',
      'subscription.cancelled admin',
    ]);
  });

  test('GET /api/v1/proxies/list entries gain the rental: its status and paidUntil; existing fields unchanged', async () => {
    const a = await newAccount();
    const proxy = await admin(`/accounts/${a.id}/isp-proxies`, {
      body: { host: '203.0.113.9', port: 8000, username: 'rent1', password: 'secret1', country: 'fr' },
    });
    expect(proxy.status).toBe(201);
    const proxyId = (proxy.body as { id: string }).id;
    const before = ((await a.me('/proxies/list')).body as { proxies: Record<string, unknown>[] }).proxies[0]!;
    expect(before.rental).toBeNull();
    const sub = await admin(`/accounts/${a.id}/subscriptions`, {
      body: { kind: 'isp_proxy', country: 'fr', ispProxyIds: [proxyId] },
    });
    expect(sub.body).toMatchObject({ proxyCount: 1 });
    await renewDue(fx.db.pool, {
      methods: paymentMethods(),
      graceDays: 3,
      logger: createLogger('test', 'silent'),
    });
    const after = ((await a.me('/proxies/list')).body as { proxies: Record<string, unknown>[] }).proxies[0]!;
    const { rental, ...rest } = after;
    const { rental: _none, ...restBefore } = before;
    expect(rest).toEqual(restBefore);
    expect(rental).toEqual({
      subscriptionId: (sub.body as { id: string }).id,
      status: 'active',
      paidUntil: (await a.me('/subscriptions')).body.subscriptions[0].paidUntil,
    });
    // Another account's proxy cannot be rented here.
    const b = await newAccount();
    expect(
      await admin(`/accounts/${b.id}/subscriptions`, {
        body: { kind: 'isp_proxy', country: 'fr', ispProxyIds: [proxyId] },
      }),
    ).toMatchObject({ status: 404, body: { error: 'ISP proxy not found' } });
  });

  test('bad amounts, periods and kinds are 400 in the documented error format', async () => {
    const a = await newAccount();
    for (const body of [
      { kind: 'bandwidth_plan', product: 'basic', gbPerPeriod: 0 },
      { kind: 'bandwidth_plan', product: 'basic', gbPerPeriod: 1.5 },
      { kind: 'bandwidth_plan', product: 'basic', gbPerPeriod: 1e9 },
      { kind: 'bandwidth_plan', product: 'nope', gbPerPeriod: 1 },
      { kind: 'isp_proxy', country: 'DE', proxyCount: 1 },
      { kind: 'isp_proxy', country: 'de', proxyCount: 0 },
      { kind: 'isp_proxy', country: 'de', proxyCount: 1, startAt: 'tomorrow' },
      { kind: 'weekly', product: 'basic', gbPerPeriod: 1 },
      { kind: 'bandwidth_plan', product: 'basic', gbPerPeriod: 1, paymentMethod: 'Bad Method' },
    ]) {
      const res = await admin(`/accounts/${a.id}/subscriptions`, { body });
      expect(res).toMatchObject({
        status: 400,
        body: { success: false, error: expect.stringMatching(/^Invalid request: /) },
      });
    }
    const plan = await admin(`/accounts/${a.id}/subscriptions`, {
      body: { kind: 'bandwidth_plan', product: 'light', gbPerPeriod: 1 },
    });
    const id = (plan.body as { id: string }).id;
    expect(
      await admin(`/accounts/${a.id}/subscriptions/${id}`, { method: 'PATCH', body: { proxyCount: 2 } }),
    ).toMatchObject({
      status: 400,
      body: { error: 'Invalid request: proxyCount: only an ISP proxy rental has a proxy count' },
    });
    expect((await admin(`/accounts/${a.id}/subscriptions/${id}`, { method: 'PATCH', body: {} })).status).toBe(
      400,
    );
    expect((await admin(`/accounts/00000000-0000-4000-8000-000000000000/subscriptions`)).status).toBe(404);
  });
});
