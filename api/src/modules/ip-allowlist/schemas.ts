// The IP allowlist's input and answers (docs/adr/0036). A range is checked by common's parser
// (width, host bits, public addresses) and its targeting by the gateways' own credential parser,
// so nothing is stored that a gateway would read differently.
import { z } from 'zod';
import { CREDENTIAL_ERROR_TEXT, parseTargeting } from '#common/credentials.ts';
import { parseAllowlistCidr } from '#common/ip-allowlist.ts';
import { PRODUCTS, type Product } from '#common/products.ts';
import { MAX_SESSION_MINUTES } from '#api/modules/proxies/schemas.ts';

/** Longest targeting string accepted (the database's check; real ones are under 80 characters). */
const MAX_TARGETING_LENGTH = 200;

export function allowlistCreate(allowPrivate: boolean) {
  return z
    .strictObject({
      product: z.enum(PRODUCTS).describe('The product whose gateways admit the range'),
      cidr: z
        .string()
        .max(50)
        .describe(
          'An address (203.0.113.7) or a range (203.0.113.0/24); at most /24 (IPv4) or /48 (IPv6) wide',
        ),
      targeting: z
        .string()
        .min(1)
        .max(MAX_TARGETING_LENGTH)
        .optional()
        .describe(
          "What a request from the range targets, written as the product's credential suffix " +
            '(basic: country-us_session-abc123_lifetime-10m; advanced: country-us-session-abc123); ' +
            'omitted: rotating, any country',
        ),
    })
    .superRefine((v, ctx) => {
      const cidr = parseAllowlistCidr(v.cidr, allowPrivate);
      if (!cidr.ok) ctx.addIssue({ code: 'custom', path: ['cidr'], message: cidr.problem });
      if (v.targeting !== undefined) {
        const t = parseTargeting(v.product, v.targeting, { maxSessionMinutes: MAX_SESSION_MINUTES });
        if (!t.ok)
          ctx.addIssue({
            code: 'custom',
            path: ['targeting'],
            message: `must be ${v.product} targeting such as ${EXAMPLE[v.product]} (${CREDENTIAL_ERROR_TEXT[t.reason]})`,
          });
      }
    })
    .transform((v) => {
      const cidr = parseAllowlistCidr(v.cidr, allowPrivate);
      return { ...v, cidr: cidr.ok ? cidr.text : v.cidr };
    });
}
export type AllowlistCreate = z.infer<ReturnType<typeof allowlistCreate>>;

const EXAMPLE: Readonly<Record<Product, string>> = {
  light: 'country-us_session-abc123',
  basic: 'country-us_session-abc123_lifetime-10m',
  advanced: 'country-us-session-abc123-sessionduration-10',
  mobile: 'country-us-state-texas-session-abc123',
  datacenter: 'country-us_session-abc123_lifetime-10m',
};

export const allowlistEntrySchema = z.object({
  id: z.string(),
  product: z.enum(PRODUCTS),
  cidr: z.string().describe('The range in canonical form (an address is a /32 or /128)'),
  targeting: z.string().nullable().describe('null: rotating, any country'),
  createdAt: z.string(),
});
export type AllowlistEntry = z.infer<typeof allowlistEntrySchema>;

export const allowlistResponseSchema = z.object({
  entries: z.array(allowlistEntrySchema),
  limit: z.number().int().describe('Entries the account may have, all products together'),
});
