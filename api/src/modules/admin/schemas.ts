import { z } from 'zod';
import { PRODUCTS } from '#common/products.ts';
import { MAX_PURCHASE_GB, throttleRate, uuid } from '#api/http/schemas.ts';
import { keySummarySchema } from '#api/modules/account/schemas.ts';

export const keyParams = z.object({ id: uuid, keyId: uuid });
export const ispProxyParams = z.object({ id: uuid, proxyId: uuid });
export const autoRefillParams = z.object({ id: uuid, product: z.enum(PRODUCTS) });
export const throttleParams = z.object({ id: uuid, product: z.enum(PRODUCTS) });

export const throttleUpdateSchema = z.strictObject({
  bytesPerSecond: throttleRate.describe(
    'Cap in bytes per second for the account on this product, over all its connections and gateways ' +
      "(64 KiB/s to 10 GB/s); null removes it (the plan's default applies)",
  ),
});
export type ThrottleUpdate = z.infer<typeof throttleUpdateSchema>;
export const throttleResponseSchema = z.object({
  product: z.enum(PRODUCTS),
  bytesPerSecond: z.number().int().nullable(),
});

export const createAccountSchema = z.strictObject({ email: z.email().max(254) });
export const newAccountSchema = z.object({
  id: z.string(),
  email: z.string(),
  status: z.enum(['active', 'suspended']),
  apiKey: z.string().describe('The primary key, shown this once'),
  proxyUsername: z.string(),
  proxyPassword: z.string(),
});

export const listAccountsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(500).default(100),
  offset: z.coerce.number().int().min(0).default(0),
  // PostgreSQL text cannot hold NUL: refuse it here rather than fail the query (a 500).
  email: z
    .string()
    .max(320)
    .refine((v) => !v.includes('\0'), 'must not contain a NUL character')
    .optional(),
});

export const accountSummarySchema = z.object({
  id: z.string(),
  email: z.string(),
  status: z.enum(['active', 'suspended']),
  createdAt: z.string(),
});

export const purchaseSchema = z.strictObject({
  product: z.enum(PRODUCTS, { error: `must be one of ${PRODUCTS.join(', ')}` }),
  gb: z
    .number()
    .positive()
    .max(MAX_PURCHASE_GB)
    .refine((gb) => Math.round(gb * 1e9) >= 1, 'must be at least one byte (1e-9 GB)')
    .describe('GB (10^9 bytes) to buy; fractional amounts are allowed'),
  idempotencyKey: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .describe('A retry with the same key buys nothing more'),
});
export type PurchaseRequest = z.infer<typeof purchaseSchema>;

export const invoiceSchema = z.object({
  id: z.string(),
  number: z.number().int(),
  accountId: z.string(),
  purchaseId: z.string(),
  product: z.enum(PRODUCTS),
  gb: z.number(),
  bytes: z.number().int(),
  amountCents: z.number().int().nullable().describe('Priced from PROXYFLEET_PRICES_PER_GB when issued'),
  currency: z.string(),
  status: z.enum(['issued', 'paid', 'void']),
  settlement: z
    .enum(['deferred', 'charged'])
    .describe('deferred: billed later, counted against the credit limit; charged: paid when bought'),
  paymentMethod: z.string(),
  issuedAt: z.string(),
  paidAt: z.string().nullable().describe('When it was marked paid; null unless paid (docs/adr/0101)'),
});

export const createdKeySchema = z.object({
  id: z.string(),
  name: z.string(),
  apiKey: z.string(),
  prefix: z.string(),
});
export const keyRecordSchema = keySummarySchema.extend({
  revokedAt: z.string().nullable(),
  lastUsedAt: z.string().nullable(),
});

export const statusSchema = z.object({ id: z.string(), status: z.enum(['active', 'suspended']) });

export const createIspProxySchema = z.strictObject({
  host: z
    .string()
    .min(1)
    .max(253)
    .regex(/^[A-Za-z0-9.:[\]-]+$/, 'must be a host name or IP address'),
  port: z.number().int().min(1).max(65_535),
  username: z
    .string()
    .min(1)
    .max(64)
    .regex(/^[^:\s]+$/, 'must not contain ":" or spaces'),
  password: z
    .string()
    .min(1)
    .max(128)
    .regex(/^[^:\s]+$/, 'must not contain ":" or spaces')
    .optional()
    .describe('Generated when omitted'),
  country: z
    .string()
    .regex(/^[A-Za-z]{2}$/, 'must be a two-letter country code')
    .transform((s) => s.toLowerCase()),
  city: z.string().min(1).max(100).optional(),
  isp: z.string().min(1).max(100).optional(),
  status: z.enum(['active', 'suspended', 'expired']).default('active'),
  expiresAt: z.iso.datetime({ offset: true }).optional(),
});
export type CreateIspProxy = z.infer<typeof createIspProxySchema>;

export const proxyPasswordSchema = z.object({ proxyUsername: z.string(), proxyPassword: z.string() });

export const dashboardInviteSchema = z.object({
  url: z.string().describe('One-time link to set the dashboard password; works once, until expiresAt'),
  expiresAt: z.string(),
});
