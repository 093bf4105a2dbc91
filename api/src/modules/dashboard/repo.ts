// SQL of the dashboard's sign-in tables (migrations/0070_dashboard.sql): passwords, sessions and
// failed sign-ins; the one-time links' are in password-links/repo.ts. Tokens arrive here already
// hashed (sha256): the random values themselves are never stored.
import { withTransaction, type Pool } from '#common/db/pool.ts';
import type { AccountStatus } from '#common/accounts/accounts.ts';
import { lockAccountForAudit, recordAudit, type AuditActor, type AuditEntry } from '#common/audit/record.ts';
import { queueSecurityNotice } from '#common/accounts/security-notices.ts';
import { browserText } from './user-agent.ts';

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

/** Where a session started: the address and the browser's User-Agent (cut to 512 characters). */
export interface SessionOrigin {
  ip: string | null;
  userAgent: string | null;
}

/**
 * A new session, audited as `session.signed_in` in the same transaction. With `browserHash`, the
 * browser is remembered for the account, and a browser new to an account that has signed in
 * before queues the new-browser email (docs/alerts.md "Security notices").
 */
export async function insertSession(
  pool: Pool,
  s: {
    hash: Buffer;
    accountId: string;
    absoluteSeconds: number;
    origin?: SessionOrigin;
    browserHash?: Buffer;
  },
  details: Record<string, unknown> = {},
): Promise<void> {
  const origin = s.origin ?? { ip: null, userAgent: null };
  await withTransaction(pool, async (client) => {
    const { rows } = await client.query<{ id: string; email: string }>(
      `INSERT INTO dashboard_sessions (token_hash, account_id, expires_at, ip, user_agent)
       VALUES ($1, $2, now() + make_interval(secs => $3), $4, left($5, 512))
       RETURNING id, (SELECT email FROM accounts WHERE id = $2) AS email`,
      [s.hash, s.accountId, s.absoluteSeconds, origin.ip, origin.userAgent],
    );
    const row = rows[0]!;
    await recordAudit(client, {
      accountId: s.accountId,
      actor: { kind: 'dashboard', id: row.email, ip: origin.ip },
      action: 'session.signed_in',
      target: { type: 'session', id: row.id },
      details,
    });
    if (!s.browserHash) return;
    const seen = await client.query<{ known: number; added: boolean }>(
      `WITH known AS (SELECT count(*)::int AS n FROM dashboard_known_browsers WHERE account_id = $1),
            added AS (INSERT INTO dashboard_known_browsers (account_id, browser_hash) VALUES ($1, $2)
                      ON CONFLICT DO NOTHING RETURNING 1)
       SELECT (SELECT n FROM known) AS known, EXISTS (SELECT 1 FROM added) AS added`,
      [s.accountId, s.browserHash],
    );
    // The first browser of an account (its first sign-in, after the invite) is not news.
    if (seen.rows[0]!.added && seen.rows[0]!.known > 0)
      await queueSecurityNotice(client, s.accountId, {
        event: 'new_browser_sign_in',
        ip: origin.ip,
        browser: browserText(origin.userAgent),
      });
  });
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

/** Ends this session (a sign-out), audited as `session.signed_out` in the same transaction. */
export async function deleteSession(pool: Pool, hash: Buffer, ip: string | null): Promise<void> {
  await withTransaction(pool, async (client) => {
    // The account row first, then the session's (docs/adr/0079 "Lock order").
    await client.query(
      `SELECT 1 FROM dashboard_sessions s JOIN accounts a ON a.id = s.account_id WHERE s.token_hash = $1
         FOR KEY SHARE OF a`,
      [hash],
    );
    const { rows } = await client.query<{ id: string; accountId: string; email: string }>(
      `DELETE FROM dashboard_sessions s USING accounts a WHERE s.token_hash = $1 AND a.id = s.account_id
       RETURNING s.id, s.account_id AS "accountId", a.email`,
      [hash],
    );
    const row = rows[0];
    if (!row) return;
    await recordAudit(client, {
      accountId: row.accountId,
      actor: { kind: 'dashboard', id: row.email, ip },
      action: 'session.signed_out',
      target: { type: 'session', id: row.id },
    });
  });
}

export interface SessionRow {
  id: string;
  createdAt: Date;
  lastSeenAt: Date;
  ip: string | null;
  userAgent: string | null;
  /** The session of the request that asks. */
  current: boolean;
}

/** The account's live sessions, most recently seen first. */
export async function listSessions(
  pool: Pool,
  accountId: string,
  currentHash: Buffer | undefined,
  idleSeconds: number,
): Promise<SessionRow[]> {
  const { rows } = await pool.query<SessionRow>(
    `SELECT id, created_at AS "createdAt", last_seen_at AS "lastSeenAt", host(ip) AS ip,
            user_agent AS "userAgent", token_hash = $2 AS current
       FROM dashboard_sessions
      WHERE account_id = $1 AND expires_at > now() AND last_seen_at > now() - make_interval(secs => $3)
      ORDER BY (token_hash = $2) DESC, last_seen_at DESC, created_at DESC`,
    [accountId, currentHash ?? Buffer.alloc(32), idleSeconds],
  );
  return rows;
}

/**
 * Ends the account's other sessions: the one named by `sessionId`, or all but the current one when
 * it is null. Each is audited as `session.revoked`. The ids ended.
 */
export async function revokeSessions(
  pool: Pool,
  accountId: string,
  currentHash: Buffer,
  sessionId: string | null,
  actor: AuditActor,
): Promise<string[]> {
  return withTransaction(pool, async (client) => {
    await lockAccountForAudit(client, accountId);
    const { rows } = await client.query<{ id: string }>(
      `DELETE FROM dashboard_sessions
        WHERE account_id = $1 AND token_hash <> $2 AND ($3::uuid IS NULL OR id = $3::uuid) RETURNING id`,
      [accountId, currentHash, sessionId],
    );
    for (const { id } of rows)
      await recordAudit(client, {
        accountId,
        actor,
        action: 'session.revoked',
        target: { type: 'session', id },
        details: { scope: sessionId ? 'one' : 'all_others' },
      });
    return rows.map((r) => r.id);
  });
}

export async function deleteExpiredSessions(pool: Pool, idleSeconds: number): Promise<void> {
  await pool.query(
    `DELETE FROM dashboard_sessions WHERE expires_at <= now() OR last_seen_at <= now() - make_interval(secs => $1)`,
    [idleSeconds],
  );
}

// --- sign-in throttling ---

/** A throttle's bucket ('email:<lower email>', 'ip:<address>', ...) and the attempts it allows in the window. */
export interface BucketLimit {
  bucket: string;
  max: number;
}

/**
 * Reserves one attempt in every bucket before anything is checked (docs/security.md, "Throttles"):
 * the ids of the rows written, or undefined when a bucket is full (nothing written). The buckets are
 * locked (advisory, per bucket, in one order) for the count and the insert, so attempts released
 * at once take turns and at most `max` of them get through. A reserved row is a failure unless
 * `releaseAttempt` takes it back.
 */
export async function reserveAttempt(
  pool: Pool,
  limits: BucketLimit[],
  windowSeconds: number,
): Promise<string[] | undefined> {
  const sorted = [...limits].sort((a, b) => (a.bucket < b.bucket ? -1 : a.bucket > b.bucket ? 1 : 0));
  const buckets = sorted.map((l) => l.bucket);
  return withTransaction(pool, async (client) => {
    for (const bucket of buckets)
      await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`login:${bucket}`]);
    const { rows } = await client.query<{ bucket: string; n: number }>(
      `WITH old AS (DELETE FROM dashboard_login_failures
                     WHERE bucket = ANY($1::text[]) AND failed_at <= now() - make_interval(secs => $2))
       SELECT bucket, count(*)::int AS n FROM dashboard_login_failures
        WHERE bucket = ANY($1::text[]) AND failed_at > now() - make_interval(secs => $2) GROUP BY bucket`,
      [buckets, windowSeconds],
    );
    const counts = new Map(rows.map((r) => [r.bucket, r.n]));
    if (sorted.some((l) => (counts.get(l.bucket) ?? 0) >= l.max)) return undefined;
    const inserted = await client.query<{ id: string }>(
      'INSERT INTO dashboard_login_failures (bucket) SELECT unnest($1::text[]) RETURNING id',
      [buckets],
    );
    return inserted.rows.map((r) => r.id);
  });
}

