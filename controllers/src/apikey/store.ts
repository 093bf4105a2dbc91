// The ApiKey controller's SQL: its mapping table (migrations/0030) and the reads it needs from the
// REST API's api_keys and change_log. Key writes go through common/src/accounts/keys.ts.
import type { Pool } from '#common/db/pool.ts';

export interface Mapping {
  apiKeyId: string | null;
  rotation: number;
  changeId: number | null;
  rotatedAt: Date;
  /** The mapped key row; undefined when it no longer exists. */
  key?: { revokedAt: Date | null; prefix: string; hash: Buffer; name: string; kind: 'primary' | 'named' };
}

export async function readMapping(pool: Pool, uid: string): Promise<Mapping | undefined> {
  const { rows } = await pool.query<{
    api_key_id: string | null;
    rotation: number;
    change_id: number | null;
    rotated_at: Date;
    revoked_at: Date | null;
    prefix: string | null;
    key_hash: Buffer | null;
    key_name: string | null;
    kind: 'primary' | 'named' | null;
  }>(
    `SELECT m.api_key_id, m.rotation, m.change_id, m.rotated_at, k.revoked_at, k.prefix, k.key_hash, k.name AS key_name, k.kind
       FROM operator_api_keys m LEFT JOIN api_keys k ON k.id = m.api_key_id
      WHERE m.resource_uid = $1`,
    [uid],
  );
  const r = rows[0];
  if (!r) return undefined;
  return {
    apiKeyId: r.api_key_id,
    rotation: r.rotation,
    changeId: r.change_id,
    rotatedAt: r.rotated_at,
    key: r.key_hash
      ? { revokedAt: r.revoked_at, prefix: r.prefix!, hash: r.key_hash, name: r.key_name!, kind: r.kind! }
      : undefined,
  };
}

export async function saveMapping(
  pool: Pool,
  m: {
    uid: string;
    namespace: string;
    name: string;
    accountId: string;
    apiKeyId: string;
    rotation: number;
    changeId: number;
  },
): Promise<void> {
  await pool.query(
    `INSERT INTO operator_api_keys (resource_uid, namespace, name, account_id, api_key_id, rotation, change_id, rotated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, now())
     ON CONFLICT (resource_uid) DO UPDATE SET api_key_id = EXCLUDED.api_key_id, rotation = EXCLUDED.rotation,
       change_id = EXCLUDED.change_id, rotated_at = now(), updated_at = now()`,
    [m.uid, m.namespace, m.name, m.accountId, m.apiKeyId, m.rotation, m.changeId],
  );
}

export async function setMappingChange(pool: Pool, uid: string, changeId: number): Promise<void> {
  await pool.query(
    'UPDATE operator_api_keys SET change_id = $2, updated_at = now() WHERE resource_uid = $1',
    [uid, changeId],
  );
}

export async function deleteMapping(pool: Pool, uid: string): Promise<void> {
  await pool.query('DELETE FROM operator_api_keys WHERE resource_uid = $1', [uid]);
}

export async function findKeyByHash(
  pool: Pool,
  hash: Buffer,
): Promise<{ id: string; accountId: string; revokedAt: Date | null } | undefined> {
  const { rows } = await pool.query<{ id: string; account_id: string; revoked_at: Date | null }>(
    'SELECT id, account_id, revoked_at FROM api_keys WHERE key_hash = $1',
    [hash],
  );
  const r = rows[0];
  return r && { id: r.id, accountId: r.account_id, revokedAt: r.revoked_at };
}

/**
 * The change_log head. Read after our write committed, it is at or above our change's id (ids are
 * assigned before commit), so a cache at this version has our change: a cheap primary-key read
 * instead of searching change_log by subject.
 */
export { changeLogHead } from '#common/db/changes.ts';
