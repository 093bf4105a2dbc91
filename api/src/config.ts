import { z } from 'zod';
import { parseCidr } from '#common/cidr.ts';
import { TRUST_SILENCE_MS } from '#common/db/changes.ts';
import { DEFAULT_ALLOWLIST_MAX } from '#common/ip-allowlist.ts';
import { DEFAULT_PURCHASE_LIMITS, purchaseGb } from './modules/purchases/schemas.ts';
import { DEFAULT_SUBSCRIPTIONS_MAX } from './modules/subscriptions/schemas.ts';
import { stripeEnv } from '#common/billing/stripe.ts';
import {
  baseEnv,
  bool,
  cidrList,
  encryptionKey,
  parseConfig,
  port,
  positiveInt,
  relayUrlEnv,
  type Env,
} from '#common/config.ts';

/** The variables of the API (also understood by `npm start`, which runs the API in-process). */
export const apiTuningEnv = {
  PROXYFLEET_USAGE_REFRESH_SECONDS: positiveInt(30),
  /** Host named in generated proxy strings for a plan that has no gateway_endpoints row. */
  PROXYFLEET_PUBLIC_GATEWAY_HOST: z.string().min(1).default('127.0.0.1'),
  /** Per API key: sustained requests per minute, and how many may come at once (docs/api.md). */
  PROXYFLEET_RATE_LIMIT_PER_MINUTE: positiveInt(600),
  PROXYFLEET_RATE_LIMIT_BURST: positiveInt(60),
  /** Per source address: failed authentications per minute, and at once, before 429. */
  PROXYFLEET_AUTH_FAILURES_PER_MINUTE: positiveInt(30),
  PROXYFLEET_AUTH_FAILURES_BURST: positiveInt(30),
  /** Request body limit in bytes. */
  PROXYFLEET_API_BODY_LIMIT_BYTES: positiveInt(16_384),
  /** How long an admin change waits for every API process to apply it before answering. */
  // Longer than a process trusts its caches without hearing from the database (TRUST_SILENCE_MS):
  // otherwise a revoke could answer while a process whose feed died unnoticed still trusts a
  // cache holding the old key.
  PROXYFLEET_API_SYNC_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(
      TRUST_SILENCE_MS + 1_000,
      `must exceed the cache trust window (${TRUST_SILENCE_MS} ms) by at least a second`,
    )
    .default(TRUST_SILENCE_MS + 2_000),
  /**
   * Reverse-proxy hops whose X-Forwarded-For and X-Forwarded-Proto are believed (0: none), whoever
   * they are: only where nothing but the proxies can reach the API's port. Prefer
   * PROXYFLEET_API_TRUSTED_PROXIES.
   */
  PROXYFLEET_API_TRUST_PROXY_HOPS: z.coerce.number().int().min(0).max(10).default(0),
  /**
   * The reverse proxies believed, as comma-separated ranges (a.b.c.d/n, x::/n): X-Forwarded-Proto
   * from a peer in them makes a request HTTPS (HSTS, Secure cookies), and X-Forwarded-For is
   * followed through them to the client. A header from any other peer is ignored (docs/adr/0123).
   */
  PROXYFLEET_API_TRUSTED_PROXIES: cidrList.refine(
    (list) => list.every((c) => parseCidr(c) !== undefined),
    'comma-separated address ranges, a.b.c.d/n or x::/n',
  ),
  /** This process's name in cache_acks (the pod name in Kubernetes); random when unset. */
  // IP allowlist (docs/adr/0036): entries per account, and whether private, loopback and reserved
  // ranges may be listed (dev and tests, whose clients are on 127.0.0.0/8; never in production).
  PROXYFLEET_IP_ALLOWLIST_MAX: z.coerce.number().int().min(0).max(1000).default(DEFAULT_ALLOWLIST_MAX),
  PROXYFLEET_IP_ALLOWLIST_PRIVATE: bool(false),
  /** Sub-users per account (docs/adr/0037). */
  PROXYFLEET_SUB_USERS_MAX: z.coerce.number().int().min(0).max(10_000).default(50),
  PROXYFLEET_INSTANCE_ID: z.string().min(1).max(200).optional(),
  /**
   * Every dashboard request counts as HTTPS for its cookies (Secure, __Host- prefix), whatever
   * req.secure says; without it, those of a request that came over HTTPS (a TLS socket, or
   * X-Forwarded-Proto from a trusted proxy). HSTS always follows req.secure.
   */
  PROXYFLEET_DASHBOARD_HTTPS: bool(false),
  /** Public base URL of the dashboard, the base of every link in an email; unset: the API's listen address (docs/security.md). */
  PROXYFLEET_DASHBOARD_URL: z.url({ protocol: /^https?$/ }).optional(),
  /** What a customer may buy themselves (POST /api/v1/purchases, the Billing page): GB per purchase, and per account and calendar day (UTC). */
  PROXYFLEET_PURCHASE_MAX_GB: purchaseGb(DEFAULT_PURCHASE_LIMITS.perPurchaseGb),
  PROXYFLEET_PURCHASE_DAILY_MAX_GB: purchaseGb(DEFAULT_PURCHASE_LIMITS.perDayGb),
  /** Subscriptions a customer may hold active or past due at once (POST /api/v1/subscriptions, docs/adr/0114). */
  PROXYFLEET_SUBSCRIPTIONS_MAX: z.coerce.number().int().min(0).max(10_000).default(DEFAULT_SUBSCRIPTIONS_MAX),
  /** The seller named on every invoice PDF (docs/api.md "GET /api/v1/invoices/:id/pdf"). */
  PROXYFLEET_SELLER_NAME: z.string().trim().min(1).max(200).default('proxyfleet'),
  /** Lines separated by "\n" (the two characters) or real line breaks. */
  PROXYFLEET_SELLER_ADDRESS: z.string().max(1000).default(''),
  PROXYFLEET_SELLER_TAX_ID: z.string().max(100).default(''),
  /** Card payments through Stripe (docs/billing.md "Cards"); unset: bill-later only. */
  ...stripeEnv,
};

