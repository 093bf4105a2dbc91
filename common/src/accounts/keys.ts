// API key lifecycle, shared by the admin API and the ApiKey controller. Only sha256(key) is
// stored; the key is returned once. Effects are immediate: every API process looks keys up in
// PostgreSQL (or a cache invalidated by change_log) on each request.
import { AppError } from '../errors.ts';
import { SQLSTATE, sqlState, withTransaction, type Pool, type PoolClient } from '../db/pool.ts';
import { issueApiKey, type IssuedKey } from '../secrets.ts';
import { lockAccountForAudit, recordAudit, type AuditActor } from '../audit/record.ts';

export const MAX_NAMED_KEYS = 10;

export interface KeyRecord {
  id: string;
  kind: 'primary' | 'named';
  name: string;
  prefix: string;
  last4: string;
  createdAt: Date;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
}

export interface CreatedKey {
  id: string;
  name: string;
  apiKey: string;
  prefix: string;
}

/** Inserts the account's primary key inside the caller's transaction. */
export async function insertPrimaryKey(
  client: PoolClient,
  accountId: string,
  issued = issueApiKey(),
): Promise<CreatedKey> {
  const { rows } = await client.query<{ id: string }>(
    `INSERT INTO api_keys (account_id, kind, name, key_hash, prefix, last4)
     VALUES ($1, 'primary', 'primary', $2, $3, $4) RETURNING id`,
    [accountId, issued.hash, issued.prefix, issued.last4],
  );
  return { id: rows[0]!.id, name: 'primary', apiKey: issued.key, prefix: issued.prefix };
}

/**
 * Replaces the primary key: the old one is revoked in the same transaction. `actor`: who did it,
 * for the audit log (docs/security.md "Audit log"), in the same transaction.
 */
export async function regeneratePrimaryKey(
  pool: Pool,
  accountId: string,
  issued: IssuedKey = issueApiKey(),
  actor?: AuditActor,
): Promise<CreatedKey> {
  return withTransaction(pool, async (client) => {
    await lockAccount(client, accountId);
    const { rows: old } = await client.query<{ prefix: string }>(
      `UPDATE api_keys SET revoked_at = now() WHERE account_id = $1 AND kind = 'primary' AND revoked_at IS NULL
       RETURNING prefix`,
      [accountId],
    );
    const created = await insertPrimaryKey(client, accountId, issued);
    if (actor)
      await recordAudit(client, {
        accountId,
        actor,
        action: 'api_key.regenerated',
        target: { type: 'api_key', id: created.id },
        details: { name: 'primary', prefix: created.prefix, replacedPrefix: old[0]?.prefix ?? null },
      });
    return created;
  });
}

/** Creates a named key; the 11th active one is refused with NAMED_KEY_LIMIT. */
export async function createNamedKey(
  pool: Pool,
  accountId: string,
  name: string,
  issued: IssuedKey = issueApiKey(),
  actor?: AuditActor,
): Promise<CreatedKey> {
  return withTransaction(pool, async (client) => {
    await lockAccount(client, accountId);
    let id: string;
    try {
      const { rows } = await client.query<{ id: string }>(
        `INSERT INTO api_keys (account_id, kind, name, key_hash, prefix, last4)
         VALUES ($1, 'named', $2, $3, $4, $5) RETURNING id`,
        [accountId, name, issued.hash, issued.prefix, issued.last4],
      );
      id = rows[0]!.id;
    } catch (err) {
      if (sqlState(err) === SQLSTATE.NAMED_KEY_LIMIT)
        throw new AppError('NAMED_KEY_LIMIT', { limit: MAX_NAMED_KEYS });
      if (sqlState(err) === SQLSTATE.UNIQUE_VIOLATION) throw new AppError('KEY_NAME_TAKEN');
      throw err;
    }
    if (actor)
      await recordAudit(client, {
        accountId,
        actor,
        action: 'api_key.created',
        target: { type: 'api_key', id },
        details: { name, prefix: issued.prefix },
      });
    return { id, name, apiKey: issued.key, prefix: issued.prefix };
  });
}

/** Revokes one key of the account; false when it does not exist or was already revoked. */
export async function revokeKey(
  pool: Pool,
  accountId: string,
  keyId: string,
  actor?: AuditActor,
): Promise<boolean> {
  return withTransaction(pool, async (client) => {
    if (actor && !(await lockAccountForAudit(client, accountId))) return false;
    const { rows } = await client.query<{ name: string; prefix: string }>(
      `UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND account_id = $2 AND revoked_at IS NULL
       RETURNING name, prefix`,
      [keyId, accountId],
    );
    const revoked = rows[0];
    if (revoked && actor)
      await recordAudit(client, {
        accountId,
        actor,
        action: 'api_key.revoked',
        target: { type: 'api_key', id: keyId },
        details: { name: revoked.name, prefix: revoked.prefix },
      });
    return revoked !== undefined;
  });
}

export async function listKeys(pool: Pool, accountId: string): Promise<KeyRecord[]> {
  const { rows } = await pool.query<{
    id: string;
    kind: 'primary' | 'named';
    name: string;
    prefix: string;
    last4: string;
    created_at: Date;
    revoked_at: Date | null;
    last_used_at: Date | null;
  }>(
    `SELECT id, kind, name, prefix, last4, created_at, revoked_at, last_used_at
       FROM api_keys WHERE account_id = $1 ORDER BY kind, created_at`,
    [accountId],
  );
  return rows.map((r) => ({
    id: r.id,
    kind: r.kind,
    name: r.name,
    prefix: r.prefix,
    last4: r.last4,
    createdAt: r.created_at,
    revokedAt: r.revoked_at,
    lastUsedAt: r.last_used_at,
  }));
}

async function lockAccount(client: PoolClient, accountId: string): Promise<void> {
  const { rowCount } = await client.query('SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE', [accountId]);
  if (rowCount !== 1) throw new AppError('ACCOUNT_NOT_FOUND');
}
