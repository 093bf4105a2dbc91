// Two open links of one account (an invite and a reset, or two resets) used at the same moment.
// Each use marks its own link used, writes the password and then voids the account's other open
// links; two uses that each hold their own link and wait for the other's write to the password row
// deadlock (40P01), and the route answered 500. Exactly one use must set the password; the other
// finds its link voided (the route's 410).
import { expect, test } from '@jest/globals';
import { useTestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { createPasswordLink, hashToken } from './service.ts';
import { setPasswordWithToken } from './repo.ts';

const fx = useTestDatabase();

const ROUNDS = 30;
const tokenOf = (url: string) => new URL(url).searchParams.get('token')!;

test(`two links of one account used at once, ${ROUNDS} rounds: one sets the password, the other is void`, async () => {
  const outcomes: string[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const account = await accountWithBandwidth(fx.db.pool);
    // Odd rounds: the account already has a password (the update path of the upsert).
    if (round % 2 === 1)
      await fx.db.pool.query(
        `INSERT INTO dashboard_credentials (account_id, password_hash) VALUES ($1, 'scrypt$0')`,
        [account.id],
      );
    const tokens = [
      tokenOf((await createPasswordLink(fx.db.pool, account.id, 'invite', 'http://x')).url),
      tokenOf((await createPasswordLink(fx.db.pool, account.id, 'reset', 'http://x')).url),
    ];
    const settled = await Promise.allSettled(
      tokens.map((t, i) => setPasswordWithToken(fx.db.pool, hashToken(t), `scrypt$1$1$1$a$${i}`)),
    );
    const kinds = settled.map((s) =>
      s.status === 'rejected'
        ? `error: ${(s.reason as Error).message}`
        : s.value === account.id
          ? 'set'
          : s.value === undefined
            ? 'void'
            : `other: ${s.value}`,
    );
    outcomes.push(kinds.sort().join(','));
  }
  expect(outcomes).toEqual(Array.from({ length: ROUNDS }, () => 'set,void'));
});
