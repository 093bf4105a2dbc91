// What the sign-in pages share (pages/sign-in.ts: the password; pages/security.ts: the two-factor
// code, docs/adr/0077): the throttle on failures, per email and per source address in a sliding
// window, which wrong passwords and wrong codes both count against, and the code step's path.
import type { Pool } from '#common/db/pool.ts';
import { countFailures } from './repo.ts';

/** Sign-in failures allowed per email and per source address within the window. */
export const LOGIN_WINDOW_SECONDS = 15 * 60;
export const LOGIN_FAILURES_PER_EMAIL = 5;
export const LOGIN_FAILURES_PER_ADDRESS = 20;

/** How long a sign-in whose password was right waits for its two-factor code. */
export const CODE_STEP_SECONDS = 5 * 60;
/** Where a sign-in with two-factor on goes after the password. */
export const SIGN_IN_CODE_PATH = '/sign-in/code';

/** The throttle's buckets of a sign-in: [email, address]. */
export const signInBuckets = (email: string, ip: string | undefined): [string, string] => [
  `email:${email.toLowerCase()}`,
  `ip:${ip ?? 'unknown'}`,
];

/** The refusal when either bucket is full, else undefined. */
export async function signInThrottled(pool: Pool, buckets: [string, string]): Promise<string | undefined> {
  const counts = await countFailures(pool, buckets, LOGIN_WINDOW_SECONDS);
  if (
    (counts.get(buckets[0]) ?? 0) < LOGIN_FAILURES_PER_EMAIL &&
    (counts.get(buckets[1]) ?? 0) < LOGIN_FAILURES_PER_ADDRESS
  )
    return undefined;
  return `Too many failed sign-in attempts. Try again in ${LOGIN_WINDOW_SECONDS / 60} minutes.`;
}
