// The outage credit (docs/adr/0021), with the real wiring: three gateway PROCESSES (gateway/src/main.ts) on one
// database, each learning the fleet size from its heartbeat (accounting/heartbeat.ts) and handing
// it to its ledger, as in production. They reach PostgreSQL through a relay the test cuts; the test
// keeps its own direct connection. A customer served by all three pushes downloads through all
// three until each refuses, and what the database bills afterwards stays within the documented
// fleet-wide bound (docs/gateway.md "The bound"). fleet-credit.int.test.ts measures the same with
// in-process gateways given the fleet size by hand.
import { beforeAll, describe, expect, it } from '@jest/globals';
import { freePort } from '#test/ports.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { relayToFixtureDatabase, type TcpRelay } from '#test/tcp-relay.ts';
import { cacheSynced, gatewaySpec, useTestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, download } from '#test/gateway/client.ts';
import { fold, recordedUsage } from '#test/gateway/usage.ts';
import { type GatewayProcess } from '#test/gateway/process.ts';
import { HEARTBEAT_MS } from './heartbeat.ts';
import { OUTAGE_CREDIT_BYTES } from './outage-credit.ts';
import { overspendBound } from './policy.ts';

const GATEWAYS = 3;
const BALANCE = 40_000_000;
const DOWNLOAD_BYTES = 4_000_000;
/**
 * Before the outage each gateway serves the customer one small answer: their leases stay small, so
 * the free balance they last heard (F in the bound) is close to the whole balance and the bound is
 * tight enough to tell a fleet of 3 from gateways that each think they are alone (3 x F of credit).
 */
const FIRST_BYTES = 100_000;
/** Downloads per gateway during the outage at most (far more than leases and credit cover). */
const MAX_DOWNLOADS = 40;
/** The documented bound: the fleet's credit together, plus each gateway's overdraft and slack (one connection at a time). */
const BOUND = BALANCE + overspendBound(GATEWAYS, 1, Math.min(OUTAGE_CREDIT_BYTES, BALANCE));
/** Generous: the machine is shared, and the processes start, beat and flush on their own timers. */
const WAIT_MS = 60_000;

interface Pod {
  gateway: GatewayProcess;
  healthPort: number;
}

let relay: TcpRelay;
let relayedUrl: string;
const pods: Pod[] = [];

// The gateway processes start below, on the relay.
const fx = useTestGateway({ gateway: false });

beforeAll(async () => {
  ({ relay, url: relayedUrl } = await relayToFixtureDatabase(fx));
  for (let i = 0; i < GATEWAYS; i++) {
    const healthPort = await freePort();
    const gateway = await fx.spawn(
      gatewaySpec('basic'),
      { PROXYFLEET_GATEWAY_ID: `fleet-process-${i}`, PROXYFLEET_HEALTH_PORT: String(healthPort) },
      relayedUrl,
    );
    pods.push({ gateway, healthPort });
  }
}, 120_000);

async function health(pod: Pod, path: '/readyz' | '/metrics'): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${pod.healthPort}${path}`);
  return res.text();
}

/** The fleet size the process's ledger gets: /readyz `info.liveGateways` (main.ts). */
async function liveGateways(pod: Pod): Promise<number> {
  const report = JSON.parse(await health(pod, '/readyz')) as { info: { liveGateways: number } };
  return report.info.liveGateways;
}

/** Bytes the process's ledger billed so far, both directions (they go to usage batches as they are). */
async function billedBytes(pod: Pod): Promise<number> {
  let sum = 0;
  for (const line of (await health(pod, '/metrics')).split('\n'))
    if (line.startsWith('proxyfleet_gateway_billed_bytes_total{')) sum += Number(line.split(' ').at(-1));
  return sum;
}

async function until(what: string, done: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${WAIT_MS} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe('outage credit across a fleet of gateway processes', () => {
  it(`${GATEWAYS} processes that count each other by heartbeat serve a customer at most the fleet-wide credit beyond the balance in an outage`, async () => {
    // Each process counts the others at its next heartbeat after they registered.
    await until(
      `each process reports ${GATEWAYS} live gateways (heartbeat every ${HEARTBEAT_MS} ms)`,
      async () => (await Promise.all(pods.map(liveGateways))).every((n) => n === GATEWAYS),
    );
    const account = await accountWithBandwidth(fx.db.pool, { basic: BALANCE });
    await cacheSynced(fx.db.pool, GATEWAYS);
    const auth = basicAuth(account.proxyUsername, account.proxyPassword);
    // Served by every gateway before the outage: each gets credit for this customer in the outage.
    for (const { gateway } of pods)
      expect(await download(gateway.port, fx.origin.port, auth, FIRST_BYTES)).toBe(200);

    await relay.cut();
    const statuses: number[][] = [];
    try {
      await Promise.all(
        pods.map(async ({ gateway }, i) => {
          const mine: number[] = (statuses[i] = []);
          for (let n = 0; n < MAX_DOWNLOADS; n++) {
            const status = await download(gateway.port, fx.origin.port, auth, DOWNLOAD_BYTES);
            mine.push(status);
            // Refused (never 402 in an outage) or cut: this gateway's leases and credit are spent.
            if (status !== 200 && status !== -1) break;
          }
        }),
      );
      // The fleet size each ledger used: still the heartbeats' last count, kept through the outage.
      expect(await Promise.all(pods.map(liveGateways))).toEqual(pods.map(() => GATEWAYS));
    } finally {
      await relay.restore();
    }
    for (const mine of statuses) {
      expect(mine).not.toContain(402);
      expect(mine.at(-1)).toBe(503);
    }
    // Usage kept during the outage is written once the processes reach the database again: wait
    // until the usage batches hold every byte the three ledgers billed, then fold.
    let billed = 0;
    await until('the processes flush what they billed', async () => {
      billed = (await Promise.all(pods.map(billedBytes))).reduce((a, b) => a + b, 0);
      const recorded = await recordedUsage(fx.db.pool, account.id);
      return billed > 0 && Number(recorded.up) + Number(recorded.down) === billed;
    });
    await fold(fx.db.pool);
    const { rows } = await fx.db.pool.query<{ used_bytes: number }>(
      `SELECT used_bytes FROM balances WHERE account_id = $1 AND product = 'basic'`,
      [account.id],
    );
    const used = Number(rows[0]!.used_bytes);
    process.stdout.write(
      `fleet credit, ${GATEWAYS} processes: used ${used} of ${BALANCE} (beyond the balance ${used - BALANCE}, bound ${BOUND - BALANCE}); downloads per gateway ${statuses.map((s) => s.join(',')).join(' | ')}\n`,
    );
    expect(used).toBe(billed);
    expect(used).toBeLessThanOrEqual(BOUND);
  }, 300_000);
});
