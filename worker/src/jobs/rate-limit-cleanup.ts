// Worker job: rate-limit buckets (api_rate_limits, the API's shared limiter) untouched for a day
// are full again and carry no information.
import type { Job } from '../jobs.ts';

export const rateLimitCleanupJob: Job = {
  name: 'api-rate-limit-cleanup',
  intervalMs: 60 * 60_000,
  async run({ pool, logger }) {
    const { rowCount } = await pool.query(
      `DELETE FROM api_rate_limits WHERE updated_at < now() - interval '1 day'`,
    );
    const deleted = rowCount ?? 0;
    if (deleted > 0) logger.debug({ deleted }, 'idle rate-limit buckets deleted');
  },
};
