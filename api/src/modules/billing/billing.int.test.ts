// The auto-refill and invoice routes, customer and admin, through the real API and database.
import { describe, expect, test } from '@jest/globals';
import { exampleEmail, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { call, useTestApi } from '#test/api.ts';

const fx = useTestApi();
const admin = (path: string, options: Parameters<typeof call>[2] = {}) =>
  call(fx.api.url, `/admin/v1${path}`, { admin: TEST_ADMIN_TOKEN, ...options });

async function newAccount() {
  const res = await admin('/accounts', { body: { email: exampleEmail() } });
  expect(res.status).toBe(201);
  return res.body as { id: string; apiKey: string };
}

describe('auto-refill settings', () => {
  test('a customer reads and sets them per product; bad amounts are refused', async () => {
    const account = await newAccount();
    const me = (path: string, options: Parameters<typeof call>[2] = {}) =>
      call(fx.api.url, `/api/v1${path}`, { key: account.apiKey, ...options });
    expect((await me('/auto-refill/basic')).body).toEqual({
      success: true,
      product: 'basic',
      enabled: false,
      thresholdGb: null,
      refillGb: null,
      maxRefillsPerMonth: 5,
      paymentMethod: 'invoice',
      refillsThisMonth: 0,
    });
    const put = await me('/auto-refill/basic', {
      method: 'PUT',
      body: { enabled: true, thresholdGb: 0.5, refillGb: 5, maxRefillsPerMonth: 3 },
    });
    expect(put).toMatchObject({
      status: 200,
      body: { product: 'basic', enabled: true, thresholdGb: 0.5, refillGb: 5, maxRefillsPerMonth: 3 },
    });
    expect((await me('/auto-refill/basic')).body).toMatchObject({
      enabled: true,
      thresholdGb: 0.5,
      refillGb: 5,
    });
    expect((await me('/auto-refill/mobile')).body).toMatchObject({ enabled: false });
    for (const body of [
      { enabled: true, thresholdGb: 5, refillGb: 5 },
      { enabled: true, thresholdGb: 0, refillGb: 5 },
      { enabled: true, thresholdGb: 1, refillGb: -5 },
      { enabled: true, thresholdGb: 1, refillGb: 5e9 },
      { enabled: true, thresholdGb: 1, refillGb: 5, maxRefillsPerMonth: 0 },
      { enabled: 'yes', thresholdGb: 1, refillGb: 5 },
    ]) {
      expect(await me('/auto-refill/basic', { method: 'PUT', body })).toMatchObject({
        status: 400,
        body: { success: false },
      });
    }
    expect((await me('/auto-refill/nope')).status).toBe(404);
    expect((await call(fx.api.url, '/api/v1/auto-refill/basic')).status).toBe(401);
    // The operators' route validates the same way.
    expect(
      (
        await admin(`/accounts/${account.id}/auto-refill/basic`, {
          method: 'PUT',
          body: { enabled: true, thresholdGb: 6, refillGb: 5 },
        })
      ).status,
    ).toBe(400);
  });
});

describe('invoices', () => {
  test('newest first, paginated, priced, with their source; the admin sees the same list', async () => {
    const account = await newAccount();
    for (const [product, gb] of [
      ['basic', 1],
      ['mobile', 0.5],
      ['light', 2],
    ] as const) {
      expect((await admin(`/accounts/${account.id}/purchases`, { body: { product, gb } })).status).toBe(201);
    }
    const first = await call(fx.api.url, '/api/v1/invoices?limit=2', { key: account.apiKey });
    expect(first.status).toBe(200);
    expect(first.body.invoices.map((i: { product: string }) => i.product)).toEqual(['light', 'mobile']);
    expect(first.body.invoices[0]).toMatchObject({
      product: 'light',
      gb: 2,
      bytes: 2e9,
      amount: 2,
      currency: 'USD',
      source: 'purchase',
      status: 'issued',
    });
    expect(first.body.invoices[1]).toMatchObject({ product: 'mobile', gb: 0.5, amount: 4 });
    expect(typeof first.body.invoices[0].issuedAt).toBe('string');
    const second = await call(fx.api.url, `/api/v1/invoices?limit=2&before=${first.body.nextBefore}`, {
      key: account.apiKey,
    });
    expect(second.body).toMatchObject({ invoices: [{ product: 'basic', amount: 2 }], nextBefore: null });
    const listed = await admin(`/accounts/${account.id}/invoices`);
    expect(listed.body.invoices.map((i: { product: string }) => i.product)).toEqual([
      'light',
      'mobile',
      'basic',
    ]);
    expect((await call(fx.api.url, '/api/v1/invoices?limit=0', { key: account.apiKey })).status).toBe(400);
    expect((await admin('/accounts/00000000-0000-4000-8000-000000000000/invoices')).status).toBe(404);
    // Another customer sees none of them.
    const other = await newAccount();
    expect((await call(fx.api.url, '/api/v1/invoices', { key: other.apiKey })).body).toEqual({
      success: true,
      invoices: [],
      nextBefore: null,
    });
  });

  test('the routes are in the OpenAPI document', async () => {
    const doc = await call(fx.api.url, '/api/v1/openapi.json');
    const paths = Object.keys(doc.body.paths as object);
    expect(paths).toEqual(
      expect.arrayContaining([
        '/api/v1/auto-refill/{product}',
        '/api/v1/invoices',
        '/admin/v1/accounts/{id}/invoices',
        '/admin/v1/accounts/{id}/credit-limit',
      ]),
    );
  });
});

describe('credit limit', () => {
  test('the operator sets it per account (null: the default); the customer sees it with what this month used', async () => {
    const account = await newAccount();
    expect(
      (await admin(`/accounts/${account.id}/purchases`, { body: { product: 'basic', gb: 100 } })).status,
    ).toBe(201);
    const month = new Date().toISOString().slice(0, 7);
    const mine = async () => (await call(fx.api.url, '/api/v1/account', { key: account.apiKey })).body.credit;
    expect(await mine()).toEqual({
      limit: 1000,
      usedThisMonth: 200,
      available: 800,
      currency: 'USD',
      default: true,
      month,
    });
    const set = await admin(`/accounts/${account.id}/credit-limit`, {
      method: 'PUT',
      body: { limit: 2500.5 },
    });
    expect(set).toMatchObject({
      status: 200,
      body: { limit: 2500.5, usedThisMonth: 200, available: 2300.5 },
    });
    expect(set.headers.get('proxyfleet-cache-sync')).toMatch(/^\d+\/\d+$/);
    expect(await mine()).toMatchObject({ limit: 2500.5, default: false });
    expect((await admin(`/accounts/${account.id}/credit-limit`)).body).toMatchObject({ limit: 2500.5 });
    for (const limit of [-1, 1.005, 2e9, '100', undefined]) {
      expect(
        (await admin(`/accounts/${account.id}/credit-limit`, { method: 'PUT', body: { limit } })).status,
      ).toBe(400);
    }
    expect(
      (await admin(`/accounts/${account.id}/credit-limit`, { method: 'PUT', body: { limit: null } })).body,
    ).toMatchObject({ limit: 1000, default: true });
    const nobody = '/accounts/00000000-0000-4000-8000-000000000000/credit-limit';
    expect((await admin(nobody)).status).toBe(404);
    expect((await admin(nobody, { method: 'PUT', body: { limit: 10 } })).status).toBe(404);
  });
});
