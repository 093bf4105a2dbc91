// Every job the worker runs, gathered from the feature modules.
import type { Job } from './jobs.ts';

export function allJobs(): Job[] {
  return [];
}
