// Proxy lists in the formats customers paste into their tools (docs/api.md "Proxy list formats",
// docs/adr/0087): the colon form, URLs, CSV, JSON, or a template of their own with {host}
// {port} {user} {pass}. One function serves POST /proxies/generate, GET /proxies/list and the
// dashboard's generator and downloads, so the three cannot disagree.
import { z } from 'zod';
import { proxyUrl, type Credentials, type ProxyScheme } from './format.ts';

export const LIST_FORMATS = ['colon', 'url', 'csv', 'json', 'template'] as const;
export type ListFormat = (typeof LIST_FORMATS)[number];

export const TEMPLATE_PLACEHOLDERS = ['host', 'port', 'user', 'pass'] as const;
type Placeholder = (typeof TEMPLATE_PLACEHOLDERS)[number];
/** Longest template: a line of a proxy tool's config, with room; thousands of characters are a mistake. */
export const MAX_TEMPLATE_LENGTH = 200;

const PLACEHOLDER = /\{([^{}]*)\}/g;
const NAMED = TEMPLATE_PLACEHOLDERS.map((p) => `{${p}}`).join(', ');

export const listFormat = z
  .enum(LIST_FORMATS, { error: `must be one of ${LIST_FORMATS.join(', ')}` })
  .describe(
    'Additive: the list also as `lines` (colon, url, csv with a header line, template) or `entries` (json); docs/api.md "Proxy list formats"',
  );

export const listTemplate = z
  .string()
  .max(MAX_TEMPLATE_LENGTH, `must be at most ${MAX_TEMPLATE_LENGTH} characters`)
  .superRefine((template, ctx) => {
    if (/[\u0000-\u001f\u007f]/.test(template))
      ctx.addIssue({ code: 'custom', message: 'must be one line without control characters' });
    const unknown = [...template.matchAll(PLACEHOLDER)]
      .map((m) => m[1]!)
      .filter((name) => !(TEMPLATE_PLACEHOLDERS as readonly string[]).includes(name));
    if (unknown.length)
      ctx.addIssue({
        code: 'custom',
        message: `has unknown placeholder ${unknown.map((u) => `{${u}}`).join(', ')}; use ${NAMED}`,
      });
  })
  .describe(
    `With format template: one line per proxy, ${NAMED} replaced (at most ${MAX_TEMPLATE_LENGTH} characters)`,
  );

/** The format and template pair: a template only with format template, and format template only with one. */
export function checkFormatPair(
  req: { format?: ListFormat | undefined; template?: string | undefined },
  issue: (path: string, message: string) => void,
): void {
  if (req.format === 'template' && req.template === undefined)
    issue('template', 'is required with format template');
  if (req.template !== undefined && req.format !== 'template')
    issue('template', 'applies to format template only');
}

export interface ProxyParts extends Credentials {
  host: string;
  port: number;
}

export interface ListEntry extends ProxyParts {
  url?: string;
}

export const listEntrySchema = z.object({
  host: z.string(),
  port: z.number().int(),
  username: z.string(),
  password: z.string(),
  url: z.string().optional().describe('With a scheme: <scheme>://<username>:<password>@<host>:<port>'),
});

/** The fields an answer gains with `format`. */
export const formattedFields = {
  format: z.enum(LIST_FORMATS).optional().describe('The format asked for'),
  lines: z
    .array(z.string())
    .optional()
    .describe('colon, url, template: one line per proxy; csv: a header line, then one per proxy'),
  entries: z.array(listEntrySchema).optional().describe('json: one object per proxy'),
};

export interface Formatted {
  format: ListFormat;
  lines?: string[];
  entries?: ListEntry[];
}

const CSV_NEEDS_QUOTES = /[",\r\n]/;
const csvField = (value: string) => (CSV_NEEDS_QUOTES.test(value) ? `"${value.replace(/"/g, '""')}"` : value);

const fill = (template: string, p: ProxyParts) => {
  const values: Record<Placeholder, string> = {
    host: p.host,
    port: String(p.port),
    user: p.username,
    pass: p.password,
  };
  return template.replace(PLACEHOLDER, (whole, name: string) => values[name as Placeholder] ?? whole);
};

/**
 * The list in `format`. `scheme` is the URLs' (format url: http when absent; csv and json gain a
 * url column or field only when it is given).
 */
export function formatList(
  proxies: ProxyParts[],
  format: ListFormat,
  options: { scheme?: ProxyScheme | undefined; template?: string | undefined } = {},
): Formatted {
  const url = (p: ProxyParts, scheme: ProxyScheme) => proxyUrl(scheme, p.host, p.port, p);
  switch (format) {
    case 'colon':
      return { format, lines: proxies.map((p) => `${p.host}:${p.port}:${p.username}:${p.password}`) };
    case 'url':
      return { format, lines: proxies.map((p) => url(p, options.scheme ?? 'http')) };
    case 'template':
      return { format, lines: proxies.map((p) => fill(options.template ?? '', p)) };
    case 'csv': {
      const scheme = options.scheme;
      const header = ['host', 'port', 'username', 'password', ...(scheme ? ['url'] : [])].join(',');
      const row = (p: ProxyParts) =>
        [p.host, String(p.port), p.username, p.password, ...(scheme ? [url(p, scheme)] : [])]
          .map(csvField)
          .join(',');
      return { format, lines: [header, ...proxies.map(row)] };
    }
    case 'json': {
      const scheme = options.scheme;
      return {
        format,
        entries: proxies.map((p) => ({
          host: p.host,
          port: p.port,
          username: p.username,
          password: p.password,
          ...(scheme ? { url: url(p, scheme) } : {}),
        })),
      };
    }
  }
}

/** A formatted list as a file's content: CSV with CRLF (RFC 4180), JSON indented, other lines LF. */
export function listFile(formatted: Formatted): string {
  if (formatted.entries) return `${JSON.stringify(formatted.entries, null, 2)}\n`;
  const lines = formatted.lines ?? [];
  return formatted.format === 'csv' ? `${lines.join('\r\n')}\r\n` : `${lines.join('\n')}\n`;
}
