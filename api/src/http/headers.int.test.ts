// docs/security.md, "Headers": X-Frame-Options DENY on every response (API, admin, dashboard
// page, asset-less 404), matching frame-ancestors 'none'; Strict-Transport-Security only on a
// response that goes over HTTPS, which the API learns from req.secure: X-Forwarded-Proto counts
// only from a trusted proxy hop (PROXYFLEET_API_TRUST_PROXY_HOPS), never PROXYFLEET_DASHBOARD_HTTPS.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestApi, type TestApi } from '#test/api.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';

let db: TestDatabase;
let direct: TestApi;
let behindProxy: TestApi;
let key: string;

beforeAll(async () => {
  db = await createTestDatabase();
  // Both declare the dashboard HTTPS (cookies): only the proxied one may believe X-Forwarded-Proto.
  direct = await startTestApi(db, { env: { PROXYFLEET_DASHBOARD_HTTPS: 'true' } });
  behindProxy = await startTestApi(db, {
    env: { PROXYFLEET_DASHBOARD_HTTPS: 'true', PROXYFLEET_API_TRUST_PROXY_HOPS: '1' },
  });
  key = (await accountWithBandwidth(db.pool)).apiKey;
});
afterAll(async () => {
  await direct?.close();
  await behindProxy?.close();
  await db?.drop();
});

const paths: [string, () => Record<string, string>][] = [
  ['/api/v1/usage', () => ({ 'x-api-key': key })],
  ['/admin/v1/accounts', () => ({ authorization: `Bearer ${TEST_ADMIN_TOKEN}` })],
  ['/sign-in', () => ({})],
  ['/forgot-password', () => ({})],
  ['/', () => ({})],
  ['/no-such-page', () => ({})],
  ['/healthz', () => ({})],
];

const headersOf = async (api: TestApi, path: string, headers: Record<string, string>) => {
  const res = await fetch(api.url + path, { headers, redirect: 'manual' });
  await res.arrayBuffer();
  return {
    status: res.status < 500,
    frame: res.headers.get('x-frame-options'),
    hsts: res.headers.get('strict-transport-security'),
  };
};

describe.each(paths)('%s', (path, headers) => {
  it('is never framed and has no HSTS over plain HTTP', async () => {
    expect(await headersOf(direct, path, headers())).toEqual({ status: true, frame: 'DENY', hsts: null });
  });

  it('ignores X-Forwarded-Proto from an untrusted client', async () => {
    const forged = { ...headers(), 'x-forwarded-proto': 'https' };
    expect(await headersOf(direct, path, forged)).toEqual({ status: true, frame: 'DENY', hsts: null });
  });

  it('sends HSTS over HTTPS (a trusted proxy says so)', async () => {
    const secure = { ...headers(), 'x-forwarded-proto': 'https' };
    expect(await headersOf(behindProxy, path, secure)).toEqual({
      status: true,
      frame: 'DENY',
      hsts: 'max-age=31536000; includeSubDomains',
    });
    expect((await headersOf(behindProxy, path, headers())).hsts).toBeNull();
  });
});
