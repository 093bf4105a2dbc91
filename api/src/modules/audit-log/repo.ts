// Reads of audit_log (migrations/0110), one account's entries newest first. The write side is
// #common/audit/record.ts (and audit_record in SQL).
import type { Pool } from '#common/db/pool.ts';
import { encodeCursor, type AuditLogPage } from './schemas.ts';

interface Row {
  id: string;
  at: Date;
  actor_kind: 'api_key' | 'dashboard' | 'admin' | 'system';
  actor_id: string;
  actor_ip: string | null;
  action: string;
  target_type: string | null;
  target_id: string | null;
  details: Record<string, unknown>;
}

/** One page of the account's entries, below `before` (an entry id) when given. */
export async function readAuditLog(
  pool: Pool,
  accountId: string,
  q: { limit: number; cursor?: string | undefined },
): Promise<AuditLogPage> {
  const { rows } = await pool.query<Row>(
    `SELECT id::text AS id, at, actor_kind, actor_id, host(actor_ip) AS actor_ip, action, target_type, target_id, details
       FROM audit_log
      WHERE account_id = $1 AND ($2::bigint IS NULL OR id < $2)
      ORDER BY audit_log.id DESC LIMIT $3`,
    [accountId, q.cursor ?? null, q.limit + 1],
  );
  const page = rows.slice(0, q.limit);
  return {
    entries: page.map((r) => ({
      id: r.id,
      at: r.at.toISOString(),
      actor: { kind: r.actor_kind, id: r.actor_id, ip: r.actor_ip },
      action: r.action,
      target:
        r.target_type === null || r.target_id === null ? null : { type: r.target_type, id: r.target_id },
      details: r.details,
    })),
    nextCursor: rows.length > q.limit ? encodeCursor(page[page.length - 1]!.id) : null,
  };
}
