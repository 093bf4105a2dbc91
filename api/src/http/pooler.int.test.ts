// The API behind PgBouncer (docs/adr/0068): it serves through the transaction pool, answers 503
// (not 500) while PgBouncer cannot reach the server (PgBouncer's own errors are SQLSTATE 08P01),
// and serves again once it can, without a restart.
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { createPool, DEFAULT_QUERY_TIMEOUT_MS, statementTimeoutFor, type Pool } from '#common/db/pool.ts';
import { createLogger } from '#common/logger.ts';
import { call, startTestApi, type TestApi } from '#test/api.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { SESSION_DATABASE, startProxyfleetBouncer, type ProxyfleetBouncer } from '#test/pgbouncer.ts';
import { freePort } from '#test/ports.ts';
import { until } from '#test/process.ts';

let db: TestDatabase;
let pgb: ProxyfleetBouncer;
let pool: Pool;
let api: TestApi;

beforeAll(async () => {
  db = await createTestDatabase();
  pgb = await startProxyfleetBouncer(db.url, {
    statementTimeoutMs: statementTimeoutFor(DEFAULT_QUERY_TIMEOUT_MS),
  });
  pool = createPool({
    url: pgb.pooledUrl,
    max: 10,
    applicationName: 'proxyfleet-api',
    logger: createLogger('test', 'silent'),
    pooling: 'transaction',
  });
  api = await startTestApi({ url: pgb.sessionUrl, pool });
});

afterAll(async () => {
  await api?.close();
  await pool?.end();
  await pgb?.bouncer.stop();
  await db?.drop();
});

it('answers 503 while PgBouncer cannot reach the server, and serves again after', async () => {
  const created = await call(api.url, '/admin/v1/accounts', {
    admin: TEST_ADMIN_TOKEN,
    body: { email: 'pooled@example.com' },
  });
  expect(created.status).toBe(201);
  const key = (created.body as { apiKey: string }).apiKey;
  expect((await call(api.url, '/api/v1/usage', { key })).status).toBe(200);

  const server = new URL(db.url);
  await pgb.bouncer.repoint({ host: '127.0.0.1', port: await freePort() });
  // Session clients keep their server connection until they go: end them, as a server that
  // stopped would.
  await pgb.bouncer.kill(SESSION_DATABASE);
  // Every answer while the database is away is a 503: the first (PgBouncer's query_wait_timeout,
  // SQLSTATE 08P01) as the later ones (the pool's own connection timeout).
  let usage: { status: number; body: unknown } = { status: 200, body: undefined };
  await until(
    async () => (usage = await call(api.url, '/api/v1/usage', { key })).status !== 200,
    'the API to need the database',
    15_000,
  );
  const later = await call(api.url, '/api/v1/usage', { key });
  const admin = await call(api.url, '/admin/v1/accounts', {
    admin: TEST_ADMIN_TOKEN,
    body: { email: 'later@example.com' },
  });
  expect([usage.status, usage.body]).toEqual([
    503,
    { success: false, error: 'Service temporarily unavailable' },
  ]);
  expect([later.status, admin.status]).toEqual([503, 503]);

  await pgb.bouncer.repoint({ host: server.hostname, port: Number(server.port) });
  await until(
    async () => (await call(api.url, '/api/v1/usage', { key })).status === 200,
    'the API to serve again',
    15_000,
  );
  expect(
    (
      await call(api.url, '/admin/v1/accounts', {
        admin: TEST_ADMIN_TOKEN,
        body: { email: 'later@example.com' },
      })
    ).status,
  ).toBe(201);
}, 90_000);
