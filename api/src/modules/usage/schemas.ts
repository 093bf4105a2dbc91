import { z } from 'zod';
import { PRODUCTS } from '#common/products.ts';

export const balanceSchema = z.object({
  totalGb: z.number().describe('Purchased bandwidth, GB (10^9 bytes), 3 decimals'),
  usedGb: z.number().describe('Used bandwidth, GB, 3 decimals'),
  remainingGb: z
    .number()
    .describe(
      'Remaining bandwidth, GB, rounded down to 3 decimals or 3 significant digits (never 0 while bytes remain); never negative',
    ),
});

export const productsSchema = z.object(
  Object.fromEntries(PRODUCTS.map((p) => [p, balanceSchema])) as Record<
    (typeof PRODUCTS)[number],
    typeof balanceSchema
  >,
);

export const usageResponseSchema = z.object({
  success: z.literal(true),
  products: productsSchema,
  dataUsedMb: z.number().describe('Used data over all products, MB (10^6 bytes), 2 decimals'),
  dataLimitMb: z.number().describe('Purchased data over all products, MB, 2 decimals'),
  dataRemainingMb: z.number().describe('Remaining data over all products, MB, 2 decimals'),
  percentUsed: z.number().describe('dataUsed / dataLimit x 100, two decimals; 0 when nothing was bought'),
  requestsCount: z.number().int().describe('Requests made through the gateways'),
  updatedAt: z.string().describe('When these figures were computed, ISO 8601 UTC'),
});
export type UsageResponse = z.infer<typeof usageResponseSchema>;
