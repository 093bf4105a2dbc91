// The usage snapshot table (migrations/0010_api.sql): one row per account, recomputed from
// balances by whichever API process first finds it older than the refresh interval. "Used" is
// billing's one definition (billing_used: folded usage, or what gateways reported with their lease
// requests before the fold; docs/api.md "Remaining bandwidth"), the number alerts and auto-refill
// decide on. And the hourly roll-up the worker folds, read per day for the dashboard's chart.
import type { Pool } from '#common/db/pool.ts';

export interface SnapshotRow {
  balances: Record<string, { total: number; used: number } | undefined>;
  requestsCount: number;
  computedAt: Date;
  /** Age at the time of reading, by the database clock. */
  ageMs: number;
}

const COLUMNS = `balances, requests_count AS "requestsCount", computed_at AS "computedAt"`;

export async function readFreshSnapshot(
  pool: Pool,
  accountId: string,
  refreshSeconds: number,
): Promise<SnapshotRow | undefined> {
  const { rows } = await pool.query<SnapshotRow>(
    `SELECT ${COLUMNS}, (extract(epoch FROM now() - computed_at) * 1000)::float8 AS "ageMs"
       FROM api_usage_snapshots WHERE account_id = $1 AND computed_at > now() - make_interval(secs => $2)`,
    [accountId, refreshSeconds],
  );
  return rows[0];
}

/**
 * Recomputes the snapshot unless another process did so within the interval (then returns
 * undefined and the caller reads theirs): every process answers with the same numbers.
 */
export async function recomputeSnapshot(
  pool: Pool,
  accountId: string,
  refreshSeconds: number,
): Promise<SnapshotRow | undefined> {
  const { rows } = await pool.query<SnapshotRow>(
    `INSERT INTO api_usage_snapshots AS s (account_id, balances, requests_count, computed_at)
     SELECT $1,
            coalesce(jsonb_object_agg(b.product, jsonb_build_object('total', b.total_bytes, 'used', billing_used(b.used_bytes, b.reported_used_bytes)))
                     FILTER (WHERE b.product IS NOT NULL), '{}'::jsonb),
            coalesce(sum(b.requests_count), 0)::bigint,
            now()
       FROM balances b WHERE b.account_id = $1
     ON CONFLICT (account_id) DO UPDATE
        SET balances = EXCLUDED.balances, requests_count = EXCLUDED.requests_count, computed_at = EXCLUDED.computed_at
      WHERE s.computed_at <= now() - make_interval(secs => $2)
     RETURNING ${COLUMNS}, 0::float8 AS "ageMs"`,
    [accountId, refreshSeconds],
  );
  return rows[0];
}

/** A purchase makes the next read recompute, so bought bandwidth shows at once. */
export async function deleteSnapshot(pool: Pool, accountId: string): Promise<void> {
  await pool.query('DELETE FROM api_usage_snapshots WHERE account_id = $1', [accountId]);
}

export interface DailyUsage {
  day: string;
  product: string;
  bytes: number;
}

/** Bytes per day and product over the last `days` days, from the hourly roll-up the worker folds. */
export async function dailyUsage(pool: Pool, accountId: string, days: number): Promise<DailyUsage[]> {
  const { rows } = await pool.query<DailyUsage>(
    `SELECT to_char(date_trunc('day', hour AT TIME ZONE 'UTC'), 'YYYY-MM-DD') AS day, product,
            sum(bytes_up + bytes_down)::bigint AS bytes
       FROM usage_hourly WHERE account_id = $1 AND hour >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - make_interval(days => $2 - 1)
      GROUP BY 1, 2 ORDER BY 1, 2`,
    [accountId, days],
  );
  return rows;
}
