// Worker job: audit log entries (audit_log, migrations/0110) are kept
// PROXYFLEET_AUDIT_RETENTION_DAYS (400 by default; docs/security.md "Audit log"), then deleted.
// Hourly, in batches of AUDIT_DELETE_BATCH rows, each its own short transaction (a backlog after
// the retention was shortened never holds many row locks or one long transaction), at most
// AUDIT_MAX_BATCHES per run; the next run goes on where this one stopped.
import type { Job } from '../jobs.ts';

export const AUDIT_DELETE_BATCH = 5_000;
export const AUDIT_MAX_BATCHES = 100;

export interface AuditRetentionOptions {
  retentionDays: number;
  batch?: number;
  maxBatches?: number;
}

export function auditRetentionJob(options: AuditRetentionOptions): Job {
  const batch = options.batch ?? AUDIT_DELETE_BATCH;
  const maxBatches = options.maxBatches ?? AUDIT_MAX_BATCHES;
  return {
    name: 'audit-log-retention',
    intervalMs: 60 * 60_000,
    async run({ pool, logger }) {
      let deleted = 0;
      for (let i = 0; i < maxBatches; i++) {
        // The entries' own clock (billing_now: the database's now() in production).
        const { rowCount } = await pool.query(
          `DELETE FROM audit_log WHERE id IN (
             SELECT id FROM audit_log WHERE at < billing_now() - make_interval(days => $1) ORDER BY at LIMIT $2)`,
          [options.retentionDays, batch],
        );
        deleted += rowCount ?? 0;
        if ((rowCount ?? 0) < batch) break;
      }
      if (deleted > 0)
        logger.info(
          { deleted, retentionDays: options.retentionDays },
          'audit log entries past retention deleted',
        );
    },
  };
}
