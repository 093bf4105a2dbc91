// Two real API processes (`node api/src/main.ts`) on one database, as two pods would be: a key
// revoked or regenerated through one is refused by the other on the very next request, and the
// per-key rate limit is one limit, not one per process.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { exampleEmail, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { call, spawnApi, type ChildApi } from '#test/api.ts';

let db: TestDatabase;
let one: ChildApi;
let two: ChildApi;

const BURST = 10;

beforeAll(async () => {
  db = await createTestDatabase();
  // One token a minute: nothing refills while the test runs, so the counts are exact.
  const env = { PROXYFLEET_RATE_LIMIT_BURST: String(BURST), PROXYFLEET_RATE_LIMIT_PER_MINUTE: '1' };
  [one, two] = await Promise.all([spawnApi(db.url, env), spawnApi(db.url, env)]);
}, 60_000);

afterAll(async () => {
  await Promise.all([one?.close(), two?.close()]);
  await db.drop();
});

const admin = (api: ChildApi, path: string, options: Parameters<typeof call>[2] = {}) =>
  call(api.url, `/admin/v1${path}`, { admin: TEST_ADMIN_TOKEN, ...options });

describe('two API processes', () => {
  test('both report themselves in cache_acks', async () => {
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM cache_acks WHERE component = 'api'`,
    );
    expect(rows[0]!.n).toBe(2);
  });

  test('a named key revoked through one process is refused by the other on the next request', async () => {
    const account = (await admin(one, '/accounts', { body: { email: exampleEmail() } })).body as {
      id: string;
    };
    const key = (await admin(one, `/accounts/${account.id}/keys`, { body: { name: 'ci' } })).body as {
      id: string;
      apiKey: string;
    };
    // Warm the other process's cache with the key.
    expect((await call(two.url, '/api/v1/account', { key: key.apiKey })).status).toBe(200);
    expect((await call(two.url, '/api/v1/account', { key: key.apiKey })).status).toBe(200);
    const revoked = await admin(one, `/accounts/${account.id}/keys/${key.id}`, { method: 'DELETE' });
    expect(revoked.status).toBe(204);
    expect(revoked.headers.get('proxyfleet-cache-sync')).toBe('2/2');
    expect((await call(two.url, '/api/v1/account', { key: key.apiKey })).status).toBe(401);
    expect((await call(one.url, '/api/v1/account', { key: key.apiKey })).status).toBe(401);
  });

  test('a regenerated primary key and a suspension take effect on the other process at once', async () => {
    const account = (await admin(one, '/accounts', { body: { email: exampleEmail() } })).body as {
      id: string;
      apiKey: string;
    };
    expect((await call(two.url, '/api/v1/usage', { key: account.apiKey })).status).toBe(200);
    const regenerated = await admin(one, `/accounts/${account.id}/keys/primary/regenerate`, {
      method: 'POST',
    });
    expect((await call(two.url, '/api/v1/usage', { key: account.apiKey })).status).toBe(401);
    const fresh = regenerated.body.apiKey as string;
    expect((await call(two.url, '/api/v1/usage', { key: fresh })).status).toBe(200);
    await admin(one, `/accounts/${account.id}/suspend`, { method: 'POST' });
    expect((await call(two.url, '/api/v1/usage', { key: fresh })).status).toBe(401);
    await admin(two, `/accounts/${account.id}/reactivate`, { method: 'POST' });
    expect((await call(one.url, '/api/v1/usage', { key: fresh })).status).toBe(200);
  });

  test('the per-key rate limit holds across both processes', async () => {
    const account = (await admin(one, '/accounts', { body: { email: exampleEmail() } })).body as {
      apiKey: string;
    };
    const statuses: number[] = [];
    let lastRefusal: Awaited<ReturnType<typeof call>> | undefined;
    for (let i = 0; i < BURST + 5; i++) {
      const res = await call((i % 2 === 0 ? one : two).url, '/api/v1/usage', { key: account.apiKey });
      statuses.push(res.status);
      if (res.status === 429) lastRefusal = res;
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(BURST);
    expect(statuses.slice(BURST)).toEqual([429, 429, 429, 429, 429]);
    expect(Number(lastRefusal!.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(lastRefusal!.headers.get('ratelimit-policy')).toBe(`"key";q=${BURST};w=${BURST * 60}`);
    expect(lastRefusal!.headers.get('ratelimit')).toMatch(/^"key";r=0;t=\d+$/);
    expect(lastRefusal!.body).toEqual({
      success: false,
      error: expect.stringMatching(/^Too many requests, retry after \d+ seconds?$/),
    });
  });
});
