// The API's metrics (names per docs/design.md: proxyfleet_<component>_<noun>_<unit>, bounded labels).
import { Counter, Histogram, type Registry } from 'prom-client';

const AUTH_FAILURE_REASONS = [
  'missing',
  'malformed',
  'unknown',
  'revoked',
  'suspended',
  'admin_token',
] as const;
export type AuthFailureReason = (typeof AUTH_FAILURE_REASONS)[number];

export class ApiMetrics {
  readonly requestDuration: Histogram<'route' | 'method' | 'status_class'>;
  readonly authFailures: Counter<'reason'>;
  readonly rateLimited: Counter<'limiter'>;

  constructor(registry: Registry) {
    this.requestDuration = new Histogram({
      name: 'proxyfleet_api_request_duration_seconds',
      help: 'HTTP request duration by route template and status class',
      labelNames: ['route', 'method', 'status_class'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    });
    this.authFailures = new Counter({
      name: 'proxyfleet_api_auth_failures_total',
      help: 'Refused authentications by reason',
      labelNames: ['reason'],
      registers: [registry],
    });
    this.rateLimited = new Counter({
      name: 'proxyfleet_api_rate_limited_total',
      help: 'Requests refused with 429, by limiter (key: per API key; auth_failure: per source address)',
      labelNames: ['limiter'],
      registers: [registry],
    });
    // Every series an alert or panel reads exists from the start, at zero (no "no data").
    for (const reason of AUTH_FAILURE_REASONS) this.authFailures.inc({ reason }, 0);
    for (const limiter of ['key', 'auth_failure']) this.rateLimited.inc({ limiter }, 0);
  }
}
