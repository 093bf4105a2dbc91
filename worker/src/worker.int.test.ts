// One active worker: of two workers on the same database only one runs jobs; when it stops, the
// other takes over. The maintenance job prunes what it should and nothing else.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { Health } from '#common/health.ts';
import { createLogger } from '#common/logger.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import type { Job } from './jobs.ts';
import { maintenanceJob } from './jobs/maintenance.ts';
import { startWorker, type RunningWorker } from './server.ts';
import { until } from '#test/process.ts';

describe('worker', () => {
  let db: TestDatabase;
  const workers: RunningWorker[] = [];
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.close()));
    await db.drop();
  });

  it('runs jobs in exactly one worker and fails over when it stops', async () => {
    const runs = { a: 0, b: 0 };
    const make = (name: 'a' | 'b') => {
      const job: Job = { name: 'count', intervalMs: 20, run: async () => void (runs[name] += 1) };
      const registry = new Registry();
      const worker = startWorker({
        pool: db.pool,
        databaseUrl: db.url,
        logger: createLogger('test', 'silent'),
        registry,
        health: new Health([registry]),
        jobs: [job],
      });
      workers.push(worker);
      return worker;
    };
    const a = make('a');
    await until(() => a.leading, 'a to lead');
    const b = make('b');
    await until(() => runs.a >= 5, 'a to run its job');
    expect(b.leading).toBe(false);
    expect(runs.b).toBe(0);
    await a.close();
    await until(() => b.leading && runs.b >= 3, 'b to take over');
  });

  it('prunes old change_log rows, stale cache acks and heartbeats, keeping recent ones', async () => {
    await db.pool.query(`INSERT INTO change_log (kind, account_id, subject, created_at)
      VALUES ('account', gen_random_uuid(), 'old', now() - interval '8 days'),
             ('account', gen_random_uuid(), 'new', now())`);
    await db.pool.query(`INSERT INTO cache_acks (instance, component, version, updated_at)
      VALUES ('gone', 'api', 1, now() - interval '2 hours'), ('here', 'api', 1, now())`);
    await db.pool.query(`INSERT INTO gateway_heartbeats (gateway_id, plan, boot_id, beat_at)
      VALUES ('gw-gone', 'basic', 'b', now() - interval '2 hours'), ('gw-here', 'basic', 'b', now())`);
    await maintenanceJob.run({ pool: db.pool, logger: createLogger('test', 'silent') });
    const beats = await db.pool.query(`SELECT gateway_id FROM gateway_heartbeats`);
    expect(beats.rows).toEqual([{ gateway_id: 'gw-here' }]);
    const log = await db.pool.query(`SELECT subject FROM change_log WHERE subject IN ('old', 'new')`);
    expect(log.rows).toEqual([{ subject: 'new' }]);
    const acks = await db.pool.query(`SELECT instance FROM cache_acks`);
    expect(acks.rows).toEqual([{ instance: 'here' }]);
  });
});
