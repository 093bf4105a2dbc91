// SQL of the dashboard's own tables (migrations/0070_dashboard.sql). Tokens arrive here already
// hashed (sha256): the random values themselves are never stored.
import { withTransaction, type Pool } from '#common/db/pool.ts';
import type { AccountStatus } from '#common/accounts/accounts.ts';
import type { AlertsRow } from '../admin/repo.ts';

export interface Person {
  accountId: string;
  email: string;
  status: AccountStatus;
}

export interface SignInRow extends Person {
  passwordHash: string | null;
}

export async function findByEmail(pool: Pool, email: string): Promise<SignInRow | undefined> {
  const { rows } = await pool.query<SignInRow>(
    `SELECT a.id AS "accountId", a.email, a.status, c.password_hash AS "passwordHash"
       FROM accounts a LEFT JOIN dashboard_credentials c ON c.account_id = a.id WHERE lower(a.email) = lower($1)`,
    [email],
  );
  return rows[0];
}

// --- one-time links ---

/** The account a usable (unused, unexpired) link belongs to. */
export async function peekToken(pool: Pool, hash: Buffer): Promise<Person | undefined> {
  const { rows } = await pool.query<Person>(
    `SELECT a.id AS "accountId", a.email, a.status FROM dashboard_tokens t JOIN accounts a ON a.id = t.account_id
      WHERE t.token_hash = $1 AND t.used_at IS NULL AND t.expires_at > now()`,
    [hash],
  );
  return rows[0];
}

/**
 * Uses the link and sets the password in one transaction: the link works once, every other open
 * link of the account stops working, and every session of the account ends (a password change).
 * Two links of one account used at once take turns on the account row first: each holding its own
 * link while waiting for the other's password row, they deadlocked (40P01, a 500); now the second
 * finds its link voided by the first.
 */
export async function setPasswordWithToken(
  pool: Pool,
  hash: Buffer,
  passwordHash: string,
): Promise<string | undefined> {
  return withTransaction(pool, async (client) => {
    // NO KEY UPDATE: the account's sessions and other rows referencing it may still be inserted.
    const owner = await client.query(
      `SELECT 1 FROM dashboard_tokens t JOIN accounts a ON a.id = t.account_id WHERE t.token_hash = $1
         FOR NO KEY UPDATE OF a`,
      [hash],
    );
    if (owner.rowCount !== 1) return undefined;
    const { rows } = await client.query<{ account_id: string }>(
      `UPDATE dashboard_tokens SET used_at = now() WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()
        RETURNING account_id`,
      [hash],
    );
    const accountId = rows[0]?.account_id;
    if (!accountId) return undefined;
    await client.query(
      `INSERT INTO dashboard_credentials (account_id, password_hash) VALUES ($1, $2)
       ON CONFLICT (account_id) DO UPDATE SET password_hash = EXCLUDED.password_hash, updated_at = now()`,
      [accountId, passwordHash],
    );
    await client.query(
      'UPDATE dashboard_tokens SET used_at = now() WHERE account_id = $1 AND used_at IS NULL',
      [accountId],
    );
    await client.query('DELETE FROM dashboard_sessions WHERE account_id = $1', [accountId]);
    return accountId;
  });
}

// --- sessions ---

export async function insertSession(
  pool: Pool,
  s: { hash: Buffer; accountId: string; absoluteSeconds: number },
): Promise<void> {
  await pool.query(
    `INSERT INTO dashboard_sessions (token_hash, account_id, expires_at) VALUES ($1, $2, now() + make_interval(secs => $3))`,
    [s.hash, s.accountId, s.absoluteSeconds],
  );
}

/**
 * The live session's account (active accounts only), refreshing its idle clock at most once per
 * `touchSeconds`; undefined when the session is unknown, idle too long, past its absolute expiry,
 * or its account is suspended.
 */
export async function readSession(
  pool: Pool,
  hash: Buffer,
  idleSeconds: number,
  touchSeconds: number,
): Promise<Person | undefined> {
  const { rows } = await pool.query<Person & { touch: boolean }>(
    `SELECT a.id AS "accountId", a.email, a.status, s.last_seen_at < now() - make_interval(secs => $3) AS touch
       FROM dashboard_sessions s JOIN accounts a ON a.id = s.account_id
      WHERE s.token_hash = $1 AND s.expires_at > now() AND s.last_seen_at > now() - make_interval(secs => $2)
        AND a.status = 'active'`,
    [hash, idleSeconds, touchSeconds],
  );
  const row = rows[0];
  if (!row) return undefined;
  if (row.touch)
    await pool.query('UPDATE dashboard_sessions SET last_seen_at = now() WHERE token_hash = $1', [hash]);
  return { accountId: row.accountId, email: row.email, status: row.status };
}

export async function deleteSession(pool: Pool, hash: Buffer): Promise<void> {
  await pool.query('DELETE FROM dashboard_sessions WHERE token_hash = $1', [hash]);
}

export async function deleteExpiredSessions(pool: Pool, idleSeconds: number): Promise<void> {
  await pool.query(
    `DELETE FROM dashboard_sessions WHERE expires_at <= now() OR last_seen_at <= now() - make_interval(secs => $1)`,
    [idleSeconds],
  );
}

// --- sign-in throttling ---

/** Failures of each bucket within the window. */
export async function countFailures(
  pool: Pool,
  buckets: string[],
  windowSeconds: number,
): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ bucket: string; n: number }>(
    `SELECT bucket, count(*)::int AS n FROM dashboard_login_failures
      WHERE bucket = ANY($1::text[]) AND failed_at > now() - make_interval(secs => $2) GROUP BY bucket`,
    [buckets, windowSeconds],
  );
  return new Map(rows.map((r) => [r.bucket, r.n]));
}

export async function recordFailure(pool: Pool, buckets: string[], windowSeconds: number): Promise<void> {
  await pool.query(
    `WITH old AS (DELETE FROM dashboard_login_failures
                   WHERE bucket = ANY($1::text[]) AND failed_at <= now() - make_interval(secs => $2))
     INSERT INTO dashboard_login_failures (bucket) SELECT unnest($1::text[])`,
    [buckets, windowSeconds],
  );
}

export async function clearFailures(pool: Pool, bucket: string): Promise<void> {
  await pool.query('DELETE FROM dashboard_login_failures WHERE bucket = $1', [bucket]);
}

// --- usage chart ---

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

export async function readAlerts(pool: Pool, accountId: string): Promise<AlertsRow | undefined> {
  const { rows } = await pool.query<AlertsRow>(
    `SELECT low_bandwidth AS "lowBandwidth", new_invoice AS "newInvoice", server_alerts AS "serverAlerts",
            low_bandwidth_percent AS "lowBandwidthPercent" FROM alert_settings WHERE account_id = $1`,
    [accountId],
  );
  return rows[0];
}

/** The account's bandwidth caps per product, bytes per second (account_throttles, docs/adr/0035). */
export async function throttles(pool: Pool, accountId: string): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ product: string; bytes_per_second: number }>(
    'SELECT product, bytes_per_second FROM account_throttles WHERE account_id = $1',
    [accountId],
  );
  return new Map(rows.map((r) => [r.product, r.bytes_per_second]));
}
