// Concurrent additions of overlapping ranges by different accounts, straight at the repo. The
// exclusion constraint alone decides the race, but two inserts that each see the other's uncommitted
// row wait for each other and PostgreSQL aborts one as a deadlock (40P01): the API answered 500
// where it owes 409 (a CI run saw it). Each round races several accounts for one range; exactly one
// must win and every other must be refused as an overlap.
import { expect, test } from '@jest/globals';
import { AppError } from '#common/errors.ts';
import { useTestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { addAllowlistEntry } from './repo.ts';

const fx = useTestDatabase();

const ROUNDS = 40;
const RACERS = 4;

test(`${RACERS} accounts racing for overlapping ranges, ${ROUNDS} rounds: one wins, the rest get ALLOWLIST_OVERLAP`, async () => {
  const outcomes: string[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const accounts = await Promise.all(
      Array.from({ length: RACERS }, () => accountWithBandwidth(fx.db.pool)),
    );
    const settled = await Promise.allSettled(
      accounts.map((a, i) =>
        addAllowlistEntry(
          fx.db.pool,
          a.id,
          // Nested prefixes (/24, /25, /26, ...) of one network: every pair overlaps.
          { product: 'datacenter', cidr: `198.18.${round}.0/${24 + i}` },
          3,
        ),
      ),
    );
    const kinds = settled.map((s) =>
      s.status === 'fulfilled'
        ? 'added'
        : s.reason instanceof AppError
          ? s.reason.code
          : `unexpected: ${(s.reason as Error).message}`,
    );
    outcomes.push(kinds.sort().join(','));
  }
  const want = ['added', ...Array.from({ length: RACERS - 1 }, () => 'ALLOWLIST_OVERLAP')].sort().join(',');
  expect(outcomes).toEqual(Array.from({ length: ROUNDS }, () => want));
});