/** Takes back a reserved attempt that turned out not to be a failure (or was never checked). */
export async function releaseAttempt(pool: Pool, ids: string[]): Promise<void> {
  await pool.query('DELETE FROM dashboard_login_failures WHERE id = ANY($1::bigint[])', [ids]);
}

/**
 * A known account's failed sign-in in its audit log: one entry per burst from one address for one
 * reason. A failure within `burstSeconds` of the burst's first entry adds one to its `count` (and
 * sets `lastAt`) instead of writing another entry (docs/security.md "Audit log").
 */
export async function auditFailure(pool: Pool, audit: AuditEntry, burstSeconds: number): Promise<void> {
  await withTransaction(pool, async (client) => {
    // Failures of one account take turns here, so two of a burst never both write a new entry.
    await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
      `audit-failure:${audit.accountId}`,
    ]);
    const { rowCount } = await client.query(
      `UPDATE audit_log
          SET details = details || jsonb_build_object('count', coalesce((details->>'count')::int, 1) + 1,
                                                      'lastAt', billing_now())
        WHERE id = (SELECT id FROM audit_log
                     WHERE account_id = $1 AND action = $2 AND actor_ip IS NOT DISTINCT FROM $3::inet
                       AND details->>'reason' = $4 AND at > billing_now() - make_interval(secs => $5)
                     ORDER BY id DESC LIMIT 1)`,
      [audit.accountId, audit.action, audit.actor.ip, audit.details?.reason ?? null, burstSeconds],
    );
    if (!rowCount) await recordAudit(client, { ...audit, details: { ...audit.details, count: 1 } });
  });
}

