import type { Pool } from '#common/db/pool.ts';

export interface TakeResult {
  granted: number;
  remaining: number;
  retryAfterMs: number;
}

/** One statement: GCRA on the database clock (migrations/0010, api_rate_limit_take). */
export async function takeTokens(
  pool: Pool,
  bucket: string,
  intervalUs: number,
  burst: number,
  want: number,
): Promise<TakeResult> {
  const { rows } = await pool.query<{ granted: number; remaining: number; retry_after_us: number }>(
    'SELECT granted, remaining, retry_after_us FROM api_rate_limit_take($1, $2, $3, $4)',
    [bucket, intervalUs, burst, want],
  );
  const row = rows[0]!;
  return { granted: row.granted, remaining: row.remaining, retryAfterMs: row.retry_after_us / 1000 };
}
