// The usage history tables (migrations/0145, docs/adr/0103): the buckets of one account over a
// range, all products and sub-users added up unless one is named.
import type { Pool } from '#common/db/pool.ts';
import type { Product } from '#common/products.ts';
import type { Granularity } from './history-schemas.ts';

/** The tables' counters, in the order of HistoryRow's `counts`. */
export const HISTORY_COLUMNS = [
  'bytes_up',
  'bytes_down',
  'requests',
  'succeeded',
  'refused_no_bandwidth',
  'refused_bad_credentials',
  'refused_throttled',
  'refused_target_not_allowed',
  'refused_no_exit',
  'upstream_connect_error',
  'upstream_timeout',
  'other',
  'status_2xx',
  'status_3xx',
  'status_4xx',
  'status_5xx',
] as const;

export interface HistoryRow {
  /** Start of the bucket, ms since the epoch. */
  start: number;
  counts: number[];
}

export interface HistoryFilter {
  accountId: string;
  granularity: Granularity;
  from: Date;
  to: Date;
  product: Product | undefined;
  subUser: string | undefined;
}

const SUMS = HISTORY_COLUMNS.map((c) => `sum(${c})::float8`).join(', ');

/** The buckets that have traffic, oldest first (the caller fills the gaps). */
export async function readHistory(pool: Pool, f: HistoryFilter): Promise<HistoryRow[]> {
  const [table, column, from, to] =
    f.granularity === 'hour'
      ? ['usage_history_hourly', 'hour', f.from.toISOString(), f.to.toISOString()]
      : ['usage_history_daily', 'day', f.from.toISOString().slice(0, 10), f.to.toISOString().slice(0, 10)];
  const { rows } = await pool.query<{ start: number; counts: number[] }>(
    `SELECT (extract(epoch FROM ${column}::timestamp AT TIME ZONE 'UTC') * 1000)::float8 AS start,
            ARRAY[${SUMS}] AS counts
       FROM ${table}
      WHERE account_id = $1 AND ${column} >= $2 AND ${column} < $3
        AND ($4::text IS NULL OR product = $4) AND ($5::text IS NULL OR sub_user = $5)
      GROUP BY ${column} ORDER BY ${column}`,
    [f.accountId, from, to, f.product ?? null, f.subUser ?? null],
  );
  return rows;
}

/** Whether the sub-user is the account's own (another account's is refused like an unknown one). */
export async function ownsSubUser(pool: Pool, accountId: string, subUserId: string): Promise<boolean> {
  const { rowCount } = await pool.query('SELECT 1 FROM sub_users WHERE id = $1 AND account_id = $2', [
    subUserId,
    accountId,
  ]);
  return (rowCount ?? 0) > 0;
}