export const apiEnv = {
  PROXYFLEET_API_HOST: z.string().default('0.0.0.0'),
  PROXYFLEET_API_PORT: port(8080),
  /**
   * Where the pod's preStop is answered (GET /prestop, common/src/prestop.ts): a port of its own,
   * not the public one, where a client could make the pod unready. Unset: no preStop (a process
   * outside Kubernetes). The chart sets 9094.
   */
  PROXYFLEET_HEALTH_PORT: z.coerce.number().int().min(0).max(65_535).optional(),
  /** Operators' bearer token for /admin/v1. No default: a secret. */
  PROXYFLEET_ADMIN_TOKEN: z.string().min(24, 'must be at least 24 characters'),
  /** Encrypts proxy passwords at rest (32 bytes, hex or base64). No default: a secret. */
  PROXYFLEET_CREDENTIALS_KEY: encryptionKey,
  ...apiTuningEnv,
};

export const apiSchema = z
  .object({ ...baseEnv, ...relayUrlEnv, ...apiEnv })
  .refine((c) => c.PROXYFLEET_API_TRUST_PROXY_HOPS === 0 || c.PROXYFLEET_API_TRUSTED_PROXIES.length === 0, {
    path: ['PROXYFLEET_API_TRUSTED_PROXIES'],
    message: 'set it or PROXYFLEET_API_TRUST_PROXY_HOPS, not both',
  })
  .refine((c) => !c.PROXYFLEET_STRIPE_SECRET_KEY || c.PROXYFLEET_STRIPE_WEBHOOK_SECRET, {
    path: ['PROXYFLEET_STRIPE_WEBHOOK_SECRET'],
    message: 'is required with PROXYFLEET_STRIPE_SECRET_KEY (card payments are settled by its webhooks)',
  });
export type ApiConfig = z.infer<typeof apiSchema>;

export const loadApiConfig = (env?: Env) => parseConfig(apiSchema, env);
