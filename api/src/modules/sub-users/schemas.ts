// Sub-users' input and answers (docs/adr/0037). Every bound is the database's
// CHECK (migrations/0085) or the gateways' credential grammar (common/src/credentials.ts), so a
// request the API accepts is one the database stores and a gateway reads the same way.
import { z } from 'zod';
import { PRODUCTS } from '#common/products.ts';
import { MAX_PURCHASE_GB, throttleRate } from '#api/http/schemas.ts';

/** The most concurrent connections a sub-user's cap may allow (the database's CHECK). */
export const MAX_SUB_USER_CONNECTIONS = 100_000;
/** Shortest password a customer may choose (generated ones have 20 characters). */
const MIN_PASSWORD_LENGTH = 8;

const name = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$/,
    'must be 1 to 64 letters, digits, spaces, dots, underscores or hyphens, starting with a letter or digit',
  )
  .describe('A label of your choice, unique in the account (a customer, a team, a scraper)');
const username = z
  .string()
  .regex(/^[a-z0-9]{4,32}$/, 'must be 4 to 32 lowercase letters and digits')
  .describe(
    'The proxy username, in place of the account’s in proxy strings; unique across all accounts. ' +
      'Default: generated',
  );
const password = z
  .string()
  .regex(
    new RegExp(`^[A-Za-z0-9]{${MIN_PASSWORD_LENGTH},128}$`),
    `must be ${MIN_PASSWORD_LENGTH} to 128 letters and digits`,
  )
  .describe('The proxy password. Default: generated (20 letters and digits)');
const status = z.enum(['active', 'suspended']).describe('suspended: the gateways refuse its credentials');
const maxConnections = z
  .number()
  .int()
  .min(1)
  .max(MAX_SUB_USER_CONNECTIONS)
  .nullable()
  .describe(
    `Concurrent connections across the fleet (1 to ${MAX_SUB_USER_CONNECTIONS}); null: the plan's cap`,
  );
const bytesPerSecond = throttleRate.describe(
  'Bandwidth cap in bytes per second across the fleet (64 KiB/s to 10 GB/s); null: none of its own ' +
    "(the account's cap still applies)",
);
const limitGb = z
  .number()
  .min(0)
  .max(MAX_PURCHASE_GB)
  .nullable()
  .optional()
  .describe('GB (10^9 bytes) the sub-user may use on this product since its creation; null: no limit');
const trafficLimits = z
  .strictObject(
    Object.fromEntries(PRODUCTS.map((p) => [p, limitGb])) as Record<
      (typeof PRODUCTS)[number],
      typeof limitGb
    >,
  )
  .describe(
    "Per product: a traffic limit in GB over the sub-user's lifetime, or null for none (the account's " +
      'balance is then the only ceiling). Products left out keep their limit',
  );

export const subUserCreate = z.strictObject({
  name,
  username: username.optional(),
  password: password.optional(),
  status: status.optional().describe('Default active'),
  maxConnections: maxConnections.optional(),
  bytesPerSecond: bytesPerSecond.optional(),
  trafficLimits: trafficLimits.optional(),
});
export type SubUserCreate = z.infer<typeof subUserCreate>;

export const subUserUpdate = z
  .strictObject({
    name: name.optional(),
    username: username.optional(),
    password: password.optional(),
    resetPassword: z
      .literal(true)
      .optional()
      .describe('true: issue a new generated password (the old one stops working within a second)'),
    status: status.optional(),
    maxConnections: maxConnections.optional(),
    bytesPerSecond: bytesPerSecond.optional(),
    trafficLimits: trafficLimits.optional(),
  })
  .refine((v) => !(v.password !== undefined && v.resetPassword), {
    path: ['resetPassword'],
    message: 'must not be given with password',
  });
export type SubUserUpdate = z.infer<typeof subUserUpdate>;

const productUsage = z.object({
  limitGb: z.number().nullable().describe('The limit in GB, 3 decimals; null: none'),
  limitBytes: z.number().int().nullable(),
  usedBytes: z.number().int().describe('Bytes up and down since the sub-user was created'),
  usedGb: z.number().describe('usedBytes in GB, 3 decimals'),
  requests: z.number().int(),
});

export const subUserSchema = z.object({
  id: z.string(),
  name: z.string(),
  username: z.string(),
  password: z.string().describe('The proxy password; readable again, as the account’s own proxy password is'),
  status: z.enum(['active', 'suspended']),
  maxConnections: z.number().int().nullable(),
  bytesPerSecond: z.number().int().nullable(),
  products: z.object(
    Object.fromEntries(PRODUCTS.map((p) => [p, productUsage])) as Record<
      (typeof PRODUCTS)[number],
      typeof productUsage
    >,
  ),
  createdAt: z.string(),
  updatedAt: z.string(),
});
export type SubUser = z.infer<typeof subUserSchema>;

export const subUserListSchema = z.object({
  subUsers: z.array(subUserSchema).describe('Oldest first'),
  limit: z.number().int().describe('Sub-users the account may have (PROXYFLEET_SUB_USERS_MAX)'),
});

/** Longest window of GET /sub-users/:id/usage, days. */
export const MAX_USAGE_DAYS = 31;

export const subUserUsageQuery = z.strictObject({
  days: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_USAGE_DAYS)
    .default(7)
    .describe(`The last N days, 1 to ${MAX_USAGE_DAYS} (default 7), the current hour included`),
});
export type SubUserUsageQuery = z.infer<typeof subUserUsageQuery>;

export const subUserUsageSchema = z.object({
  success: z.literal(true),
  subUserId: z.string(),
  from: z.string().describe('Start of the first hour counted, ISO 8601 UTC'),
  totals: z
    .array(
      z.object({
        product: z.enum(PRODUCTS),
        bytesUp: z.number().int(),
        bytesDown: z.number().int(),
        requests: z.number().int(),
      }),
    )
    .describe('Per product over the window; products without traffic are left out'),
  hours: z
    .array(
      z.object({
        hour: z.string().describe('Start of the hour, ISO 8601 UTC'),
        product: z.enum(PRODUCTS),
        bytesUp: z.number().int(),
        bytesDown: z.number().int(),
        requests: z.number().int(),
      }),
    )
    .describe('Oldest first; hours without traffic are left out'),
});
export type SubUserUsage = z.infer<typeof subUserUsageSchema>;
