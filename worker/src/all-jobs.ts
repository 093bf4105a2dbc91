// Every job the worker runs. Jobs live in worker/src/jobs/ (api/ and gateway/ do not import the
// worker: eslint's boundary rule), whatever tables they maintain.
import type { Registry } from 'prom-client';
import type { Logger } from '../../common/src/logger.ts';
import type { WorkerConfig } from './config.ts';
import type { Job } from './jobs.ts';
import { maintenanceJob } from './jobs/maintenance.ts';
import { leaseReaperJob, usageFoldJob } from './jobs/usage.ts';
import { rateLimitCleanupJob } from './jobs/rate-limit-cleanup.ts';
import { emailSenderJob } from './jobs/email.ts';
import { lowBandwidthJob } from './jobs/low-bandwidth.ts';

export interface AllJobsOptions {
  config: Pick<WorkerConfig, 'PROXYFLEET_SMTP_URL' | 'PROXYFLEET_EMAIL_FROM'>;
  logger: Logger;
  registry: Registry;
}

export function allJobs({ config, logger, registry }: AllJobsOptions): Job[] {
  return [maintenanceJob, usageFoldJob, leaseReaperJob, rateLimitCleanupJob, lowBandwidthJob, ...emailJobs()];

  function emailJobs(): Job[] {
    const smtpUrl = config.PROXYFLEET_SMTP_URL;
    if (smtpUrl) return [emailSenderJob({ smtpUrl, from: config.PROXYFLEET_EMAIL_FROM, logger, registry })];
    logger.warn(
      'PROXYFLEET_SMTP_URL is unset: email is disabled (alerts are queued in email_outbox, not sent)',
    );
    return [];
  }
}
