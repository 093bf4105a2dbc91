import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createLogger } from '#common/logger.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { loadWorkerConfig } from '../config.ts';
import { auditRetentionJob } from './audit-retention.ts';

describe('audit log retention', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db.drop());
  const logger = createLogger('test', 'silent');

  /** Entries of the account aged `days` (now minus days), one per age. */
  async function entriesAged(accountId: string, days: number[]): Promise<void> {
    await db.pool.query(
      `INSERT INTO audit_log (account_id, at, actor_kind, actor_id, action)
       SELECT $1, now() - make_interval(days => d), 'system', 'test', 'test.aged' FROM unnest($2::int[]) d`,
      [accountId, days],
    );
  }
  const ages = async (accountId: string) =>
    (
      await db.pool.query<{ days: number }>(
        `SELECT round(extract(epoch FROM now() - at) / 86400)::int AS days FROM audit_log
          WHERE account_id = $1 ORDER BY at DESC`,
        [accountId],
      )
    ).rows.map((r) => r.days);

  it('deletes entries older than the retention and keeps the rest', async () => {
    const account = await accountWithBandwidth(db.pool);
    await entriesAged(account.id, [0, 1, 399, 401, 500]);
    await auditRetentionJob({ retentionDays: 400 }).run({ pool: db.pool, logger });
    expect(await ages(account.id)).toEqual([0, 1, 399]);
  });

  it('deletes in bounded batches, at most maxBatches per run; the next run goes on', async () => {
    await db.pool.query('DELETE FROM audit_log'); // this file's database: only this test's entries
    const account = await accountWithBandwidth(db.pool);
    await entriesAged(account.id, [2, 10, 11, 12, 13, 14]);
    const job = auditRetentionJob({ retentionDays: 5, batch: 2, maxBatches: 2 });
    await job.run({ pool: db.pool, logger });
    expect(await ages(account.id)).toEqual([2, 10]); // two batches of two, the oldest first: 14, 13, 12, 11
    await job.run({ pool: db.pool, logger });
    expect(await ages(account.id)).toEqual([2]);
  });

  it('keeps 400 days unless PROXYFLEET_AUDIT_RETENTION_DAYS says otherwise, and refuses nonsense', () => {
    expect(loadWorkerConfig({}).PROXYFLEET_AUDIT_RETENTION_DAYS).toBe(400);
    expect(loadWorkerConfig({ PROXYFLEET_AUDIT_RETENTION_DAYS: '30' }).PROXYFLEET_AUDIT_RETENTION_DAYS).toBe(
      30,
    );
    for (const bad of ['0', '-1', 'a year', '1.5'])
      expect(() => loadWorkerConfig({ PROXYFLEET_AUDIT_RETENTION_DAYS: bad })).toThrow(
        /PROXYFLEET_AUDIT_RETENTION_DAYS/,
      );
  });
});
