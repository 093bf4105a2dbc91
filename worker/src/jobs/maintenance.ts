// Housekeeping: change_log rows are only needed for catch-up after a reconnect, and cache_acks
// rows of processes that died without saying goodbye only clutter the "n/n synced" count; nor do
// the heartbeat rows of gateways long dead once their leases are back (migrations/0080).
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
    await pool.query(
      `DELETE FROM gateway_heartbeats h WHERE h.beat_at < now() - make_interval(mins => $1)
          AND NOT EXISTS (SELECT 1 FROM bandwidth_leases l WHERE l.gateway_id = h.gateway_id AND l.released_at IS NULL)`,
      [STALE_ACK_MINUTES],
    );
  },
};
