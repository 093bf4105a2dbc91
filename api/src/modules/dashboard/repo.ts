// SQL of the dashboard's sign-in tables (migrations/0070_dashboard.sql): passwords, sessions and
// failed sign-ins; the one-time links' are in password-links/repo.ts. Tokens arrive here already
// hashed (sha256): the random values themselves are never stored.
import type { Pool } from '#common/db/pool.ts';
import type { AccountStatus } from '#common/accounts/accounts.ts';

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
