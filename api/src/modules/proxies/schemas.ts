import { z } from 'zod';
import { isCountryCode } from './countries.ts';
import { PLAN_CAPABILITIES, PRODUCTS } from '#common/products.ts';
import { PROXY_SCHEMES } from './format.ts';
import { checkFormatPair, formattedFields, listFormat, listTemplate } from './list-format.ts';

/** Most proxy strings one call generates (docs/api.md). */
export const MAX_GENERATE_COUNT = 1000;
/** Sticky session lifetime bounds in minutes (docs/adr/0012; gateways accept 1..1440). */
export const MAX_SESSION_MINUTES = 1440;

/** Letters that Unicode does not decompose into an ASCII letter and a mark. */
const FOLD: Record<string, string> = {
  ß: 'ss',
  æ: 'ae',
  œ: 'oe',
  ø: 'o',
  ł: 'l',
  đ: 'd',
  ð: 'd',
  þ: 'th',
  ı: 'i',
};

/**
 * A place name in any Latin-script spelling ("São Paulo", "Winston-Salem", "Weißensee"), folded to
 * what the gateways' credential grammar reads: lowercase, diacritics removed, spaces, hyphens,
 * apostrophes and dots dropped, then [a-z0-9]+ ("saopaulo"). Other scripts are refused with a
 * message asking for the Latin spelling (the gateways match exit labels in ASCII).
 */
