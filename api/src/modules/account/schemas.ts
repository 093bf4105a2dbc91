import { z } from 'zod';
import { PRODUCTS } from '#common/products.ts';
import { lowBandwidthFloorGb } from '#common/billing/alerts.ts';
import { creditSchema } from '#common/billing/credit.ts';
import { productsSchema } from '#api/modules/usage/schemas.ts';

export const alertsSchema = z.object({
  lowBandwidth: z.boolean(),
  newInvoice: z.boolean(),
  serverAlerts: z.boolean(),
  lowBandwidthPercent: z
    .number()
    .int()
    .describe('Remaining share (%) of a product at which the low-bandwidth email is sent'),
  lowBandwidthFloorGb: z
    .number()
    .nullable()
    .describe('Also sent when this many GB or fewer remain (whichever of the two is higher); null: none'),
});

/** Alert switches an operator changes (fields not given keep their value). */
export const alertsUpdateSchema = z
  .strictObject({
    lowBandwidth: z.boolean().optional(),
    newInvoice: z.boolean().optional(),
    serverAlerts: z.boolean().optional(),
    lowBandwidthPercent: z.number().int().min(1).max(99).optional(),
    lowBandwidthFloorGb: lowBandwidthFloorGb.optional(),
  })
  .refine(
    (v) => Object.values(v).some((x) => x !== undefined),
    'give at least one of lowBandwidth, newInvoice, serverAlerts, lowBandwidthPercent, lowBandwidthFloorGb',
  );
export type AlertsUpdate = z.infer<typeof alertsUpdateSchema>;

/** A named key's name, as the admin API and the dashboard take it. */
export const createKeySchema = z.strictObject({
  name: z
    .string()
    .min(1)
    .max(64)
    .regex(/^[A-Za-z0-9][A-Za-z0-9 ._-]*$/, 'must be letters, digits, space, dot, underscore or hyphen'),
});

export const keySummarySchema = z.object({
  id: z.string(),
  name: z.string(),
  kind: z.enum(['primary', 'named']),
  prefix: z
    .string()
    .describe('Display prefix, for example svc_live_3fa9c1; the key itself is never shown again'),
  last4: z.string(),
  createdAt: z.string(),
});

export const autoRefillSchema = z.object({
  product: z.enum(PRODUCTS),
  enabled: z.boolean(),
  thresholdGb: z.number(),
  refillGb: z.number(),
  maxRefillsPerMonth: z.number().int(),
});

export const throttleSchema = z.object({
  product: z.enum(PRODUCTS),
  bytesPerSecond: z
    .number()
    .int()
    .describe("The account's bandwidth cap on this product, bytes per second, shared by all its connections"),
});

export const accountResponseSchema = z.object({
  success: z.literal(true),
  id: z.string(),
  email: z.string(),
  status: z.enum(['active', 'suspended']),
  createdAt: z.string(),
  proxyUsername: z.string().describe('Username for the gateways; the password is in generated proxy strings'),
  products: productsSchema,
  usageUpdatedAt: z.string(),
  alerts: alertsSchema,
  autoRefill: z.array(autoRefillSchema),
  credit: creditSchema.describe(
    'Credit for bill-later payment (auto-refills paid by invoice) this calendar month',
  ),
  throttles: z
    .array(throttleSchema)
    .describe(
      'Bandwidth caps set for this account, per product; a product not listed has the plan default ' +
        "of the operator's gateways, if any (docs/gateway.md, Throttling)",
    ),
  apiKeys: z.array(keySummarySchema).describe('Active keys: the primary and up to 10 named'),
  namedKeysLimit: z.number().int(),
});
export type AccountResponse = z.infer<typeof accountResponseSchema>;
