// Worker job: usage history (migrations/0145, docs/adr/0103) keeps hours for
// PROXYFLEET_USAGE_HISTORY_HOURLY_DAYS (90 by default) and days for
// PROXYFLEET_USAGE_HISTORY_DAILY_DAYS (400), the current hour and day included; older buckets are
// deleted hourly. In a steady state a run deletes one hour's rows, so one statement per table is
// enough; a shortened retention deletes its backlog once, in that one run.
import type { Job } from '../jobs.ts';

export interface UsageHistoryRetention {
  hourlyDays: number;
  dailyDays: number;
}

export function usageHistoryRetentionJob(retention: UsageHistoryRetention): Job {
  return {
    name: 'usage-history-retention',
    intervalMs: 60 * 60_000,
    async run({ pool, logger }) {
      const hours = await pool.query(
        `DELETE FROM usage_history_hourly WHERE hour < date_trunc('hour', now()) - make_interval(days => $1)`,
        [retention.hourlyDays],
      );
      const days = await pool.query(
        `DELETE FROM usage_history_daily WHERE day <= (now() AT TIME ZONE 'UTC')::date - $1::int`,
        [retention.dailyDays],
      );
      const deleted = { hourly: hours.rowCount ?? 0, daily: days.rowCount ?? 0 };
      if (deleted.hourly || deleted.daily)
        logger.info({ deleted, ...retention }, 'usage history past retention deleted');
    },
  };
}
