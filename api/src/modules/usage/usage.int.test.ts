import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { call, startTestApi, type TestApi } from '#test/api.ts';

let db: TestDatabase;
let api: TestApi;
let other: TestApi;

beforeAll(async () => {
  db = await createTestDatabase();
  api = await startTestApi(db, { env: { PROXYFLEET_USAGE_REFRESH_SECONDS: '3600' } });
  other = await startTestApi(db, { env: { PROXYFLEET_USAGE_REFRESH_SECONDS: '3600' } });
});
afterAll(async () => {
  await api.close();
  await other.close();
  await db.drop();
});

/** What the gateway's usage folding does to balances. */
const use = (accountId: string, product: string, bytes: number, requests: number) =>
  db.pool.query(
    'UPDATE balances SET used_bytes = used_bytes + $3, requests_count = requests_count + $4 WHERE account_id = $1 AND product = $2',
    [accountId, product, bytes, requests],
  );

describe('GET /api/v1/usage', () => {
  test('the spec shape: five products, zeros where nothing was bought', async () => {
    const account = await accountWithBandwidth(db.pool);
    const res = await call(api.url, '/api/v1/usage', { key: account.apiKey });
    expect(res.status).toBe(200);
    const zero = { totalGb: 0, usedGb: 0, remainingGb: 0 };
    expect(res.body).toEqual({
      success: true,
      products: { light: zero, basic: zero, advanced: zero, mobile: zero, datacenter: zero },
      dataUsedMb: 0,
      dataLimitMb: 0,
      dataRemainingMb: 0,
      percentUsed: 0,
      requestsCount: 0,
      updatedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
  });

  test('GB = 10^9 and MB = 10^6 bytes, percent with two decimals, integer requests', async () => {
    const account = await accountWithBandwidth(db.pool, { basic: 2e9, advanced: 1e9 });
    await use(account.id, 'basic', 250_000_000, 7);
    await use(account.id, 'advanced', 1_000_000, 3);
    const res = await call(api.url, '/api/v1/usage', { key: account.apiKey });
    expect(res.body.products.basic).toEqual({ totalGb: 2, usedGb: 0.25, remainingGb: 1.75 });
    expect(res.body.products.advanced).toEqual({ totalGb: 1, usedGb: 0.001, remainingGb: 0.999 });
    expect(res.body).toMatchObject({
      dataUsedMb: 251,
      dataLimitMb: 3000,
      dataRemainingMb: 2749,
      percentUsed: 8.37,
      requestsCount: 10,
    });
  });

  test('over-use never reports negative remaining bandwidth', async () => {
    const account = await accountWithBandwidth(db.pool, { light: 1e9 });
    await use(account.id, 'light', 1_100_000_000, 1);
    const res = await call(api.url, '/api/v1/usage', { key: account.apiKey });
    expect(res.body.products.light).toEqual({ totalGb: 1, usedGb: 1.1, remainingGb: 0 });
    expect(res.body.dataRemainingMb).toBe(0);
  });

  test('remaining is rounded down, never to 0 while bytes remain (docs/api.md, "Remaining bandwidth")', async () => {
    // 246,388 B left answered remainingGb 0 while traffic still flowed; 1,999,999,999 B answered 2.
    const account = await accountWithBandwidth(db.pool, { basic: 1e9, advanced: 2e9 });
    await use(account.id, 'basic', 1e9 - 246_388, 1);
    await use(account.id, 'advanced', 1, 1);
    const res = await call(api.url, '/api/v1/usage', { key: account.apiKey });
    expect(res.body.products.basic.remainingGb).toBe(0.000246);
    expect(res.body.products.advanced.remainingGb).toBe(1.999);
    expect(res.body.dataRemainingMb).toBe(2000.24);
  });

  test('one snapshot shared by every API process, not recomputed within the interval', async () => {
    const account = await accountWithBandwidth(db.pool, { basic: 1e9 });
    const first = await call(api.url, '/api/v1/usage', { key: account.apiKey });
    await use(account.id, 'basic', 500_000_000, 5);
    const second = await call(other.url, '/api/v1/usage', { key: account.apiKey });
    expect(second.body).toEqual(first.body);
    expect(second.body.products.basic.usedGb).toBe(0);
  });

  test('Cache-Control says in how many seconds a fresher snapshot is due, per account and never shared', async () => {
    const account = await accountWithBandwidth(db.pool, { basic: 1e9 });
    const first = await call(api.url, '/api/v1/usage', { key: account.apiKey });
    const maxAge = (res: typeof first) =>
      Number(/^private, max-age=(\d+)$/.exec(res.headers.get('cache-control') ?? '')?.[1]);
    // Just computed: the whole interval (3,600 s here), less the second it may have taken.
    expect(maxAge(first)).toBeGreaterThanOrEqual(3_599);
    expect(maxAge(first)).toBeLessThanOrEqual(3_600);
    // A snapshot computed 10 minutes ago, read by a process that has not seen it: 3,000 s left.
    await db.pool.query(
      "UPDATE api_usage_snapshots SET computed_at = computed_at - interval '600 seconds' WHERE account_id = $1",
      [account.id],
    );
    const aged = await call(other.url, '/api/v1/usage', { key: account.apiKey });
    expect(maxAge(aged)).toBeGreaterThanOrEqual(2_999);
    expect(maxAge(aged)).toBeLessThanOrEqual(3_000);
    // Other answers stay uncached.
    const refused = await call(api.url, '/api/v1/usage', { key: 'svc_live_' + '0'.repeat(48) });
    expect(refused.headers.get('cache-control')).toBe('no-store');
  });

  test('recomputed once the interval has passed, and updatedAt says when', async () => {
    const short = await startTestApi(db, { env: { PROXYFLEET_USAGE_REFRESH_SECONDS: '1' } });
    try {
      const account = await accountWithBandwidth(db.pool, { basic: 1e9 });
      const first = await call(short.url, '/api/v1/usage', { key: account.apiKey });
      await use(account.id, 'basic', 500_000_000, 5);
      await sleep(1_100);
      const second = await call(short.url, '/api/v1/usage', { key: account.apiKey });
      expect(second.body.products.basic.usedGb).toBe(0.5);
      expect(second.body.requestsCount).toBe(5);
      expect(Date.parse(second.body.updatedAt) - Date.parse(first.body.updatedAt)).toBeGreaterThanOrEqual(
        1_000,
      );
    } finally {
      await short.close();
    }
  });
});
