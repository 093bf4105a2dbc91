// What the sign-in pages share (pages/sign-in.ts: the password, "Forgot password?" and the links;
// pages/security.ts: the two-factor code, docs/adr/0077): the throttles, per email and per source
// address in a sliding window, which wrong passwords and wrong codes both count against, and the
// code step's path. Every attempt is reserved before it is checked (repo.reserveAttempt), so a
// burst released at once checks no more than the numbers here (docs/security.md, "Throttles").
import type { Pool } from '#common/db/pool.ts';
import { auditFailure, releaseAttempt, reserveAttempt } from './repo.ts';

/** Sign-in failures allowed per email and per source address within the window. */
export const LOGIN_WINDOW_SECONDS = 15 * 60;
export const LOGIN_FAILURES_PER_EMAIL = 5;
export const LOGIN_FAILURES_PER_ADDRESS = 20;
/** "Forgot password?" asks per email typed within the window (each is an email to its owner). */
export const FORGOT_PER_EMAIL = 3;

/** How long a sign-in whose password was right waits for its two-factor code. */
export const CODE_STEP_SECONDS = 5 * 60;
/** Where a sign-in with two-factor on goes after the password. */
export const SIGN_IN_CODE_PATH = '/sign-in/code';

export const SIGN_IN_THROTTLED = `Too many failed sign-in attempts. Try again in ${LOGIN_WINDOW_SECONDS / 60} minutes.`;
export const TOO_MANY_REQUESTS = `Too many requests. Try again in ${LOGIN_WINDOW_SECONDS / 60} minutes.`;

/** The throttle's buckets of a sign-in: [email, address]. */
export const signInBuckets = (email: string, ip: string | undefined): [string, string] => [
  `email:${email.toLowerCase()}`,
  `ip:${ip ?? 'unknown'}`,
];

/** The source address's bucket, which every throttle here counts against. */
export const addressBucket = (ip: string | undefined): string => `ip:${ip ?? 'unknown'}`;

/**
 * A password or code attempt reserved against its email and address (the reserved rows' ids), or
 * undefined when either is full: answer SIGN_IN_THROTTLED.
 */
export const reserveSignIn = (pool: Pool, buckets: [string, string]): Promise<string[] | undefined> =>
  reserveAttempt(
    pool,
    [
      { bucket: buckets[0], max: LOGIN_FAILURES_PER_EMAIL },
      { bucket: buckets[1], max: LOGIN_FAILURES_PER_ADDRESS },
    ],
    LOGIN_WINDOW_SECONDS,
  );

/** A "Forgot password?" ask, counted per address and per email typed (always kept: each may send an email). */
export const reserveForgot = (
  pool: Pool,
  email: string,
  ip: string | undefined,
): Promise<string[] | undefined> =>
  reserveAttempt(
    pool,
    [
      { bucket: addressBucket(ip), max: LOGIN_FAILURES_PER_ADDRESS },
      ...(email ? [{ bucket: `reset:${email.toLowerCase()}`, max: FORGOT_PER_EMAIL }] : []),
    ],
    LOGIN_WINDOW_SECONDS,
  );

/** A set-password link looked up, counted against the address (kept only when the link is not usable). */
export const reserveLinkLookup = (pool: Pool, ip: string | undefined): Promise<string[] | undefined> =>
  reserveAttempt(
    pool,
    [{ bucket: addressBucket(ip), max: LOGIN_FAILURES_PER_ADDRESS }],
    LOGIN_WINDOW_SECONDS,
  );

/**
 * Runs a check under a reserved attempt: when it throws (the scrypt queue is full, the database is
 * gone) nothing was checked, so the reservation is taken back before the error goes on.
 */
export async function keptOnFailure<T>(pool: Pool, attempt: string[], check: () => Promise<T>): Promise<T> {
  try {
    return await check();
  } catch (err) {
    await releaseAttempt(pool, attempt).catch(() => undefined);
    throw err;
  }
}

/**
 * A failed sign-in (a wrong password or a wrong code) in the account's audit log: one entry per
 * burst from one address and reason within the window, counted (docs/security.md, "Audit log").
 */
export const auditSignInFailure = (
  pool: Pool,
  who: { accountId: string; email: string; ip: string | undefined },
  reason: 'password' | 'second_factor',
): Promise<void> =>
  auditFailure(
    pool,
    {
      accountId: who.accountId,
      actor: { kind: 'dashboard', id: who.email, ip: who.ip ?? null },
      action: 'session.sign_in_failed',
      details: { reason },
    },
    LOGIN_WINDOW_SECONDS,
  );
