// target_usage (migrations/0082): read per day, and the account's opt-out switch.
import { withTransaction, type Pool } from '#common/db/pool.ts';
import type { Product } from '#common/products.ts';
import { recordAudit, type AuditActor } from '#common/audit/record.ts';

export interface TargetRow {
  domain: string;
  product: Product;
  bytes: number;
  requests: number;
}

/**
 * The day's rows, most bytes first; undefined when the account does not exist. Rows are kept per
 * sender (target_usage.sub_user: '' the account's own credentials, else a sub-user's id) and added
 * up here, unless one sub-user is asked for.
 */
export async function readTargets(
  pool: Pool,
  accountId: string,
  date: string,
  product: Product | undefined,
  subUser?: string,
): Promise<{ enabled: boolean; targets: TargetRow[] } | undefined> {
  const { rows } = await pool.query<{ enabled: boolean; targets: TargetRow[] }>(
    `SELECT a.target_stats AS enabled,
            coalesce((SELECT jsonb_agg(jsonb_build_object('domain', t.domain, 'product', t.product,
                                                          'bytes', t.bytes, 'requests', t.requests)
                                       ORDER BY t.bytes DESC, t.domain, t.product)
                        FROM (SELECT u.domain, u.product, sum(u.bytes)::bigint AS bytes,
                                     sum(u.requests)::bigint AS requests
                                FROM target_usage u
                               WHERE u.account_id = a.id AND u.day = $2::date
                                 AND ($3::text IS NULL OR u.product = $3)
                                 AND ($4::text IS NULL OR u.sub_user = $4)
                               GROUP BY u.domain, u.product) t),
                     '[]'::jsonb) AS targets
       FROM accounts a WHERE a.id = $1`,
    [accountId, date, product ?? null, subUser?.toLowerCase() ?? null],
  );
  return rows[0];
}

export async function readTargetStatsEnabled(pool: Pool, accountId: string): Promise<boolean | undefined> {
  const { rows } = await pool.query<{ enabled: boolean }>(
    'SELECT target_stats AS enabled FROM accounts WHERE id = $1',
    [accountId],
  );
  return rows[0]?.enabled;
}

/**
 * Switches target statistics; off deletes what is stored, in the same transaction. The account row
 * lock makes a gateway flush in progress finish first (target_usage_record locks it too), so
 * nothing it wrote survives. Returns false when the account does not exist.
 */
export function setTargetStats(
  pool: Pool,
  accountId: string,
  enabled: boolean,
  actor?: AuditActor,
): Promise<boolean> {
  return withTransaction(pool, async (client) => {
    // The old value under the row lock the UPDATE takes anyway: an unchanged switch is not audited.
    const before = await client.query<{ target_stats: boolean }>(
      'SELECT target_stats FROM accounts WHERE id = $1 FOR NO KEY UPDATE',
      [accountId],
    );
    if (!before.rowCount) return false;
    await client.query('UPDATE accounts SET target_stats = $2 WHERE id = $1', [accountId, enabled]);
    if (!enabled) await client.query('DELETE FROM target_usage WHERE account_id = $1', [accountId]);
    if (actor && before.rows[0]!.target_stats !== enabled)
      await recordAudit(client, {
        accountId,
        actor,
        action: 'target_stats.updated',
        target: { type: 'account', id: accountId },
        details: { enabled },
      });
    return true;
  });
}
