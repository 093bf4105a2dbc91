// Every counter an alert or a dashboard panel reads is exported at zero from the start: an alert
// on `rate(x[5m]) > 0` over a series that appears only at its first increment sees no data.
import { describe, expect, it } from '@jest/globals';
import type { Pool } from 'pg';
import { ApiMetrics } from '#api/http/metrics.ts';
import { createRegistry } from '#common/metrics.ts';
import { createLogger } from '#common/logger.ts';
import { ControllerMetrics } from '../controllers/src/runtime/metrics.ts';
import { emailSenderJob } from '../worker/src/jobs/email.ts';
import { JobRunner } from '../worker/src/jobs.ts';

describe('metrics at zero from the start', () => {
  it('api: auth failures by every reason, rate limits by every limiter', async () => {
    const registry = createRegistry('api', false);
    new ApiMetrics(registry);
    const text = await registry.metrics();
    for (const reason of ['missing', 'malformed', 'unknown', 'revoked', 'suspended', 'admin_token']) {
      expect(text).toContain(`proxyfleet_api_auth_failures_total{reason="${reason}",component="api"} 0`);
    }
    expect(text).toContain('proxyfleet_api_rate_limited_total{limiter="key",component="api"} 0');
    expect(text).toContain('proxyfleet_api_rate_limited_total{limiter="auth_failure",component="api"} 0');
  });

  it('worker: job failures and durations per job, emails by outcome', async () => {
    const registry = createRegistry('worker', false);
    const logger = createLogger('worker', 'silent');
    const job = { name: 'usage-fold', intervalMs: 1000, run: () => Promise.resolve() };
    new JobRunner([job], { pool: {} as Pool, logger }, registry);
    emailSenderJob({ smtpUrl: 'smtp://127.0.0.1:1', from: 'a@localhost', logger, registry });
    const text = await registry.metrics();
    expect(text).toContain('proxyfleet_worker_job_failures_total{job="usage-fold",component="worker"} 0');
    expect(text).toContain(
      'proxyfleet_worker_job_duration_seconds_count{component="worker",job="usage-fold"} 0',
    );
    for (const outcome of ['sent', 'retry', 'failed']) {
      expect(text).toContain(`proxyfleet_worker_emails_total{outcome="${outcome}",component="worker"} 0`);
    }
  });

  it('controller: reconcile errors per controller, on a follower too', async () => {
    const registry = createRegistry('controller', false);
    new ControllerMetrics(registry);
    const text = await registry.metrics();
    expect(text).toContain(
      'proxyfleet_controller_reconcile_errors_total{controller="proxygateway",component="controller"} 0',
    );
    expect(text).toContain(
      'proxyfleet_controller_reconcile_errors_total{controller="apikey",component="controller"} 0',
    );
  });
});
