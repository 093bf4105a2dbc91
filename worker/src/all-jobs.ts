// Every job the worker runs, gathered from the feature modules.
import type { Job } from './jobs.ts';
import { maintenanceJob } from './jobs/maintenance.ts';
import { leaseReaperJob, usageFoldJob } from '../../gateway/src/accounting/jobs.ts';
import { rateLimitCleanupJob } from '../../api/src/modules/rate-limit/jobs.ts';

export function allJobs(): Job[] {
  return [maintenanceJob, usageFoldJob, leaseReaperJob, rateLimitCleanupJob];
}
