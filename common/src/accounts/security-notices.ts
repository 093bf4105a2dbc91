// Security notices (docs/alerts.md "Security notices"): an email to the account's owner for every
// two-factor change and for a sign-in from a new browser, queued in the outbox in the transaction
// of the change like every email (docs/adr/0075) and rendered by the worker when it is sent
// (worker/src/jobs/render-security.ts). The payload says what happened, when and from where; never
// a secret.
import { randomUUID } from 'node:crypto';
import type { Queryable } from '../audit/record.ts';

export type SecurityEvent =
  'two_factor_enabled' | 'two_factor_disabled' | 'two_factor_reset' | 'new_browser_sign_in';

export interface SecurityNoticePayload {
  event: SecurityEvent;
  /** ISO 8601, UTC. */
  at: string;
  ip: string | null;
  /** The browser as a person reads it ("Firefox 128 on Linux"), for a sign-in. */
  browser?: string;
}

export async function queueSecurityNotice(
  db: Queryable,
  accountId: string,
  notice: Omit<SecurityNoticePayload, 'at'>,
): Promise<void> {
  // An IPv4 address as the socket gives it (::ffff:a.b.c.d) is written as IPv4, as the audit log does.
  const ip = notice.ip?.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/i, '$1') ?? null;
  const payload: SecurityNoticePayload = { ...notice, ip, at: new Date().toISOString() };
  await db.query('SELECT email_enqueue($1, $2, $3, $4::jsonb)', [
    accountId,
    'security_notice',
    `${notice.event}:${randomUUID()}`,
    JSON.stringify(payload),
  ]);
}
