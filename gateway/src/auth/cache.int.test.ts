import { beforeAll, describe, expect, it } from '@jest/globals';
import { resetProxyPassword, setAccountStatus } from '#common/accounts/accounts.ts';
import { recordPurchase } from '#common/billing/purchases.ts';
import { accountWithBandwidth, TEST_CREDENTIALS_KEY } from '#test/fixtures.ts';
import { cacheSynced, gatewaySpec, useTestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, get, rawExchange } from '#test/gateway/client.ts';
import { type GatewayProcess } from '#test/gateway/process.ts';

// Password resets, suspensions and purchases reach every gateway process through LISTEN/NOTIFY.
const PODS = 3;
const ROUNDS = 12;
/**
 * A functional bound only (the target is 1 s; the measured p99 is printed and in docs): one of
 * 37 changes taking longer than 5 s on a busy machine is no fault of the cache.
 */
const PROPAGATION_LIMIT_MS = 10_000;

const pods: GatewayProcess[] = [];
let source = 0;

// The gateway processes start below.
const fx = useTestGateway({ gateway: false });

beforeAll(async () => {
  for (let i = 0; i < PODS; i++)
    pods.push(
      await fx.spawn(gatewaySpec('basic'), {
        PROXYFLEET_GATEWAY_ID: `cache-${i}`,
        PROXYFLEET_LOG_LEVEL: 'info',
      }),
    );
}, 60_000);

async function status(pod: GatewayProcess, user: string, password: string): Promise<number> {
  // A new loopback source per probe, so failed probes never trip the auth back-off.
  source = (source % 250) + 1;
  try {
    const { responses } = await rawExchange(
      pod.port,
      [get(`http://127.0.0.1:${fx.origin.port}/peer`, basicAuth(user, password))],
      { sourceAddress: `127.0.1.${source}` },
    );
    return responses[0]!.status;
  } catch {
    // A probe in flight when the change arrived: a password reset or suspension cuts the
    // account's live connections (docs/adr/0023).
    return 0;
  }
}

/** Milliseconds until every pod answers `expected`. */
async function propagation(
  started: number,
  user: string,
  password: string,
  expected: number,
): Promise<number> {
  const times = await Promise.all(
    pods.map(async (pod) => {
      while (Date.now() - started < PROPAGATION_LIMIT_MS) {
        if ((await status(pod, user, password)) === expected) return Date.now() - started;
        await new Promise((r) => setTimeout(r, 5));
      }
      return Number.POSITIVE_INFINITY;
    }),
  );
  return Math.max(...times);
}

describe('credential cache', () => {
  it('sees password resets, suspensions and purchases in every gateway process', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { advanced: 1_000_000 });
    await cacheSynced(fx.db.pool, PODS);
    let password = account.proxyPassword;
    const user = account.proxyUsername;
    const samples: number[] = [];
    // No basic bandwidth yet: 402 everywhere.
    for (const pod of pods) expect(await status(pod, user, password)).toBe(402);
    let started = Date.now();
    await recordPurchase(fx.db.pool, { accountId: account.id, product: 'basic', bytes: 1_000_000_000 });
    samples.push(await propagation(started, user, password, 200));
    for (let round = 0; round < ROUNDS; round++) {
      const old = password;
      started = Date.now();
      password = await resetProxyPassword(fx.db.pool, account.id, TEST_CREDENTIALS_KEY);
      samples.push(await propagation(started, user, password, 200));
      for (const pod of pods) expect(await status(pod, user, old)).toBe(407);
      started = Date.now();
      await setAccountStatus(fx.db.pool, account.id, 'suspended');
      samples.push(await propagation(started, user, password, 403));
      started = Date.now();
      await setAccountStatus(fx.db.pool, account.id, 'active');
      samples.push(await propagation(started, user, password, 200));
    }
    samples.sort((a, b) => a - b);
    const p99 = samples[Math.min(samples.length - 1, Math.ceil(samples.length * 0.99) - 1)]!;
    process.stdout.write(
      `cache propagation to ${PODS} processes over ${samples.length} changes: p50 ${samples[Math.floor(samples.length / 2)]} ms, p99 ${p99} ms, max ${samples.at(-1)} ms\n`,
    );
    expect(samples.at(-1)).toBeLessThan(PROPAGATION_LIMIT_MS);
  }, 120_000);

  it('records each process in cache_acks with the version it applied', async () => {
    // A process writes its ack after applying the change: wait for the acks, then check them.
    await cacheSynced(fx.db.pool, PODS);
    const { rows } = await fx.db.pool.query<{ instance: string; version: number }>(
      `SELECT instance, version FROM cache_acks WHERE component = 'gateway' ORDER BY instance`,
    );
    expect(rows.map((r) => r.instance)).toEqual(['cache-0', 'cache-1', 'cache-2']);
    const head = await fx.db.pool.query<{ id: number }>('SELECT max(id)::bigint AS id FROM change_log');
    for (const r of rows) expect(r.version).toBe(head.rows[0]!.id);
  });
});
