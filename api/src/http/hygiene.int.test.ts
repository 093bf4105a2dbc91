import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { call, startTestApi, type TestApi } from '#test/api.ts';

let db: TestDatabase;
let api: TestApi;
let key: string;

beforeAll(async () => {
  db = await createTestDatabase();
  api = await startTestApi(db, { env: { PROXYFLEET_API_BODY_LIMIT_BYTES: '1024' } });
  key = (await accountWithBandwidth(db.pool, { basic: 1e9 })).apiKey;
});
afterAll(async () => {
  await api.close();
  await db.drop();
});

describe('HTTP hygiene', () => {
  test('unknown routes answer a JSON 404, known paths with another method a 405 with Allow', async () => {
    expect(await call(api.url, '/api/v1/nothing')).toMatchObject({
      status: 404,
      body: { success: false, error: 'Not found' },
    });
    // `/` is the customer dashboard (docs/adr/0050): signed out, its sign-in page.
    expect(await call(api.url, '/')).toMatchObject({
      status: 200,
      body: expect.stringContaining('<h1>Sign in</h1>'),
    });
    expect(await call(api.url, '/nothing-here')).toMatchObject({ status: 404, body: { success: false } });
    const res = await call(api.url, '/api/v1/usage', { method: 'POST', key, body: {} });
    expect(res).toMatchObject({ status: 405, body: { success: false, error: 'Method not allowed' } });
    expect(res.headers.get('allow')).toBe('GET, HEAD');
    expect((await call(api.url, '/admin/v1/accounts/x/keys/y', { method: 'PUT' })).headers.get('allow')).toBe(
      'DELETE',
    );
  });

  test('bodies above the limit are 413', async () => {
    const res = await call(api.url, '/api/v1/proxies/generate', {
      key,
      body: { provider: 'basic', country: 'us', sessionType: 'rotating', count: 1, pad: 'x'.repeat(2000) },
    });
    expect(res).toMatchObject({ status: 413, body: { success: false, error: 'Request body is too large' } });
  });

  test('security headers, a request id (echoed when safe), no x-powered-by', async () => {
    const res = await call(api.url, '/api/v1/usage', { key, headers: { 'x-request-id': 'trace-123' } });
    expect(res.headers.get('x-request-id')).toBe('trace-123');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    // /usage says how long its snapshot stays fresh (docs/api.md); every other answer is no-store.
    expect(res.headers.get('cache-control')).toMatch(/^private, max-age=\d+$/);
    expect((await call(api.url, '/api/v1/account', { key })).headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(res.headers.get('x-powered-by')).toBeNull();
    const unsafe = await call(api.url, '/api/v1/usage', {
      key,
      headers: { 'x-request-id': 'bad id\twith spaces' },
    });
    expect(unsafe.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  test('rate-limit headers on every authenticated answer', async () => {
    const res = await call(api.url, '/api/v1/usage', { key });
    expect(res.headers.get('ratelimit-policy')).toBe('"key";q=60;w=6');
    expect(res.headers.get('ratelimit')).toMatch(/^"key";r=\d+;t=\d+$/);
  });

  test('/readyz reports the cache version; /metrics has the API metrics', async () => {
    const ready = await call(api.url, '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body.info.cacheVersion).toEqual(expect.any(Number));
    await call(api.url, '/api/v1/usage', { key: 'svc_live_' + 'a'.repeat(48) });
    const metrics = (await call(api.url, '/metrics')).body as string;
    expect(metrics).toContain(
      'proxyfleet_api_request_duration_seconds_count{component="api",route="/api/v1/usage",method="GET",status_class="2xx"}',
    );
    expect(metrics).toContain('proxyfleet_api_auth_failures_total{reason="unknown",component="api"}');
    expect(metrics).toContain('proxyfleet_api_rate_limited_total');
    expect(metrics).toContain('proxyfleet_api_cache_version');
  });
});

describe('/api/v1/openapi.json', () => {
  test('documents every route with the schemas the server validates with', async () => {
    const res = await call(api.url, '/api/v1/openapi.json');
    expect(res.status).toBe(200);
    const doc = res.body;
    expect(doc.openapi).toBe('3.0.3');
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/api/v1/account',
        '/api/v1/usage',
        '/api/v1/proxies/list',
        '/api/v1/proxies/generate',
        '/admin/v1/accounts',
        '/admin/v1/accounts/{id}/purchases',
        '/admin/v1/accounts/{id}/keys/{keyId}',
      ]),
    );
    const generate = doc.paths['/api/v1/proxies/generate'].post;
    const body = generate.requestBody.content['application/json'].schema;
    expect(body.properties.provider.enum).toEqual(['light', 'basic', 'advanced', 'mobile', 'datacenter']);
    expect(body.properties.count.maximum).toBe(1000);
    expect(Object.keys(generate.responses).sort()).toEqual([
      '200',
      '400',
      '401',
      '403',
      '404',
      '409',
      '413',
      '415',
      '429',
    ]);
    const usage = doc.paths['/api/v1/usage'].get.responses['200'].content['application/json'].schema;
    expect(usage.required).toEqual(
      expect.arrayContaining(['products', 'dataUsedMb', 'percentUsed', 'requestsCount', 'updatedAt']),
    );
  });
});
