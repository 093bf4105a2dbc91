// Every job the worker runs, gathered from the feature modules.
import type { Job } from './jobs.ts';
import { maintenanceJob } from './jobs/maintenance.ts';

export function allJobs(): Job[] {
  return [maintenanceJob];
}