export async function clearFailures(pool: Pool, bucket: string): Promise<void> {
  await pool.query('DELETE FROM dashboard_login_failures WHERE bucket = $1', [bucket]);
}

// --- the second sign-in step (two-factor) ---

/** A sign-in whose password was right waits for its code, in this browser, for `seconds`. */
export async function putChallenge(
  pool: Pool,
  preSessionHash: Buffer,
  accountId: string,
  seconds: number,
): Promise<void> {
  await pool.query(
    `WITH old AS (DELETE FROM dashboard_sign_in_challenges WHERE expires_at <= now())
     INSERT INTO dashboard_sign_in_challenges (pre_session_hash, account_id, expires_at)
     VALUES ($1, $2, now() + make_interval(secs => $3))
     ON CONFLICT (pre_session_hash) DO UPDATE SET account_id = EXCLUDED.account_id, expires_at = EXCLUDED.expires_at`,
    [preSessionHash, accountId, seconds],
  );
}

/** The person whose sign-in waits for a code in this browser. */
export async function readChallenge(pool: Pool, preSessionHash: Buffer): Promise<Person | undefined> {
  const { rows } = await pool.query<Person>(
    `SELECT a.id AS "accountId", a.email, a.status FROM dashboard_sign_in_challenges c
       JOIN accounts a ON a.id = c.account_id WHERE c.pre_session_hash = $1 AND c.expires_at > now()`,
    [preSessionHash],
  );
  return rows[0];
}

export async function deleteChallenge(pool: Pool, preSessionHash: Buffer): Promise<void> {
  await pool.query('DELETE FROM dashboard_sign_in_challenges WHERE pre_session_hash = $1', [preSessionHash]);
}
