// Worker job: rate-limit buckets untouched for a day are full again and carry no information.
import type { Job } from '../../../../worker/src/jobs.ts';
import { deleteIdleBuckets } from './repo.ts';

export const rateLimitCleanupJob: Job = {
  name: 'api-rate-limit-cleanup',
  intervalMs: 60 * 60_000,
  async run({ pool, logger }) {
    const deleted = await deleteIdleBuckets(pool);
    if (deleted > 0) logger.debug({ deleted }, 'idle rate-limit buckets deleted');
  },
};