export function foldPlace(name: string): string {
  return name
    .toLowerCase()
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .replace(/[ßæœøłđðþı]/g, (c) => FOLD[c] ?? c)
    .replace(/[\s\-'’.]+/g, '');
}

const place = (what: string) =>
  z
    .string()
    .max(64)
    .transform(foldPlace)
    .pipe(
      z
        .string()
        .regex(
          /^[a-z0-9]+$/,
          `must be a ${what} name in Latin letters, digits, spaces and hyphens, for example São Paulo`,
        ),
    );

const minutes = z.number().int().min(1).max(MAX_SESSION_MINUTES);

// Strict: an unknown field (a `lifeTime` typo) is a 400 naming it, never silently dropped.
export const generateRequestSchema = z
  .strictObject({
    provider: z.enum(PRODUCTS, { error: `must be one of ${PRODUCTS.join(', ')}` }),
    country: z
      .string({ error: 'must be a two-letter country code' })
      .regex(/^[A-Za-z]{2}$/, 'must be a two-letter country code (ISO 3166-1 alpha-2), for example us')
      .refine(isCountryCode, 'must be an assigned ISO 3166-1 alpha-2 country code, for example us or gb')
      .transform((s) => s.toLowerCase()),
    sessionType: z.enum(['rotating', 'sticky'], { error: 'must be rotating or sticky' }),
    count: z
      .number({ error: `must be an integer from 1 to ${MAX_GENERATE_COUNT}` })
      .int(`must be an integer from 1 to ${MAX_GENERATE_COUNT}`)
      .min(1, `must be an integer from 1 to ${MAX_GENERATE_COUNT}`)
      .max(MAX_GENERATE_COUNT, `must be an integer from 1 to ${MAX_GENERATE_COUNT}`)
      .default(1),
    state: place('state')
      .optional()
      .describe('light, basic, mobile: state name, lowercased, spaces and hyphens removed'),
    city: place('city').optional().describe('light, basic, mobile: city name (requires state)'),
    lifetime: minutes
      .optional()
      .describe('basic, datacenter, sticky only: session lifetime in minutes (1-1440)'),
    sessionDuration: minutes
      .optional()
      .describe('advanced, mobile, sticky only: session duration in minutes (1-1440)'),
    subUser: z
      .string()
      .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, 'must be a sub-user id')
      .optional()
      .describe("A sub-user's id: the strings carry its username and password instead of the account's"),
    scheme: z
      .enum(PROXY_SCHEMES, { error: 'must be http, https or socks5h' })
      .optional()
      .describe(
        'Additive: also return `urls`, the same proxies as `<scheme>://<username>:<password>@<host>:<port>`; https: TLS to the gateway (docs/gateway.md); socks5h: SOCKS5 on the same port, the gateway resolving names',
      ),
    format: listFormat.optional(),
    template: listTemplate.optional(),
  })
  .superRefine((req, ctx) => {
    const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
    checkFormatPair(req, issue);
    const plan = PLAN_CAPABILITIES[req.provider];
    const others = (minutes: 'lifetime' | 'sessionduration') =>
      PRODUCTS.filter((p) => PLAN_CAPABILITIES[p].sessionMinutes === minutes).join(' and ');
    if (req.state !== undefined && !plan.place)
      issue('state', `the ${req.provider} plan targets by country only`);
    if (req.city !== undefined && !plan.place)
      issue('city', `the ${req.provider} plan targets by country only`);
    if (req.city !== undefined && req.state === undefined) issue('city', 'city requires state');
    const given = { lifetime: req.lifetime, sessionDuration: req.sessionDuration };
    for (const [field, minutes] of [
      ['lifetime', 'lifetime'],
      ['sessionDuration', 'sessionduration'],
    ] as const) {
      if (given[field] === undefined) continue;
      if (plan.sessionMinutes !== minutes) {
        const instead =
          plan.sessionMinutes === undefined
            ? `${req.provider} has no lifetime`
            : `use ${field === 'lifetime' ? 'sessionDuration' : 'lifetime'}`;
        issue(field, `applies to ${others(minutes)}; ${instead}`);
      } else if (req.sessionType !== 'sticky') issue(field, 'applies to sticky sessions only');
    }
  });
export type GenerateRequest = z.infer<typeof generateRequestSchema>;

export const generateResponseSchema = z.object({
  success: z.literal(true),
  proxies: z.array(z.string()).describe('<host>:<port>:<username>:<password>, one per proxy'),
  urls: z
    .array(z.string())
    .optional()
    .describe(
      'With `scheme` only: the same proxies, in the same order, as <scheme>://<username>:<password>@<host>:<port>',
    ),
  ...formattedFields,
});

export const ispProxySchema = z.object({
  id: z.string(),
  host: z.string(),
  port: z.number().int(),
  username: z.string(),
  password: z.string(),
  proxy: z.string().describe('<host>:<port>:<username>:<password>'),
  country: z.string(),
  city: z.string().nullable(),
  isp: z.string().nullable(),
  status: z.enum(['active', 'suspended', 'expired']),
  expiresAt: z.string().nullable(),
  createdAt: z.string(),
  health: z
    .object({
      state: z.enum(['unchecked', 'unknown', 'online', 'offline', 'error']),
      checkedAt: z.string().nullable(),
      since: z.string().nullable().describe('When the state last changed'),
    })
    .describe(
      'Additive to the spec: the server-alert health check (docs/alerts.md); "unchecked" while server alerts are off',
    ),
  rental: z
    .object({
      subscriptionId: z.string(),
      status: z.enum(['active', 'past_due', 'cancelled', 'expired']),
      paidUntil: z.string(),
    })
    .nullable()
    .describe(
      'Additive: the subscription renting this proxy (docs/billing.md); null when none. An expired rental leaves ' +
        'the proxy listed with status "expired"',
    ),
});
export type IspProxy = z.infer<typeof ispProxySchema>;

export const listResponseSchema = z.object({
  success: z.literal(true),
  proxies: z.array(ispProxySchema),
  ...formattedFields,
});

export const listQuerySchema = z
  .strictObject({ format: listFormat.optional(), template: listTemplate.optional() })
  .superRefine((q, ctx) =>
    checkFormatPair(q, (path, message) => ctx.addIssue({ code: 'custom', path: [path], message })),
  );
export type ListQuery = z.infer<typeof listQuerySchema>;
