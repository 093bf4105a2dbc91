// Account lifecycle, shared by the admin API, the gateway's tests and the dev seed: create an
// account with its primary key, proxy credentials and alert settings; suspend. Buying bandwidth is
// the billing room's (common/src/billing/purchases.ts).
import { AppError } from '../errors.ts';
import { SQLSTATE, sqlState, withTransaction, type Pool } from '../db/pool.ts';
import { newProxyPassword, newProxyUsername, seal, sha256, unseal } from '../secrets.ts';
import { insertPrimaryKey } from './keys.ts';
import { lockAccountForAudit, recordAudit, type AuditActor } from '../audit/record.ts';

export type AccountStatus = 'active' | 'suspended';

export interface NewAccount {
  id: string;
  email: string;
  status: AccountStatus;
  apiKey: string;
  proxyUsername: string;
  proxyPassword: string;
}

export async function createAccount(
  pool: Pool,
  input: { email: string },
  credentialsKey: Buffer,
  actor?: AuditActor,
): Promise<NewAccount> {
  try {
    return await withTransaction(pool, async (client) => {
      const { rows } = await client.query<{ id: string; email: string; status: AccountStatus }>(
        'INSERT INTO accounts (email) VALUES ($1) RETURNING id, email, status',
        [input.email],
      );
      const account = rows[0]!;
      const key = await insertPrimaryKey(client, account.id);
      const proxyUsername = newProxyUsername();
      const proxyPassword = newProxyPassword();
      await client.query(
        `INSERT INTO proxy_credentials (account_id, username, password_enc, password_sha256) VALUES ($1, $2, $3, $4)`,
        [account.id, proxyUsername, seal(credentialsKey, proxyPassword), sha256(proxyPassword)],
      );
      await client.query('INSERT INTO alert_settings (account_id) VALUES ($1)', [account.id]);
      if (actor)
        await recordAudit(client, {
          accountId: account.id,
          actor,
          action: 'account.created',
          target: { type: 'account', id: account.id },
          details: { email: account.email, primaryKeyPrefix: key.prefix },
        });
      return { ...account, apiKey: key.apiKey, proxyUsername, proxyPassword };
    });
  } catch (err) {
    if (sqlState(err) === SQLSTATE.UNIQUE_VIOLATION) throw new AppError('EMAIL_TAKEN');
    throw err;
  }
}

/**
 * Suspends or reactivates; false when the account does not exist. A suspension ends the account's
 * dashboard sessions for good. With an actor, the change goes
 * to the audit log (account.suspended, account.reactivated) when the status changed.
 */
export async function setAccountStatus(
  pool: Pool,
  accountId: string,
  status: AccountStatus,
  actor?: AuditActor,
): Promise<boolean> {
  return withTransaction(pool, async (client) => {
    const { rows } = await client.query<{ status: AccountStatus }>(
      // NO KEY UPDATE, as the UPDATE alone took: rows referencing the account (leases, usage, the
      // audit entry) may still be written meanwhile.
      'SELECT status FROM accounts WHERE id = $1 FOR NO KEY UPDATE',
      [accountId],
    );
    const before = rows[0]?.status;
    if (before === undefined) return false;
    await client.query('UPDATE accounts SET status = $2, updated_at = now() WHERE id = $1', [
      accountId,
      status,
    ]);
    // A suspension ends the account's dashboard sessions and any sign-in waiting for its code:
    // reactivating the account must not bring them back (docs/security.md, "Sessions").
    if (status === 'suspended') {
      await client.query('DELETE FROM dashboard_sessions WHERE account_id = $1', [accountId]);
      await client.query('DELETE FROM dashboard_sign_in_challenges WHERE account_id = $1', [accountId]);
    }
    if (actor && before !== status)
      await recordAudit(client, {
        accountId,
        actor,
        action: status === 'suspended' ? 'account.suspended' : 'account.reactivated',
        target: { type: 'account', id: accountId },
        details: { from: before, to: status },
      });
    return true;
  });
}

/** Issues a new proxy password; the old one stops working on every gateway within a second. */
export async function resetProxyPassword(
  pool: Pool,
  accountId: string,
  credentialsKey: Buffer,
  actor?: AuditActor,
): Promise<string> {
  const password = newProxyPassword();
  return withTransaction(pool, async (client) => {
    if (actor && !(await lockAccountForAudit(client, accountId))) throw new AppError('ACCOUNT_NOT_FOUND');
    const { rows } = await client.query<{ username: string }>(
      `UPDATE proxy_credentials SET password_enc = $2, password_sha256 = $3, updated_at = now() WHERE account_id = $1
       RETURNING username`,
      [accountId, seal(credentialsKey, password), sha256(password)],
    );
    if (!rows[0]) throw new AppError('ACCOUNT_NOT_FOUND');
    if (actor)
      await recordAudit(client, {
        accountId,
        actor,
        action: 'proxy_password.reset',
        target: { type: 'proxy_credentials', id: rows[0].username },
      });
    return password;
  });
}

export async function readProxyCredentials(
  pool: Pool,
  accountId: string,
  credentialsKey: Buffer,
): Promise<{ username: string; password: string }> {
  const { rows } = await pool.query<{ username: string; password_enc: Buffer }>(
    'SELECT username, password_enc FROM proxy_credentials WHERE account_id = $1',
    [accountId],
  );
  const row = rows[0];
  if (!row) throw new AppError('ACCOUNT_NOT_FOUND');
  return { username: row.username, password: unseal(credentialsKey, row.password_enc) };
}
