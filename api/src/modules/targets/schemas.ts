// Target statistics (docs/adr/0026): the query of GET /usage/targets, the answer, and the opt-out.
import { z } from 'zod';
import { PRODUCTS } from '#common/products.ts';
import { TARGET_RETENTION_DAYS } from '#common/target-stats.ts';

const DAY_MS = 86_400_000;

/** Today's UTC date, YYYY-MM-DD. */
export const utcToday = (now = Date.now()) => new Date(now).toISOString().slice(0, 10);

/** What is wrong with a day (YYYY-MM-DD, UTC): one problem, or undefined. */
export function dayProblem(v: string, now = Date.now()): string | undefined {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(v)) return 'must be a date in the form YYYY-MM-DD';
  const time = Date.parse(`${v}T00:00:00Z`);
  if (Number.isNaN(time) || utcToday(time) !== v) return 'must be a date that exists';
  if (v > utcToday(now)) return 'must not be in the future';
  if (v < utcToday(now - (TARGET_RETENTION_DAYS - 1) * DAY_MS))
    return `must be within the last ${TARGET_RETENTION_DAYS} days`;
  return undefined;
}

const day = z.string().superRefine((v, ctx) => {
  const message = dayProblem(v);
  if (message) ctx.addIssue({ code: 'custom', message });
});

export const targetsQuery = z.strictObject({
  date: day.optional().describe('UTC day, YYYY-MM-DD; default today; the last 30 days are kept'),
  product: z.enum(PRODUCTS).optional().describe('Only this product; default all'),
  subUser: z
    .string()
    .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, 'must be a sub-user id')
    .optional()
    .describe(
      "Only this sub-user's traffic; default the whole account (its own credentials and every sub-user)",
    ),
});
export type TargetsQuery = z.infer<typeof targetsQuery>;

export const targetsResponseSchema = z.object({
  success: z.literal(true),
  date: z.string().describe('The UTC day the figures are for'),
  enabled: z
    .boolean()
    .describe('Whether target statistics are recorded for the account (false: opted out, nothing stored)'),
  targets: z
    .array(
      z.object({
        domain: z
          .string()
          .describe('Registrable domain, IP address, or "(other)" for the domains past the daily cap'),
        product: z.enum(PRODUCTS),
        bytes: z.number().int().describe('Bytes up and down, as billed'),
        requests: z.number().int().describe('Requests; a tunnel counts as one'),
      }),
    )
    .describe('Most bytes first'),
});
export type TargetsResponse = z.infer<typeof targetsResponseSchema>;

export const targetStatsUpdate = z.strictObject({
  enabled: z.boolean().describe('false deletes every stored statistic of the account and records no more'),
});
export const targetStatsSchema = z.object({ enabled: z.boolean() });
