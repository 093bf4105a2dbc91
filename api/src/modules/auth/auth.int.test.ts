// The shared security table (docs/style.md): every customer route refuses a missing, malformed,
// unknown or revoked key and a suspended account with the same 401; plus the admin token rules
// and the per-address limit on failed authentications.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { setAccountStatus } from '#common/accounts/accounts.ts';
import { createNamedKey, regeneratePrimaryKey, revokeKey } from '#common/accounts/keys.ts';
import { call, mountedRoutes, startTestApi, type TestApi } from '#test/api.ts';

const CUSTOMER_ROUTES: [string, string, unknown?][] = [
  ['GET', '/api/v1/account'],
  ['GET', '/api/v1/usage'],
  ['GET', '/api/v1/proxies/list'],
  [
    'POST',
    '/api/v1/proxies/generate',
    { provider: 'basic', country: 'us', sessionType: 'rotating', count: 1 },
  ],
];

let db: TestDatabase;
let api: TestApi;
const keys: Record<string, string> = {};

beforeAll(async () => {
  db = await createTestDatabase();
  api = await startTestApi(db, {
    env: { PROXYFLEET_AUTH_FAILURES_BURST: '1000', PROXYFLEET_AUTH_FAILURES_PER_MINUTE: '1000' },
  });
  const good = await accountWithBandwidth(db.pool, { basic: 1e9 });
  keys.valid = good.apiKey;
  keys.named = (await createNamedKey(db.pool, good.id, 'ci')).apiKey;
  const revoked = await createNamedKey(db.pool, good.id, 'old');
  await revokeKey(db.pool, good.id, revoked.id);
  keys.revoked = revoked.apiKey;
  const regenerated = await accountWithBandwidth(db.pool, { basic: 1e9 });
  await regeneratePrimaryKey(db.pool, regenerated.id);
  keys.regenerated = regenerated.apiKey;
  const suspended = await accountWithBandwidth(db.pool, { basic: 1e9 });
  await setAccountStatus(db.pool, suspended.id, 'suspended');
  keys.suspended = suspended.apiKey;
});

afterAll(async () => {
  await api.close();
  await db.drop();
});

const BAD_CREDENTIALS: [string, () => Record<string, string>][] = [
  ['no key', () => ({})],
  ['an empty X-API-Key', () => ({ 'x-api-key': '' })],
  ['a malformed key', () => ({ 'x-api-key': 'svc_live_xyz' })],
  ['an uppercase key', () => ({ 'x-api-key': keys.valid!.toUpperCase() })],
  ['a key with a test prefix', () => ({ 'x-api-key': keys.valid!.replace('svc_live_', 'svc_test_') })],
  ['an unknown well-formed key', () => ({ 'x-api-key': 'svc_live_' + '0'.repeat(48) })],
  ['Basic instead of Bearer', () => ({ authorization: `Basic ${keys.valid}` })],
  ['the admin token as a key', () => ({ authorization: `Bearer ${TEST_ADMIN_TOKEN}` })],
  ['a revoked named key', () => ({ 'x-api-key': keys.revoked! })],
  ['a regenerated primary key', () => ({ authorization: `Bearer ${keys.regenerated}` })],
  ['the key of a suspended account', () => ({ 'x-api-key': keys.suspended! })],
];

describe.each(CUSTOMER_ROUTES)('%s %s', (method, path, body) => {
  test.each(BAD_CREDENTIALS)('refuses %s with 401 {success:false, error}', async (_name, headers) => {
    const res = await call(api.url, path, { method, headers: headers(), ...(body ? { body } : {}) });
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ success: false, error: 'Invalid API key' });
  });

  test('accepts the primary key as X-API-Key, as a bearer token, and a named key alike', async () => {
    for (const options of [{ key: keys.valid! }, { key: keys.valid!, bearer: true }, { key: keys.named! }]) {
      const res = await call(api.url, path, { method, ...options, ...(body ? { body } : {}) });
      expect(res.status).toBe(200);
      expect(res.body.success).toBe(true);
    }
  });
});

describe('authentication comes before the body', () => {
  test.each([
    ['malformed JSON', '{bad', 'application/json'],
    ['a non-JSON content type', 'provider=basic', 'text/plain'],
  ])('an unauthenticated POST with %s gets 401, not 400 or 415', async (_name, body, contentType) => {
    for (const path of ['/api/v1/proxies/generate', '/admin/v1/accounts']) {
      const res = await call(api.url, path, {
        method: 'POST',
        body,
        headers: { 'content-type': contentType },
      });
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ success: false });
    }
  });

  test('an authenticated POST with malformed JSON still gets the JSON 400', async () => {
    const res = await call(api.url, '/api/v1/proxies/generate', { key: keys.valid!, body: '{bad' });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ success: false });
  });
});

