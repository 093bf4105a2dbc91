// Worker job: target statistics (target_usage, migrations/0082) are kept for 30 days, today (UTC)
// included (docs/adr/0026); older days are deleted. Hourly: a day's rows go within the hour after
// midnight UTC ends their 30th day.
import { TARGET_RETENTION_DAYS } from '#common/target-stats.ts';
import type { Job } from '../jobs.ts';

export const targetRetentionJob: Job = {
  name: 'target-usage-retention',
  intervalMs: 60 * 60_000,
  async run({ pool, logger }) {
    const { rowCount } = await pool.query(
      `DELETE FROM target_usage WHERE day < (now() AT TIME ZONE 'UTC')::date - ($1::int - 1)`,
      [TARGET_RETENTION_DAYS],
    );
    const deleted = rowCount ?? 0;
    if (deleted > 0) logger.info({ deleted }, 'target statistics past retention deleted');
  },
};
