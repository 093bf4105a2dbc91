// SQL of the one-time links (dashboard_tokens, migrations/0070_dashboard.sql). Tokens arrive here
// already hashed (sha256): the random values themselves are never stored.
import { withTransaction, type Pool } from '#common/db/pool.ts';
import type { AccountStatus } from '#common/accounts/accounts.ts';
import { recordAudit } from '#common/audit/record.ts';

/** The account a link belongs to. */
export interface LinkOwner {
  accountId: string;
  email: string;
  status: AccountStatus;
}

/** The account a usable (unused, unexpired) link belongs to. */
export async function peekToken(pool: Pool, hash: Buffer): Promise<LinkOwner | undefined> {
  const { rows } = await pool.query<LinkOwner>(
    `SELECT a.id AS "accountId", a.email, a.status FROM dashboard_tokens t JOIN accounts a ON a.id = t.account_id
      WHERE t.token_hash = $1 AND t.used_at IS NULL AND t.expires_at > now()`,
    [hash],
  );
  return rows[0];
}

/**
 * Uses the link and sets the password in one transaction: the link works once, every other open
 * link of the account stops working, and every session of the account ends (a password change).
 * Two links of one account used at once take turns on the account row first: each holding its own
 * link while waiting for the other's password row, they deadlocked (40P01, a 500); now the second
 * finds its link voided by the first.
 */
export async function setPasswordWithToken(
  pool: Pool,
  hash: Buffer,
  passwordHash: string,
  /** The address that used the link, for the audit entry `password.set`. */
  ip: string | null = null,
): Promise<string | undefined> {
  return withTransaction(pool, async (client) => {
    // NO KEY UPDATE: the account's sessions and other rows referencing it may still be inserted.
    // The account's row first, as the audit log's lock order has it (docs/adr/0079).
    const owner = await client.query<{ email: string; purpose: string }>(
      `SELECT a.email, t.purpose FROM dashboard_tokens t JOIN accounts a ON a.id = t.account_id
        WHERE t.token_hash = $1 FOR NO KEY UPDATE OF a`,
      [hash],
    );
    if (owner.rowCount !== 1) return undefined;
    const { rows } = await client.query<{ account_id: string }>(
      `UPDATE dashboard_tokens SET used_at = now() WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()
        RETURNING account_id`,
      [hash],
    );
    const accountId = rows[0]?.account_id;
    if (!accountId) return undefined;
    await client.query(
      `INSERT INTO dashboard_credentials (account_id, password_hash) VALUES ($1, $2)
       ON CONFLICT (account_id) DO UPDATE SET password_hash = EXCLUDED.password_hash, updated_at = now()`,
      [accountId, passwordHash],
    );
    await client.query(
      'UPDATE dashboard_tokens SET used_at = now() WHERE account_id = $1 AND used_at IS NULL',
      [accountId],
    );
    await client.query('DELETE FROM dashboard_sessions WHERE account_id = $1', [accountId]);
    // Who: the account's own email (whoever holds its link acts as it); never the link or password.
    const { email, purpose } = owner.rows[0]!;
    await recordAudit(client, {
      accountId,
      actor: { kind: 'dashboard', id: email, ip },
      action: 'password.set',
      target: { type: 'account', id: accountId },
      details: { link: purpose },
    });
    return accountId;
  });
}

/** The active account with this email (case-insensitive), if any: whom a reset link may go to. */
export async function activeAccountByEmail(pool: Pool, email: string): Promise<LinkOwner | undefined> {
  const { rows } = await pool.query<LinkOwner>(
    `SELECT id AS "accountId", email, status FROM accounts WHERE lower(email) = lower($1) AND status = 'active'`,
    [email],
  );
  return rows[0];
}
