// What a flush costs the database: one round trip for all of a pod's customers, and one after an
// outage for every batch queued meanwhile (docs/adr/0090), counted through an intercepting pool
// against a real database.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import type { Pool } from '#common/db/pool.ts';
import { createLogger } from '#common/logger.ts';
import { createInterceptedPool, createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { createGatewayMetrics } from '../metrics.ts';
import { UsageFlusher } from './flusher.ts';

let db: TestDatabase;
let pool: Pool;
/** The statements the flusher sent, in order. */
const sent: string[] = [];
/** While true, every statement fails: the database is down. */
let down = false;

beforeAll(async () => {
  db = await createTestDatabase();
  pool = createInterceptedPool(db.url, 'flusher-test', (sql) => {
    sent.push(sql);
    return down ? Promise.reject(new Error('database down (test)')) : undefined;
  });
});
afterAll(async () => {
  await pool.end();
  await db.drop();
});

function flusher(gatewayId: string): UsageFlusher {
  return new UsageFlusher({
    pool,
    gatewayId,
    plan: 'basic',
    logger: createLogger('test', 'silent'),
    metrics: createGatewayMetrics(new Registry()),
  });
}

async function recorded(gatewayId: string): Promise<{ batches: number; bytes: number }> {
  const { rows } = await db.pool.query<{ batches: number; bytes: number }>(
    `SELECT count(DISTINCT b.id)::int AS batches, coalesce(sum(l.bytes_up + l.bytes_down), 0)::bigint AS bytes
       FROM usage_batches b LEFT JOIN usage_batch_lines l ON l.batch_id = b.id WHERE b.gateway_id = $1`,
    [gatewayId],
  );
  return { batches: rows[0]!.batches, bytes: Number(rows[0]!.bytes) };
}

describe('UsageFlusher', () => {
  it('flushes every customer of the pod in one round trip', async () => {
    const accounts = await Promise.all([1, 2, 3, 4, 5].map(() => accountWithBandwidth(db.pool)));
    const f = flusher('flusher-many-customers');
    f.begin();
    for (const a of accounts) f.addLine(a.id, 'basic', 100, 900, 1);
    f.end();
    sent.length = 0;
    expect(await f.send()).toBe(true);
    expect(sent).toHaveLength(1);
    expect(await recorded('flusher-many-customers')).toEqual({ batches: 1, bytes: 5_000 });
  });

  it('after an outage, sends every batch queued meanwhile in one round trip, in order, once', async () => {
    const account = await accountWithBandwidth(db.pool);
    const f = flusher('flusher-outage');
    down = true;
    try {
      // Three flushes fail: their usage waits in the queue, in more than one batch.
      for (let i = 0; i < 3; i++) {
        f.begin();
        f.addLine(account.id, 'basic', 10, 90, 1);
        f.end();
        expect(await f.send()).toBe(false);
      }
    } finally {
      down = false;
    }
    const queued = f.unsent;
    expect(queued).toBeGreaterThan(1);
    sent.length = 0;
    expect(await f.send()).toBe(true);
    expect(sent).toHaveLength(1);
    expect(f.unsent).toBe(0);
    expect(await recorded('flusher-outage')).toEqual({ batches: queued, bytes: 300 });
    // Nothing left to send: the database is not asked.
    sent.length = 0;
    expect(await f.send()).toBeUndefined();
    expect(sent).toHaveLength(0);
  });
  it('a queued batch that did land before (its answer lost) is not billed twice', async () => {
    const account = await accountWithBandwidth(db.pool);
    const line = (up: number) =>
      JSON.stringify([
        { account_id: account.id, product: 'basic', bytes_up: up, bytes_down: 0, requests: 1 },
      ]);
    // The first batch landed, but the gateway never heard (its connection died with the answer).
    await db.pool.query("SELECT usage_record('landed-1', 'flusher-retry', $1, '[]', '[]')", [line(7)]);
    const { rows } = await db.pool.query<{ n: number }>('SELECT usage_record_many($1, $2::jsonb) AS n', [
      'flusher-retry',
      JSON.stringify([
        { key: 'landed-1', lines: JSON.parse(line(7)) },
        { key: 'landed-2', lines: JSON.parse(line(11)) },
      ]),
    ]);
    expect(rows[0]!.n).toBe(1);
    expect(await recorded('flusher-retry')).toEqual({ batches: 2, bytes: 18 });
  });
});
