// Test support for two-factor sign-in: TOTP codes computed with otpauth, as an authenticator app
// would, from the secret the Security page shows.
import * as OTPAuth from 'otpauth';
import type { Pool } from '#common/db/pool.ts';
import { TwoFactor } from '#api/modules/two-factor/service.ts';
import { TEST_CREDENTIALS_KEY } from './fixtures.ts';

const totpOf = (secret: string) =>
  new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret), digits: 6, period: 30, algorithm: 'SHA1' });

/**
 * A code the server accepts now: of a time step later than the last one it accepted (a code is
 * never accepted twice) and within one step of now. Waits for the clock when the next unused step
 * is two ahead (at most 30 s).
 */
export async function freshCode(pool: Pool, accountId: string, secret: string): Promise<string> {
  const { rows } = await pool.query<{ last_step: string | null }>(
    'SELECT last_step FROM dashboard_two_factor WHERE account_id = $1',
    [accountId],
  );
  const totp = totpOf(secret);
  const step = Math.max(totp.counter(), Number(rows[0]?.last_step ?? -1) + 1);
  while (totp.counter() < step - 1) await new Promise((resolve) => setTimeout(resolve, 500));
  return totp.generate({ timestamp: step * 30_000 + 1_000 });
}

/** Turns two-factor on for the account, as the Security page does; its secret. */
export async function twoFactorOn(pool: Pool, accountId: string): Promise<string> {
  const tf = new TwoFactor(pool, TEST_CREDENTIALS_KEY);
  const secret = (await tf.start(accountId))!;
  const actor = { kind: 'dashboard' as const, id: 'test', ip: null };
  if (!(await tf.confirm(accountId, await freshCode(pool, accountId, secret), actor)))
    throw new Error('two-factor not confirmed');
  return secret;
}