describe('admin token', () => {
  test.each([
    ['no token', undefined],
    ['a wrong token', 'x'.repeat(40)],
    ['a customer key', 'KEY'],
    ['the token with a suffix', TEST_ADMIN_TOKEN + 'x'],
  ])('refuses %s with 401', async (_name, token) => {
    const admin = token === 'KEY' ? keys.valid! : token;
    const res = await call(api.url, '/admin/v1/accounts', { ...(admin !== undefined ? { admin } : {}) });
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ success: false, error: 'Invalid admin token' });
  });

  test('accepts the token', async () => {
    expect((await call(api.url, '/admin/v1/accounts', { admin: TEST_ADMIN_TOKEN })).status).toBe(200);
  });

  test('customer routes do not accept the admin token, admin routes no customer key', async () => {
    expect((await call(api.url, '/api/v1/account', { key: TEST_ADMIN_TOKEN, bearer: true })).status).toBe(
      401,
    );
    expect((await call(api.url, '/admin/v1/accounts', { key: keys.valid! })).status).toBe(401);
  });
});

describe('every mounted route, read from the router', () => {
  // Routes that need no credentials, on purpose.
  const PUBLIC = new Set(['GET /api/v1/openapi.json']);
  const fill = (path: string) => path.replace(/:\w+/g, '00000000-0000-4000-8000-000000000000');
  // The dashboard (its router is mounted at /, so its routes read `GET //sign-in`) signs people in
  // with a session cookie, not with keys or the admin token: its own suite covers that
  // (api/src/modules/dashboard). Every other route must be a key or admin-token route.
  const isDashboard = (r: string) => / \/\//.test(r);
  const routes = () => mountedRoutes(api.api.app).filter((r) => !PUBLIC.has(r) && !isDashboard(r));

  test('the router mounts the customer and admin routes this table covers', () => {
    const all = routes();
    expect(all.filter((r) => r.includes(' /api/v1/')).length).toBeGreaterThanOrEqual(4);
    expect(all.filter((r) => r.includes(' /admin/v1/')).length).toBeGreaterThanOrEqual(15);
    expect(all.every((r) => / \/(api|admin)\/v1\//.test(r))).toBe(true);
  });

  test('every customer route refuses every bad key with the same 401, every admin route every bad token', async () => {
    const failures: string[] = [];
    for (const route of routes()) {
      const [method, path] = route.split(' ') as [string, string];
      const body = method === 'GET' || method === 'DELETE' ? {} : { body: {} };
      const cases: [string, Parameters<typeof call>[2], string][] = path.startsWith('/api/v1/')
        ? BAD_CREDENTIALS.map(([name, headers]) => [
            name,
            { method, headers: headers(), ...body },
            'Invalid API key',
          ])
        : [
            ['no token', { method, ...body }, 'Invalid admin token'],
            ['a wrong token', { method, admin: 'x'.repeat(40), ...body }, 'Invalid admin token'],
            ['a customer key', { method, admin: keys.valid!, ...body }, 'Invalid admin token'],
            [
              'the token with a suffix',
              { method, admin: TEST_ADMIN_TOKEN + 'x', ...body },
              'Invalid admin token',
            ],
          ];
      for (const [name, options, error] of cases) {
        const res = await call(api.url, fill(path), options);
        if (res.status !== 401 || JSON.stringify(res.body) !== JSON.stringify({ success: false, error })) {
          failures.push(`${route} with ${name}: ${res.status} ${JSON.stringify(res.body)}`);
        }
      }
    }
    expect(failures).toEqual([]);
  });
});

describe('failed authentications per source address', () => {
  test('after the burst, failures get 429 with Retry-After; a valid key and the admin token keep working', async () => {
    await db.pool.query(`DELETE FROM api_rate_limits WHERE bucket LIKE 'authfail:%'`);
    const limited = await startTestApi(db, {
      env: { PROXYFLEET_AUTH_FAILURES_BURST: '3', PROXYFLEET_AUTH_FAILURES_PER_MINUTE: '1' },
    });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++)
        statuses.push(
          (await call(limited.url, '/api/v1/usage', { key: 'svc_live_' + '1'.repeat(48) })).status,
        );
      expect(statuses).toEqual([401, 401, 401, 429, 429]);
      const refused = await call(limited.url, '/api/v1/usage', { key: 'svc_live_' + '2'.repeat(48) });
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(refused.body).toEqual({
        success: false,
        error: expect.stringMatching(/^Too many requests, retry after \d+ seconds?$/),
      });
      expect((await call(limited.url, '/admin/v1/accounts', { admin: 'y'.repeat(40) })).status).toBe(429);
      // Failures are counted and throttled, but the address's customers and operator are not
      // locked out by someone else's guessing (docs/adr/0008).
      expect((await call(limited.url, '/api/v1/usage', { key: keys.valid! })).status).toBe(200);
      expect((await call(limited.url, '/admin/v1/accounts', { admin: TEST_ADMIN_TOKEN })).status).toBe(200);
    } finally {
      await limited.close();
      await db.pool.query(`DELETE FROM api_rate_limits WHERE bucket LIKE 'authfail:%'`);
    }
  });
});
