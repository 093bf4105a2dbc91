// Every route that takes a body refuses a field it does not know with 400 in the API's format,
// naming the field, and changes nothing (docs/errors.md, VALIDATION_FAILED): a typo such as
// `autoRenw` is never dropped in silence. Routes are read from Express's router, so a new POST,
// PUT or PATCH route without a line in BODIES fails the first test, which names it. Routes that
// take no body refuse a body with fields the same way.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { call, mountedRoutes, startTestApi, type TestApi } from '#test/api.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';

/** A valid body for each route that takes one; null: the route takes no body. */
const BODIES: Record<string, object | null> = {
  'POST /api/v1/ip-allowlist': { product: 'basic', cidr: '203.0.113.7' },
  'POST /api/v1/sub-users': { name: 'crawler' },
  'PATCH /api/v1/sub-users/:subUserId': { name: 'crawler' },
  'POST /api/v1/proxies/generate': { provider: 'basic', country: 'us', sessionType: 'rotating' },
  'PUT /api/v1/auto-refill/:product': { enabled: true, thresholdGb: 1, refillGb: 5 },
  'PUT /api/v1/account/target-stats': { enabled: true },
  'PATCH /api/v1/subscriptions/:subscriptionId': { autoRenew: false },
  'POST /api/v1/purchases': { product: 'basic', gb: 1 },
  'POST /api/v1/subscriptions': { kind: 'bandwidth_plan', product: 'basic', gbPerPeriod: 1 },
  'POST /api/v1/card-purchases': { product: 'basic', gb: 1 },
  'PUT /api/v1/billing-details': { company: 'A', address: '', vatId: '' },
  'POST /admin/v1/invoices/:invoiceId/paid': null,
  'POST /api/v1/card/setup': null,
  'POST /admin/v1/invoices/:invoiceId/void': null,
  'POST /admin/v1/accounts': { email: 'someone@example.test' },
  'POST /admin/v1/accounts/:id/purchases': { product: 'basic', gb: 1 },
  'POST /admin/v1/accounts/:id/dashboard-invite': null,
  'POST /admin/v1/accounts/:id/keys/primary/regenerate': null,
  'POST /admin/v1/accounts/:id/keys': { name: 'ci' },
  'PUT /admin/v1/accounts/:id/auto-refill/:product': { enabled: true, thresholdGb: 1, refillGb: 5 },
  'PUT /admin/v1/accounts/:id/throttle/:product': { bytesPerSecond: null },
  'POST /admin/v1/accounts/:id/proxy-password/reset': null,
  'POST /admin/v1/accounts/:id/isp-proxies': {
    host: '198.51.100.9',
    port: 8080,
    username: 'u',
    country: 'us',
  },
  'PUT /admin/v1/accounts/:id/credit-limit': { limit: 100 },
  'POST /admin/v1/accounts/:id/ip-allowlist': { product: 'basic', cidr: '203.0.113.7' },
  'POST /admin/v1/accounts/:id/sub-users': { name: 'crawler' },
  'PATCH /admin/v1/accounts/:id/sub-users/:subUserId': { name: 'crawler' },
  'POST /admin/v1/accounts/:id/suspend': null,
  'POST /admin/v1/accounts/:id/reactivate': null,
  'PUT /admin/v1/accounts/:id/alerts': { lowBandwidth: true },
  'PUT /admin/v1/accounts/:id/target-stats': { enabled: true },
  'POST /admin/v1/accounts/:id/subscriptions': { kind: 'bandwidth_plan', product: 'basic', gbPerPeriod: 1 },
  'PATCH /admin/v1/accounts/:id/subscriptions/:subscriptionId': { autoRenew: false },
  'POST /admin/v1/accounts/:id/subscriptions/:subscriptionId/cancel': null,
  'POST /admin/v1/accounts/:id/two-factor/reset': null,
};

let db: TestDatabase;
let api: TestApi;
let key: string;
let accountId: string;

beforeAll(async () => {
  db = await createTestDatabase();
  api = await startTestApi(db, {
    env: { PROXYFLEET_RATE_LIMIT_PER_MINUTE: '1000000', PROXYFLEET_RATE_LIMIT_BURST: '100000' },
  });
  const account = await accountWithBandwidth(db.pool, { basic: 10 ** 9 });
  key = account.apiKey;
  accountId = account.id;
}, 60_000);
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

/** The JSON routes that take a body (the dashboard's forms are not JSON). */
const bodyRoutes = () =>
  mountedRoutes(api.api.app).filter((r) => /^(POST|PUT|PATCH) \/(api|admin)\/v1\//.test(r));

/** A concrete path for a route template: the test's account, any well-formed id, basic. */
function concrete(template: string): string {
  return template
    .replace(':id', accountId)
    .replace(':product', 'basic')
    .replace(/:\w+/g, () => randomUUID());
}

test('every JSON route that takes a body has a line in the table', () => {
  expect(bodyRoutes().filter((r) => !(r in BODIES))).toEqual([]);
  expect(Object.keys(BODIES).filter((r) => !bodyRoutes().includes(r))).toEqual([]);
});

describe.each(Object.entries(BODIES))('%s', (route, valid) => {
  test('refuses an unknown field with 400 naming it, and changes nothing', async () => {
    const [method, template] = route.split(' ') as [string, string];
    const before = await db.pool.query('SELECT count(*)::int AS n FROM audit_log');
    const answer = await call(api.url, concrete(template), {
      method,
      ...(template.startsWith('/admin/') ? { admin: TEST_ADMIN_TOKEN } : { key }),
      body: { ...valid, autoRenw: true },
    });
    expect(answer).toMatchObject({
      status: 400,
      body: { success: false, error: 'Invalid request: autoRenw: unknown field' },
    });
    const after = await db.pool.query('SELECT count(*)::int AS n FROM audit_log');
    expect(after.rows).toEqual(before.rows);
  });
});

test('an empty body on a route that takes none is still fine', async () => {
  const answer = await call(api.url, `/admin/v1/accounts/${accountId}/proxy-password/reset`, {
    method: 'POST',
    admin: TEST_ADMIN_TOKEN,
    body: {},
  });
  expect(answer.status).toBe(200);
});
