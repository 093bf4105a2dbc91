// The one query on the authentication path when the key is not cached: the key's row by its
// sha256 (unique index api_keys_hash_key) and its account's status.
import type { Pool } from '#common/db/pool.ts';
import { loadKeyRows, type KeyRow } from '#common/db/change-rows.ts';

export type { KeyRow };

export async function findKeyByHash(pool: Pool, hash: Buffer): Promise<KeyRow | undefined> {
  const row = (await loadKeyRows(pool, [hash]))[0];
  return row && { keyId: row.keyId, accountId: row.accountId, revoked: row.revoked, status: row.status };
}

/** Records when keys were last used; called at most once a minute per key and process. */
export async function touchKeys(pool: Pool, keyIds: string[]): Promise<void> {
  await pool.query('UPDATE api_keys SET last_used_at = now() WHERE id = ANY($1::uuid[])', [keyIds]);
}
