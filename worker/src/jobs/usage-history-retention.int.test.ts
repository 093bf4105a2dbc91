import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createLogger } from '#common/logger.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { loadWorkerConfig } from '../config.ts';
import { usageHistoryRetentionJob } from './usage-history-retention.ts';

describe('usage history retention', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db.drop());
  const logger = createLogger('test', 'silent');

  it('keeps hours for hourlyDays and days for dailyDays, deleting the older buckets only', async () => {
    const account = await accountWithBandwidth(db.pool);
    // One row an hour and a day at each age, written by the gateways' function.
    const ages = [0, 89, 91, 399, 401];
    await db.pool.query(
      `SELECT usage_history_record(jsonb_agg(jsonb_build_object('account_id', $1::uuid, 'product', 'basic',
                'hour', now() - make_interval(days => d), 'counts', '[1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0]'::jsonb)))
         FROM unnest($2::int[]) d`,
      [account.id, ages],
    );
    const kept = async (table: string, column: string) =>
      (
        await db.pool.query<{ days: number }>(
          `SELECT ((now() AT TIME ZONE 'UTC')::date - ${column}::date) AS days FROM ${table}
            WHERE account_id = $1 ORDER BY ${column} DESC`,
          [account.id],
        )
      ).rows.map((r) => r.days);
    expect(await kept('usage_history_hourly', 'hour')).toEqual(ages);
    const config = loadWorkerConfig({});
    expect([config.PROXYFLEET_USAGE_HISTORY_HOURLY_DAYS, config.PROXYFLEET_USAGE_HISTORY_DAILY_DAYS]).toEqual(
      [90, 400],
    );
    await usageHistoryRetentionJob({ hourlyDays: 90, dailyDays: 400 }).run({ pool: db.pool, logger });
    expect(await kept('usage_history_hourly', 'hour')).toEqual([0, 89]);
    expect(await kept('usage_history_daily', 'day')).toEqual([0, 89, 91, 399]);
  });
});
