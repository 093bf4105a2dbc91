// GET /api/v1/usage/history: the query it takes and the answer it gives (docs/api.md "Usage
// history", docs/adr/0103). A bucket's outcomes add up to its requests.
import { z } from 'zod';
import { PRODUCTS } from '#common/products.ts';
import { uuid } from '#api/http/schemas.ts';

export const GRANULARITIES = ['hour', 'day'] as const;
export type Granularity = (typeof GRANULARITIES)[number];

/** The longest range one call may ask for, in buckets: 31 days of hours, 400 days. */
export const MAX_BUCKETS: Readonly<Record<Granularity, number>> = { hour: 31 * 24, day: 400 };
export const BUCKET_MS: Readonly<Record<Granularity, number>> = { hour: 3_600_000, day: 86_400_000 };

// A UTC date or a UTC time, nothing else: `2026-11-28` or `2026-11-28T13:00:00Z` (seconds and
// milliseconds optional); an offset, a week date or a bare time is refused, so no one's local
// clock is guessed.
const INSTANT = /^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,3})?)?Z)?$/;
const INSTANT_PROBLEM = 'must be a UTC date (YYYY-MM-DD) or time (YYYY-MM-DDTHH:MM:SSZ)';

const instant = z
  .string()
  .regex(INSTANT, INSTANT_PROBLEM)
  .transform((text, ctx) => {
    const date = new Date(text.length === 10 ? `${text}T00:00:00Z` : text);
    // A date the calendar has not (2026-02-30 would roll over to March): the same text back or refused.
    if (Number.isNaN(date.getTime()) || date.toISOString().slice(0, 10) !== text.slice(0, 10)) {
      ctx.addIssue({ code: 'custom', message: INSTANT_PROBLEM });
      return z.NEVER;
    }
    return date;
  });

export const usageHistoryQuery = z.strictObject({
  from: instant
    .optional()
    .describe(
      'Start, UTC, rounded down to its bucket (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ); default: `to` less 24 hours (hour) or 30 days (day)',
    ),
  to: instant
    .optional()
    .describe('End, exclusive, UTC, rounded up to its bucket; default: the end of the current bucket'),
  granularity: z.enum(GRANULARITIES).default('hour').describe('Bucket size (default hour)'),
  product: z.enum(PRODUCTS).optional().describe('One product; default: all, added up'),
  subUser: uuid.optional().describe("One sub-user's traffic (its id); default: the whole account's"),
  format: z
    .enum(['json', 'csv'])
    .optional()
    .describe('csv: the same buckets as CSV (also `Accept: text/csv`)'),
});
export type UsageHistoryQuery = z.infer<typeof usageHistoryQuery>;

const count = z.number().int();
export const historyCountsSchema = z.object({
  bytesUp: count.describe('Bytes from the customer, of billed requests and tunnels'),
  bytesDown: count.describe('Bytes to the customer, of billed requests and tunnels'),
  requests: count.describe('Requests and tunnels that ended in the bucket, every outcome'),
  succeeded: count.describe('Relayed: the origin answered (any status) or the tunnel ran to its end'),
  refused: z.object({
    noBandwidth: count.describe("402: no bandwidth left on the product, or the sub-user's limit reached"),
    badCredentials: count.describe("407: a wrong password for this account's (or sub-user's) username"),
    throttled: count.describe('429: too many connections at once, or too many failed sign-ins'),
    targetNotAllowed: count.describe('403: a destination or port the gateway does not serve'),
    noExit: count.describe('503: no exit serves the requested location'),
  }),
  upstreamFailures: z.object({
    connectError: count.describe('502: the destination or the exit refused, reset or did not resolve'),
    timeout: count.describe('504: the destination or the exit did not connect or answer in time'),
  }),
  other: count.describe(
    'Anything else: the customer left first, the answer was cut short, a malformed request, billing unavailable',
  ),
  httpStatus: z
    .object({ '2xx': count, '3xx': count, '4xx': count, '5xx': count })
    .describe("Plain HTTP only: the classes of the origin's answers relayed (tunnels carry their own)"),
});
export type HistoryCounts = z.infer<typeof historyCountsSchema>;

export const usageHistorySchema = z.object({
  success: z.literal(true),
  granularity: z.enum(GRANULARITIES),
  from: z.string().describe('Start of the first bucket, ISO 8601 UTC'),
  to: z.string().describe('End of the last bucket (exclusive), ISO 8601 UTC'),
  product: z.enum(PRODUCTS).nullable(),
  subUser: z.string().nullable(),
  totals: historyCountsSchema,
  buckets: z
    .array(historyCountsSchema.extend({ start: z.string().describe('Start of the bucket, ISO 8601 UTC') }))
    .describe('Every bucket of the range, oldest first, zeros included'),
});
export type UsageHistory = z.infer<typeof usageHistorySchema>;
