// Customers for the gateway tests: an account with bandwidth that the fixture's gateway already
// knows (its cache has applied the account's creation), ready for requests.
import type { NewAccount } from '#common/accounts/accounts.ts';
import { accountWithBandwidth } from './fixtures.ts';
import { cacheSynced, type GatewayFixture } from './gateway.ts';

/** An account with `bandwidth` bytes of basic (none with 0), known to the fixture's gateway. */
export async function knownCustomer(
  fx: Pick<GatewayFixture, 'db' | 'gateway'>,
  bandwidth = 1_000_000_000,
): Promise<NewAccount> {
  const account = await accountWithBandwidth(fx.db.pool, bandwidth ? { basic: bandwidth } : {});
  await cacheSynced(fx.db.pool, [fx.gateway]);
  return account;
}
