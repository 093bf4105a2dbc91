// The audit log as the API shows it (docs/api.md "Audit log"): entries newest first, paged by an
// opaque cursor (docs/adr/0079).
import { z } from 'zod';

export const AUDIT_PAGE_DEFAULT = 50;
export const AUDIT_PAGE_MAX = 200;

/** A cursor is the last entry's id, wrapped so that clients treat it as opaque: base64url("a1:<id>"). */
export const encodeCursor = (id: string): string => Buffer.from(`a1:${id}`).toString('base64url');

const CURSOR = /^a1:([1-9][0-9]{0,17})$/;

/** The id a cursor this API issued names; undefined for anything else. */
export function decodeCursor(cursor: string): string | undefined {
  if (!/^[A-Za-z0-9_-]{1,40}$/.test(cursor)) return undefined;
  return CURSOR.exec(Buffer.from(cursor, 'base64url').toString('latin1'))?.[1];
}

export const auditLogQuery = z.strictObject({
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(AUDIT_PAGE_MAX)
    .default(AUDIT_PAGE_DEFAULT)
    .describe(`Entries per page, 1-${AUDIT_PAGE_MAX} (default ${AUDIT_PAGE_DEFAULT})`),
  cursor: z
    .string()
    .optional()
    .transform((c, ctx) => {
      if (c === undefined) return undefined;
      const id = decodeCursor(c);
      if (id === undefined) {
        ctx.addIssue({ code: 'custom', message: 'must be a nextCursor this API returned' });
        return z.NEVER;
      }
      return id;
    })
    .describe("The previous page's nextCursor; absent: the newest entries"),
});
export type AuditLogQuery = z.infer<typeof auditLogQuery>;

export const auditEntrySchema = z.object({
  id: z.string().describe("The entry's id (entries are numbered in the order they were written)"),
  at: z.string().describe('When, ISO 8601 UTC'),
  actor: z.object({
    kind: z.enum(['api_key', 'dashboard', 'admin', 'system']),
    id: z
      .string()
      .describe("The API key's id, the signed-in email, admin-token, or the component (auto-refill)"),
    ip: z.string().nullable().describe("The caller's address; null when there is none (system)"),
  }),
  action: z.string().describe('<resource>.<verb>, e.g. api_key.created (docs/security.md "Audit log")'),
  target: z.object({ type: z.string(), id: z.string() }).nullable(),
  details: z.record(z.string(), z.unknown()).describe('What changed; never a secret'),
});
export type AuditEntryView = z.infer<typeof auditEntrySchema>;

export const auditLogSchema = z.object({
  entries: z.array(auditEntrySchema).describe('Newest first'),
  nextCursor: z.string().nullable().describe('Pass as ?cursor= for older entries; null on the last page'),
});
export type AuditLogPage = z.infer<typeof auditLogSchema>;
