import { beforeAll, describe, expect, it } from '@jest/globals';
import { recordPurchase } from '#common/billing/purchases.ts';
import type { Pool } from '#common/db/pool.ts';
import { createTestPool } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { cacheSynced, gatewaySpec, useTestGateway, type TestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, get, rawExchange } from '#test/gateway/client.ts';
import { fold, recordedUsage } from '#test/gateway/usage.ts';
import { relayToFixtureDatabase, type TcpRelay } from '#test/tcp-relay.ts';

// Fault injection: the gateway reaches PostgreSQL through a TCP relay the test can cut
// (docs/adr/0021: known customers keep being served; usage and the cache catch up afterwards).
let relay: TcpRelay;
let relayedUrl: string;
let relayedPool: Pool;
let gateway: TestGateway;

// The gateway starts below, on a pool through the relay.
const fx = useTestGateway({ gateway: false });

beforeAll(async () => {
  ({ relay, url: relayedUrl } = await relayToFixtureDatabase(fx));
  relayedPool = createTestPool(relayedUrl, 'outage-test');
  fx.onClose(() => relayedPool.end());
  gateway = await fx.start(gatewaySpec('basic'), { pool: relayedPool, url: relayedUrl });
});

describe('database outage', () => {
  it('keeps serving known customers, then catches up on usage and changes', async () => {
    const known = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    const later = await accountWithBandwidth(fx.db.pool, { advanced: 1_000 });
    await cacheSynced(fx.db.pool, [gateway]);
    const url = `http://127.0.0.1:${fx.origin.port}/bytes/1000`;
    const knownAuth = basicAuth(known.proxyUsername, known.proxyPassword);
    const first = await rawExchange(gateway.port, [get(url, knownAuth)]);
    expect(first.responses[0]!.status).toBe(200);
    let written = first.written;
    let read = first.read;

    await relay.cut();
    for (let i = 0; i < 5; i++) {
      const r = await rawExchange(gateway.port, [get(url, knownAuth)]);
      expect(r.responses[0]!.status).toBe(200);
      written += r.written;
      read += r.read;
    }
    await gateway.ledger.flush(); // fails: kept for later
    // A purchase made while the gateway cannot hear about it.
    await recordPurchase(fx.db.pool, { accountId: later.id, product: 'basic', bytes: 1_000_000_000 });

    await relay.restore();
    // The change feed reconnects (backoff) and catches up from change_log; the flush retries.
    const deadline = Date.now() + 15_000;
    let laterStatus = 0;
    while (Date.now() < deadline) {
      laterStatus = (
        await rawExchange(gateway.port, [get(url, basicAuth(later.proxyUsername, later.proxyPassword))])
      ).responses[0]!.status;
      if (laterStatus === 200) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(laterStatus).toBe(200);
    // The usage kept during the outage is written by a flush that reaches the database: the first
    // one after the restore may still meet a pool connection from before the cut, so flush until
    // the usage is in (deadline 20 s), then check it is exactly what was moved.
    const expected = { up: written, down: read, requests: 6 };
    const flushDeadline = Date.now() + 20_000;
    const inFull = (u: typeof expected) =>
      u.up === expected.up && u.down === expected.down && u.requests === expected.requests;
    let usage: typeof expected;
    while (true) {
      await gateway.ledger.flush();
      usage = await recordedUsage(fx.db.pool, known.id);
      if (inFull(usage) || Date.now() > flushDeadline) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(usage).toEqual(expected);
    await fold(fx.db.pool);
  }, 60_000);

  it('never answers 402 while the database is unreachable: a customer served before goes on credit, one never served gets 503', async () => {
    const served = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    const fresh = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    await cacheSynced(fx.db.pool, [gateway]);
    const url = `http://127.0.0.1:${fx.origin.port}/bytes/1000`;
    const servedAuth = basicAuth(served.proxyUsername, served.proxyPassword);
    expect((await rawExchange(gateway.port, [get(url, servedAuth)])).responses[0]!.status).toBe(200);
    // Requests spaced out: idle past the release delay, the budget returns its lease and is dropped.
    await new Promise((r) => setTimeout(r, 8_000));
    await gateway.ledger.flush();
    await relay.cut();
    try {
      const again = await rawExchange(gateway.port, [get(url, servedAuth)]);
      expect(again.responses[0]!.status).toBe(200);
      const unknown = (
        await rawExchange(gateway.port, [get(url, basicAuth(fresh.proxyUsername, fresh.proxyPassword))])
      ).responses[0]!;
      expect(unknown.status).toBe(503);
      expect(unknown.headers['proxy-status']).toMatch(/error=proxy_internal_error/);
      expect(Number(unknown.headers['retry-after'])).toBeGreaterThan(0);
    } finally {
      await relay.restore();
    }
  }, 60_000);
});
