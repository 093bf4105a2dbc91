import { z } from 'zod';
import { baseEnv, encryptionKey, parseConfig, port, positiveInt, type Env } from '#common/config.ts';
import { currency, ispPricesPerMonth, pricesPerGb } from '#common/billing/prices.ts';
import { creditLimitEnv } from '#common/billing/credit.ts';
import { stripeEnv } from '#common/billing/stripe.ts';

export const workerEnv = {
  PROXYFLEET_HEALTH_PORT: port(9091),
};

/** Email alerts (docs/alerts.md); dev reads them too. SMTP unset: alerts are queued, not sent. */
export const emailEnv = {
  PROXYFLEET_SMTP_URL: z
    .string()
    .regex(/^smtps?:\/\//, 'must be an smtp:// or smtps:// URL')
    .optional(),
  PROXYFLEET_EMAIL_FROM: z.string().min(1).default('proxyfleet <alerts@localhost>'),
  /** Price per GB per product, "basic=2.5,mobile=8" over the defaults (docs/api.md "Invoices"). */
  PROXYFLEET_PRICES_PER_GB: pricesPerGb,
  PROXYFLEET_CURRENCY: currency,
  /** ISP proxy per month by country, "*=5,us=6" in currency units (docs/billing.md "Prices"). */
  PROXYFLEET_ISP_PRICES: ispPricesPerMonth,
  /** Bill-later credit per account and calendar month, in PROXYFLEET_CURRENCY (docs/api.md "Credit limit"). */
  PROXYFLEET_CREDIT_LIMIT: creditLimitEnv,
  /** Days a subscription whose renewal failed stays past_due before it expires (docs/billing.md). */
  PROXYFLEET_SUBSCRIPTION_GRACE_DAYS: positiveInt(3).pipe(z.number().max(90)),
  /** Server alerts: how often each ISP proxy is checked, and what is fetched through it. */
  PROXYFLEET_ISP_HEALTH_INTERVAL_SECONDS: positiveInt(60).pipe(z.number().max(86_400)),
  PROXYFLEET_ISP_HEALTH_URL: z.url({ protocol: /^https?$/ }).default('http://example.com/'),
  /** Usage history kept per hour and per day, in days (docs/api.md "Usage history"). */
  PROXYFLEET_USAGE_HISTORY_HOURLY_DAYS: positiveInt(90).pipe(z.number().max(3_660)),
  PROXYFLEET_USAGE_HISTORY_DAILY_DAYS: positiveInt(400).pipe(z.number().max(36_500)),
};

/** How long audit log entries are kept (docs/security.md "Audit log"); dev reads it too. */
export const auditEnv = {
  PROXYFLEET_AUDIT_RETENTION_DAYS: positiveInt(400).pipe(z.number().max(36_500)),
};

/** The worker decrypts ISP proxy passwords for the server-alert checks; unset: no checks. */
export const workerSecretsEnv = {
  PROXYFLEET_CREDENTIALS_KEY: encryptionKey.optional(),
  /** Auto-refills and renewals whose payment method is 'card' charge the saved card (docs/billing.md "Cards"). */
  PROXYFLEET_STRIPE_SECRET_KEY: stripeEnv.PROXYFLEET_STRIPE_SECRET_KEY,
  PROXYFLEET_STRIPE_API_BASE: stripeEnv.PROXYFLEET_STRIPE_API_BASE,
  PROXYFLEET_STRIPE_TIMEOUT_MS: stripeEnv.PROXYFLEET_STRIPE_TIMEOUT_MS,
};

export const workerSchema = z.object({
  ...baseEnv,
  ...workerEnv,
  ...emailEnv,
  ...auditEnv,
  ...workerSecretsEnv,
});
export type WorkerConfig = z.infer<typeof workerSchema>;
export const loadWorkerConfig = (env?: Env) => parseConfig(workerSchema, env);
