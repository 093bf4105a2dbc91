// Housekeeping: change_log rows are only needed for catch-up after a reconnect, and cache_acks
// rows of processes that died without saying goodbye only clutter the "n/n synced" count.
import type { Job } from '../jobs.ts';

export const CHANGE_LOG_RETENTION_DAYS = 7;
export const STALE_ACK_MINUTES = 60;

export const maintenanceJob: Job = {
  name: 'maintenance',
  intervalMs: 10 * 60_000,
  async run({ pool }) {
    await pool.query(`DELETE FROM change_log WHERE created_at < now() - make_interval(days => $1)`, [
      CHANGE_LOG_RETENTION_DAYS,
    ]);
    await pool.query(`DELETE FROM cache_acks WHERE updated_at < now() - make_interval(mins => $1)`, [
      STALE_ACK_MINUTES,
    ]);
  },
};
