import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import type { Pool } from '#common/db/pool.ts';
import { RateLimiter } from './limiter.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

/** Counts the statements the limiter sends. */
function countingPool(pool: Pool): { pool: Pool; calls: () => number } {
  let calls = 0;
  const wrapped = {
    query: (...args: Parameters<Pool['query']>) => (
      calls++,
      (pool.query as (...a: unknown[]) => unknown)(...args)
    ),
  } as unknown as Pool;
  return { pool: wrapped, calls: () => calls };
}

describe('RateLimiter', () => {
  test('grants exactly the burst, then refuses with the time until the next token', async () => {
    const limiter = new RateLimiter(db.pool, { name: 't', perMinute: 1, burst: 100 });
    const decisions = [];
    for (let i = 0; i < 150; i++) decisions.push(await limiter.take('exact'));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(100);
    const refused = decisions[149]!;
    expect(refused).toMatchObject({ allowed: false });
    if (!refused.allowed) expect(refused.retryAfterSeconds).toBeGreaterThan(50);
  });

  test('two limiters on one bucket share it (concurrent requests included)', async () => {
    const a = new RateLimiter(db.pool, { name: 't', perMinute: 1, burst: 200 });
    const b = new RateLimiter(db.pool, { name: 't', perMinute: 1, burst: 200 });
    const all = await Promise.all(Array.from({ length: 300 }, (_, i) => (i % 2 ? a : b).take('shared')));
    // Unspent leased tokens may be lost, never granted twice.
    const allowed = all.filter((d) => d.allowed).length;
    expect(allowed).toBeLessThanOrEqual(200);
    expect(allowed).toBeGreaterThanOrEqual(200 - 2 * 20);
  });

  test('leases grow with the rate: far fewer statements than requests', async () => {
    const counted = countingPool(db.pool);
    const limiter = new RateLimiter(counted.pool, { name: 't', perMinute: 6_000_000, burst: 100_000 });
    for (let i = 0; i < 5_000; i++) expect((await limiter.take('busy')).allowed).toBe(true);
    expect(counted.calls()).toBeLessThan(30);
  });

  test('buckets are independent', async () => {
    const limiter = new RateLimiter(db.pool, { name: 't', perMinute: 1, burst: 1 });
    expect((await limiter.take('x1')).allowed).toBe(true);
    expect((await limiter.take('x1')).allowed).toBe(false);
    expect((await limiter.take('x2')).allowed).toBe(true);
  });
});

describe('cleanup job', () => {
  test('deletes buckets idle for a day, keeps the rest', async () => {
    const { rateLimitCleanupJob } = await import('../../../../worker/src/jobs/rate-limit-cleanup.ts');
    await db.pool.query(
      `INSERT INTO api_rate_limits (bucket, tat_us, updated_at) VALUES ('old', 0, now() - interval '2 days'), ('new', 0, now())`,
    );
    const { createLogger } = await import('#common/logger.ts');
    await rateLimitCleanupJob.run({ pool: db.pool, logger: createLogger('test', 'silent') });
    const { rows } = await db.pool.query(`SELECT bucket FROM api_rate_limits WHERE bucket IN ('old', 'new')`);
    expect(rows).toEqual([{ bucket: 'new' }]);
  });
});
