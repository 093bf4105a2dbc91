// Every job the worker runs. Jobs live in worker/src/jobs/ (api/ and gateway/ do not import the
// worker: eslint's boundary rule), whatever tables they maintain.
import type { Registry } from 'prom-client';
import type { Logger } from '#common/logger.ts';
import type { WorkerConfig } from './config.ts';
import type { Job } from './jobs.ts';
import { maintenanceJob } from './jobs/maintenance.ts';
import { balanceStripesJob, leaseReaperJob, usageFoldJob } from './jobs/usage.ts';
import { rateLimitCleanupJob } from './jobs/rate-limit-cleanup.ts';
import { targetRetentionJob } from './jobs/target-retention.ts';
import { auditRetentionJob } from './jobs/audit-retention.ts';
import { usageHistoryRetentionJob } from './jobs/usage-history-retention.ts';
import { emailSenderJob } from './jobs/email.ts';
import { emailOutcomeCounter } from './jobs/email.ts';
import { autoRefillJob, balanceSweepJob, billingConfigJob } from './jobs/auto-refill.ts';
import { renewalJob } from './jobs/renewals.ts';
import { ispHealthJob } from './jobs/isp-health.ts';
import { paymentMethods, type PaymentMethods } from '#common/billing/payment.ts';

export interface AllJobsOptions {
  config: Pick<
    WorkerConfig,
    | 'PROXYFLEET_SMTP_URL'
    | 'PROXYFLEET_EMAIL_FROM'
    | 'PROXYFLEET_PRICES_PER_GB'
    | 'PROXYFLEET_CURRENCY'
    | 'PROXYFLEET_CREDIT_LIMIT'
    | 'PROXYFLEET_SUBSCRIPTION_GRACE_DAYS'
    | 'PROXYFLEET_ISP_PRICES'
    | 'PROXYFLEET_ISP_HEALTH_INTERVAL_SECONDS'
    | 'PROXYFLEET_ISP_HEALTH_URL'
    | 'PROXYFLEET_AUDIT_RETENTION_DAYS'
    | 'PROXYFLEET_USAGE_HISTORY_HOURLY_DAYS'
    | 'PROXYFLEET_USAGE_HISTORY_DAILY_DAYS'
  >;
  /** Decrypts ISP proxy passwords for the server-alert checks; without it they do not run. */
  credentialsKey?: Buffer | undefined;
  logger: Logger;
  registry: Registry;
  /** Auto-refill and renewal payment methods; default: the built-in "invoice" only. */
  payments?: PaymentMethods;
}

export function allJobs({ config, credentialsKey, logger, registry, payments }: AllJobsOptions): Job[] {
  emailOutcomeCounter(registry);
  return [
    maintenanceJob,
    usageFoldJob,
    leaseReaperJob,
    balanceStripesJob,
    rateLimitCleanupJob,
    targetRetentionJob,
    auditRetentionJob({ retentionDays: config.PROXYFLEET_AUDIT_RETENTION_DAYS }),
    usageHistoryRetentionJob({
      hourlyDays: config.PROXYFLEET_USAGE_HISTORY_HOURLY_DAYS,
      dailyDays: config.PROXYFLEET_USAGE_HISTORY_DAILY_DAYS,
    }),
    billingConfigJob({
      prices: { currency: config.PROXYFLEET_CURRENCY, perGb: config.PROXYFLEET_PRICES_PER_GB },
      creditLimitCents: config.PROXYFLEET_CREDIT_LIMIT,
      ispPrices: config.PROXYFLEET_ISP_PRICES,
    }),
    balanceSweepJob,
    autoRefillJob(payments ?? paymentMethods()),
    renewalJob({
      methods: payments ?? paymentMethods(),
      graceDays: config.PROXYFLEET_SUBSCRIPTION_GRACE_DAYS,
    }),
    ...healthJobs(),
    ...emailJobs(),
  ];

  function healthJobs(): Job[] {
    if (credentialsKey) {
      return [
        ispHealthJob({
          intervalSeconds: config.PROXYFLEET_ISP_HEALTH_INTERVAL_SECONDS,
          url: config.PROXYFLEET_ISP_HEALTH_URL,
          credentialsKey,
        }),
      ];
    }
    logger.warn('PROXYFLEET_CREDENTIALS_KEY is unset: ISP proxies are not health-checked (no server alerts)');
    return [];
  }

  function emailJobs(): Job[] {
    const smtpUrl = config.PROXYFLEET_SMTP_URL;
    if (smtpUrl) return [emailSenderJob({ smtpUrl, from: config.PROXYFLEET_EMAIL_FROM, logger, registry })];
    logger.warn(
      'PROXYFLEET_SMTP_URL is unset: email is disabled (alerts are queued in email_outbox, not sent)',
    );
    return [];
  }
}
