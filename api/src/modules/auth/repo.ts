// The one query on the authentication path when the key is not cached: the key's row by its
// sha256 (unique index api_keys_hash_key) and its account's status.
import type { Pool } from '#common/db/pool.ts';
import type { AccountStatus } from '#common/accounts/accounts.ts';

export interface KeyRow {
  keyId: string;
  accountId: string;
  revoked: boolean;
  status: AccountStatus;
}

export async function findKeyByHash(pool: Pool, hash: Buffer): Promise<KeyRow | undefined> {
  const { rows } = await pool.query<KeyRow>(
    `SELECT k.id AS "keyId", k.account_id AS "accountId", k.revoked_at IS NOT NULL AS revoked, a.status
       FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.key_hash = $1`,
    [hash],
  );
  return rows[0];
}

/** Records when keys were last used; called at most once a minute per key and process. */
export async function touchKeys(pool: Pool, keyIds: string[]): Promise<void> {
  await pool.query('UPDATE api_keys SET last_used_at = now() WHERE id = ANY($1::uuid[])', [keyIds]);
}
