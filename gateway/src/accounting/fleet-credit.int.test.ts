// The outage credit (docs/adr/0021): during a database outage the credit a known customer gets is bounded
// fleet-wide, not per gateway. Three gateways on one database, which they reach through a relay
// the test cuts; a customer who was served by all three pushes downloads through all three until
// refused. What the database bills afterwards stays within the documented fleet-wide bound
// (docs/gateway.md; docs/adr/0024); before the fix each gateway gave up to 64 MiB (3 x 64 MiB).
import { beforeAll, describe, expect, it } from '@jest/globals';
import type { Pool } from '#common/db/pool.ts';
import { createTestPool } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { cacheSynced, gatewaySpec, useTestGateway, type TestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, download } from '#test/gateway/client.ts';
import { fold } from '#test/gateway/usage.ts';
import { relayToFixtureDatabase, type TcpRelay } from '#test/tcp-relay.ts';
import { OUTAGE_CREDIT_BYTES } from './outage-credit.ts';
import { overspendBound } from './policy.ts';

const GATEWAYS = 3;
const BALANCE = 40_000_000;
const DOWNLOAD_BYTES = 4_000_000;
/** Downloads per gateway during the outage at most (far more than leases and credit cover). */
const MAX_DOWNLOADS = 40;
/** The documented bound: the fleet's credit together, plus each gateway's overdraft and slack (one connection at a time). */
const BOUND = BALANCE + overspendBound(GATEWAYS, 1, Math.min(OUTAGE_CREDIT_BYTES, BALANCE));

let relay: TcpRelay;
let relayedUrl: string;
let pool: Pool;
let gateways: TestGateway[] = [];

// The gateways start below, on a pool through the relay.
const fx = useTestGateway({ gateway: false });

beforeAll(async () => {
  ({ relay, url: relayedUrl } = await relayToFixtureDatabase(fx));
  pool = createTestPool(relayedUrl, 'fleet-credit-test', 6);
  fx.onClose(() => pool.end());
  gateways = await Promise.all(
    Array.from({ length: GATEWAYS }, (_, i) =>
      fx.start(gatewaySpec('basic'), {
        pool,
        url: relayedUrl,
        gatewayId: `fleet-${i}`,
        fleetSize: () => GATEWAYS,
      }),
    ),
  );
});

describe('outage credit across a fleet', () => {
  it(`${GATEWAYS} gateways in a database outage serve a customer at most the fleet-wide credit beyond the balance`, async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: BALANCE });
    await cacheSynced(fx.db.pool, gateways);
    const auth = basicAuth(account.proxyUsername, account.proxyPassword);
    // Served by every gateway before the outage (fast: their next lease requests grow).
    for (const g of gateways) expect(await download(g.port, fx.origin.port, auth, DOWNLOAD_BYTES)).toBe(200);

    await relay.cut();
    const statuses: number[][] = [];
    try {
      await Promise.all(
        gateways.map(async (g, i) => {
          const mine: number[] = (statuses[i] = []);
          for (let n = 0; n < MAX_DOWNLOADS; n++) {
            const status = await download(g.port, fx.origin.port, auth, DOWNLOAD_BYTES);
            mine.push(status);
            // Refused (never 402 in an outage) or cut: this gateway's leases and credit are spent.
            if (status !== 200 && status !== -1) break;
          }
        }),
      );
    } finally {
      await relay.restore();
    }
    console.log(`fleet credit statuses: ${statuses.map((m) => m.join(',')).join(' | ')}`);
    for (const mine of statuses) {
      expect(mine).not.toContain(402);
      expect(mine.at(-1)).toBe(503);
    }
    // Usage kept during the outage is written now, and folded.
    for (const g of gateways) {
      const deadline = Date.now() + 20_000;
      while (true) {
        await g.ledger.flush();
        if (!g.ledger.degraded || Date.now() > deadline) break;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    await fold(fx.db.pool);
    const { rows } = await fx.db.pool.query<{ used_bytes: number }>(
      `SELECT used_bytes FROM balances WHERE account_id = $1 AND product = 'basic'`,
      [account.id],
    );
    const used = Number(rows[0]!.used_bytes);
    process.stdout.write(
      `fleet credit: used ${used} of ${BALANCE} (beyond the balance ${used - BALANCE}, bound ${BOUND - BALANCE})\n`,
    );
    expect(used).toBeLessThanOrEqual(BOUND);
  }, 120_000);
});
