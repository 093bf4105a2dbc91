// SQL of two-factor sign-in (migrations/0105_two_factor_and_sessions.sql): the sealed secret, the
// last accepted time step and the hashed recovery codes. Secrets arrive sealed or hashed.
import type { Pool, PoolClient } from '#common/db/pool.ts';

export interface TwoFactorState {
  /** When it was turned on; null while off. */
  enabledAt: Date | null;
  /** Turning on has started (a secret waits for its first code). */
  pending: boolean;
  recoveryCodesLeft: number;
}

export async function readState(pool: Pool, accountId: string): Promise<TwoFactorState> {
  const { rows } = await pool.query<TwoFactorState>(
    `SELECT t.enabled_at AS "enabledAt", t.enabled_at IS NULL AS pending,
            (SELECT count(*)::int FROM dashboard_recovery_codes r WHERE r.account_id = t.account_id AND r.used_at IS NULL)
              AS "recoveryCodesLeft"
       FROM dashboard_two_factor t WHERE t.account_id = $1`,
    [accountId],
  );
  return rows[0] ?? { enabledAt: null, pending: false, recoveryCodesLeft: 0 };
}

export async function isEnabled(pool: Pool, accountId: string): Promise<boolean> {
  const { rowCount } = await pool.query(
    'SELECT 1 FROM dashboard_two_factor WHERE account_id = $1 AND enabled_at IS NOT NULL',
    [accountId],
  );
  return rowCount === 1;
}

/** A new pending secret (replacing an earlier pending one); false when two-factor is already on. */
export async function putPendingSecret(pool: Pool, accountId: string, secretEnc: Buffer): Promise<boolean> {
  const { rowCount } = await pool.query(
    `INSERT INTO dashboard_two_factor (account_id, secret_enc) VALUES ($1, $2)
     ON CONFLICT (account_id) DO UPDATE SET secret_enc = EXCLUDED.secret_enc, created_at = now()
       WHERE dashboard_two_factor.enabled_at IS NULL`,
    [accountId, secretEnc],
  );
  return rowCount === 1;
}

export async function readPendingSecret(pool: Pool, accountId: string): Promise<Buffer | undefined> {
  const { rows } = await pool.query<{ secret_enc: Buffer }>(
    'SELECT secret_enc FROM dashboard_two_factor WHERE account_id = $1 AND enabled_at IS NULL',
    [accountId],
  );
  return rows[0]?.secret_enc;
}

/** The secret row, locked until the transaction ends: two codes checked at once take turns. */
export async function lockSecret(
  client: PoolClient,
  accountId: string,
): Promise<{ secretEnc: Buffer; enabledAt: Date | null; lastStep: number | null } | undefined> {
  const { rows } = await client.query<{ secretEnc: Buffer; enabledAt: Date | null; lastStep: string | null }>(
    `SELECT secret_enc AS "secretEnc", enabled_at AS "enabledAt", last_step AS "lastStep"
       FROM dashboard_two_factor WHERE account_id = $1 FOR UPDATE`,
    [accountId],
  );
  const row = rows[0];
  return row && { ...row, lastStep: row.lastStep === null ? null : Number(row.lastStep) };
}

export async function enable(
  client: PoolClient,
  accountId: string,
  step: number,
  recoveryHashes: Buffer[],
): Promise<void> {
  await client.query(
    'UPDATE dashboard_two_factor SET enabled_at = now(), last_step = $2 WHERE account_id = $1',
    [accountId, step],
  );
  await client.query('DELETE FROM dashboard_recovery_codes WHERE account_id = $1', [accountId]);
  await client.query(
    'INSERT INTO dashboard_recovery_codes (account_id, code_hash) SELECT $1, unnest($2::bytea[])',
    [accountId, recoveryHashes],
  );
}

export async function setLastStep(client: PoolClient, accountId: string, step: number): Promise<void> {
  await client.query('UPDATE dashboard_two_factor SET last_step = $2 WHERE account_id = $1', [
    accountId,
    step,
  ]);
}

/** Spends an unused recovery code; false when there is none with this hash. */
export async function spendRecoveryCode(
  client: PoolClient,
  accountId: string,
  hash: Buffer,
): Promise<boolean> {
  const { rowCount } = await client.query(
    `UPDATE dashboard_recovery_codes SET used_at = now()
      WHERE account_id = $1 AND code_hash = $2 AND used_at IS NULL`,
    [accountId, hash],
  );
  return rowCount === 1;
}

/** Removes the secret, the recovery codes and waiting sign-ins; true when two-factor was on. */
export async function remove(client: PoolClient, accountId: string): Promise<boolean> {
  const { rows } = await client.query<{ enabled: boolean }>(
    'DELETE FROM dashboard_two_factor WHERE account_id = $1 RETURNING enabled_at IS NOT NULL AS enabled',
    [accountId],
  );
  await client.query('DELETE FROM dashboard_recovery_codes WHERE account_id = $1', [accountId]);
  await client.query('DELETE FROM dashboard_sign_in_challenges WHERE account_id = $1', [accountId]);
  return rows[0]?.enabled ?? false;
}

/** Locks the account row (NO KEY UPDATE: rows referencing it may still be inserted); false when absent. */
export async function lockAccount(client: PoolClient, accountId: string): Promise<boolean> {
  const { rowCount } = await client.query('SELECT 1 FROM accounts WHERE id = $1 FOR NO KEY UPDATE', [
    accountId,
  ]);
  return rowCount === 1;
}
