// One-time links to set the dashboard password: an invite (admin API, CLI) or a reset ("Forgot
// password?"). The link carries 256 random bits; only their sha256 is stored. The email is queued
// in the outbox in the same transaction as the link, like every other email (docs/adr/0006), and
// the worker sends it; the migration blanks the body once it is sent. The admin API and the
// dashboard both create links, so they live here, in a feature of their own (docs/adr/0062).
import { randomBytes } from 'node:crypto';
import { withTransaction, type Pool } from '#common/db/pool.ts';
import { AppError } from '#common/errors.ts';
import { recordAudit, type AuditActor } from '#common/audit/record.ts';
import { sha256 } from '#common/secrets.ts';
import { linkEmail, type LinkPurpose } from './emails.ts';

export const INVITE_TTL_SECONDS = 7 * 24 * 3600;
export const RESET_TTL_SECONDS = 3600;
export const SET_PASSWORD_PATH = '/set-password';

export const hashToken = (token: string): Buffer => sha256(token);
const newToken = (): string => randomBytes(32).toString('base64url');

export async function createPasswordLink(
  pool: Pool,
  accountId: string,
  purpose: LinkPurpose,
  baseUrl: string,
  /** The audit entry written in the link's transaction (never the link itself). */
  audit?: { actor: AuditActor; action: string },
): Promise<{ url: string; expiresAt: Date }> {
  const token = newToken();
  const hash = hashToken(token);
  const url = `${baseUrl.replace(/\/+$/, '')}${SET_PASSWORD_PATH}?token=${token}`;
  return withTransaction(pool, async (client) => {
    const account = await client.query<{ email: string }>(
      'SELECT email FROM accounts WHERE id = $1 FOR UPDATE',
      [accountId],
    );
    const email = account.rows[0]?.email;
    if (!email) throw new AppError('ACCOUNT_NOT_FOUND');
    const ttl = purpose === 'invite' ? INVITE_TTL_SECONDS : RESET_TTL_SECONDS;
    const { rows } = await client.query<{ expires_at: Date }>(
      `INSERT INTO dashboard_tokens (token_hash, account_id, purpose, expires_at)
       VALUES ($1, $2, $3, now() + make_interval(secs => $4)) RETURNING expires_at`,
      [hash, accountId, purpose, ttl],
    );
    const expiresAt = rows[0]!.expires_at;
    const message = linkEmail(purpose, url, expiresAt);
    const id = hash.toString('hex').slice(0, 32);
    // The one way to queue an email (email_enqueue: its dedupe key and Message-ID; docs/adr/0075).
    await client.query('SELECT email_enqueue($1, $2, $3, NULL, $4, $5)', [
      accountId,
      message.kind,
      id,
      message.subject,
      message.text,
    ]);
    if (audit) {
      await recordAudit(client, {
        accountId,
        actor: audit.actor,
        action: audit.action,
        target: { type: 'account', id: accountId },
        details: { expiresAt: expiresAt.toISOString() },
      });
    }
    return { url, expiresAt };
  });
}

/**
 * The base of every link in an email: PROXYFLEET_DASHBOARD_URL, else the API's own listen address
 * (`npm start`). Never Host, X-Forwarded-Host or Forwarded: a forged header would mail the
 * victim a link to the attacker's host (docs/security.md, "Links in emails").
 */
export function linkBaseFrom(configured: string | undefined, listen: { host: string; port: number }): string {
  if (configured) return configured.replace(/\/+$/, '');
  const wildcard = listen.host === '' || listen.host === '0.0.0.0' || listen.host === '::';
  const host = wildcard ? '127.0.0.1' : listen.host;
  return `http://${host.includes(':') ? `[${host}]` : host}:${listen.port}`;
}
