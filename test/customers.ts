// Customers for the gateway tests: an account with bandwidth that the fixture's gateway already
// knows (its cache has applied the account's creation), ready for requests; its tunnel to the
// fixture's origin, and what was billed for a connection.
import type { NewAccount } from '#common/accounts/accounts.ts';
import { accountWithBandwidth } from './fixtures.ts';
import { cacheSynced, type GatewayFixture } from './gateway/fixture.ts';
import { basicAuth, openTunnel } from './gateway/client.ts';
import { usageAfterClose } from './gateway/usage.ts';

/** An account with `bandwidth` bytes of basic (none with 0), known to the fixture's gateway. */
export async function knownCustomer(
  fx: Pick<GatewayFixture, 'db' | 'gateway'>,
  bandwidth = 1_000_000_000,
): Promise<NewAccount> {
  const account = await accountWithBandwidth(fx.db.pool, bandwidth ? { basic: bandwidth } : {});
  await cacheSynced(fx.db.pool, [fx.gateway]);
  return account;
}

/** A CONNECT tunnel through the fixture's gateway to its origin, with the account's credentials. */
export function tunnelToOrigin(
  fx: Pick<GatewayFixture, 'origin' | 'gateway'>,
  account: NewAccount,
): ReturnType<typeof openTunnel> {
  return openTunnel(
    fx.gateway.port,
    `127.0.0.1:${fx.origin.port}`,
    basicAuth(account.proxyUsername, account.proxyPassword),
  );
}

/**
 * What the gateway billed for a closed connection (usageAfterClose), as [up, down, requests]: the
 * bytes the client wrote and read on it, and its requests, when billing is exact.
 */
export async function billedFor(
  fx: Pick<GatewayFixture, 'db' | 'gateway'>,
  accountId: string,
  socket: { bytesWritten: number },
): Promise<[number, number, number]> {
  const billed = await usageAfterClose(fx.gateway, fx.db.pool, accountId, socket.bytesWritten);
  return [Number(billed.up), Number(billed.down), Number(billed.requests)];
}
