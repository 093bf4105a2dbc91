// ip_allowlist (migrations/0084): list, add under the per-account cap, remove. The cap is counted
// under the account row's lock, so two concurrent additions cannot both take the last place; one
// owner per address and product is the table's exclusion constraint, whose writers take turns per
// product (migrations/0086) so that a lost race is a violation (409), not a deadlock (500).
import { AppError } from '#common/errors.ts';
import { sqlState, SQLSTATE, withTransaction, type Pool } from '#common/db/pool.ts';
import { lockAccountForAudit, recordAudit, type AuditActor } from '#common/audit/record.ts';
import type { AllowlistCreate, AllowlistEntry } from './schemas.ts';

const COLUMNS = `id, product, cidr::text AS cidr, targeting,
                 to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "createdAt"`;

/** The account's entries, oldest first; undefined when the account does not exist. */
export async function listAllowlist(pool: Pool, accountId: string): Promise<AllowlistEntry[] | undefined> {
  const { rows } = await pool.query<{ entries: AllowlistEntry[] | null }>(
    `SELECT (SELECT jsonb_agg(to_jsonb(e) ORDER BY e."createdAt", e.id)
               FROM (SELECT ${COLUMNS} FROM ip_allowlist WHERE account_id = a.id) e) AS entries
       FROM accounts a WHERE a.id = $1`,
    [accountId],
  );
  return rows[0] && (rows[0].entries ?? []);
}

export function addAllowlistEntry(
  pool: Pool,
  accountId: string,
  entry: AllowlistCreate,
  limit: number,
  actor?: AuditActor,
): Promise<AllowlistEntry> {
  return withTransaction(pool, async (client) => {
    const locked = await client.query('SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE', [accountId]);
    if (locked.rowCount !== 1) throw new AppError('ACCOUNT_NOT_FOUND');
    const { rows: count } = await client.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM ip_allowlist WHERE account_id = $1',
      [accountId],
    );
    if ((count[0]?.n ?? 0) >= limit) throw new AppError('ALLOWLIST_LIMIT', { limit });
    let added: AllowlistEntry;
    try {
      const { rows } = await client.query<AllowlistEntry>(
        `INSERT INTO ip_allowlist (account_id, product, cidr, targeting) VALUES ($1, $2, $3, $4)
         RETURNING ${COLUMNS}`,
        [accountId, entry.product, entry.cidr, entry.targeting ?? null],
      );
      added = rows[0]!;
    } catch (err) {
      if (sqlState(err) === SQLSTATE.UNIQUE_VIOLATION) throw new AppError('ALLOWLIST_ENTRY_EXISTS');
      if (sqlState(err) === SQLSTATE.EXCLUSION_VIOLATION) throw new AppError('ALLOWLIST_OVERLAP');
      throw err;
    }
    if (actor)
      await recordAudit(client, {
        accountId,
        actor,
        action: 'ip_allowlist.added',
        target: { type: 'ip_allowlist_entry', id: added.id },
        details: { product: added.product, cidr: added.cidr, targeting: added.targeting },
      });
    return added;
  });
}

/** Removes one entry of the account; false when there is none with that id. */
export async function removeAllowlistEntry(
  pool: Pool,
  accountId: string,
  id: string,
  actor?: AuditActor,
): Promise<boolean> {
  return withTransaction(pool, async (client) => {
    if (actor && !(await lockAccountForAudit(client, accountId))) return false;
    const { rows } = await client.query<{ product: string; cidr: string; targeting: unknown }>(
      'DELETE FROM ip_allowlist WHERE account_id = $1 AND id = $2 RETURNING product, cidr::text AS cidr, targeting',
      [accountId, id],
    );
    if (rows[0] && actor)
      await recordAudit(client, {
        accountId,
        actor,
        action: 'ip_allowlist.removed',
        target: { type: 'ip_allowlist_entry', id },
        details: { ...rows[0] },
      });
    return rows.length === 1;
  });
}
