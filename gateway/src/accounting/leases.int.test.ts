import { describe, expect, it } from '@jest/globals';
import http from 'node:http';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { gatewaySpec, useTestGateway } from '#test/gateway/fixture.ts';
import { basicAuth } from '#test/gateway/client.ts';
import { fold } from '#test/gateway/usage.ts';
import { type GatewayProcess } from '#test/gateway/process.ts';
import { overspendBound } from './policy.ts';

// Five gateway processes drain one small budget at once (docs/adr/0020 states the bound).
const PODS = 5;
const CLIENTS_PER_POD = 3;
const BUDGET = 20_000_000;
const DOWNLOAD = 1_000_000;
const BOUND = overspendBound(PODS, CLIENTS_PER_POD);
/** Without enforcement every client would download this many times. */
const MAX_DOWNLOADS_PER_CLIENT = 40;

const pods: GatewayProcess[] = [];

// The test spawns the gateway processes.
const fx = useTestGateway({ gateway: false });

function download(port: number, auth: string, agent: http.Agent): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request({
      host: '127.0.0.1',
      port,
      method: 'GET',
      path: `http://127.0.0.1:${fx.origin.port}/bytes/${DOWNLOAD}`,
      headers: { 'proxy-authorization': auth },
      agent,
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', () => resolve(-1));
      res.on('aborted', () => resolve(-1));
    });
    req.on('error', () => resolve(-1));
    req.end();
  });
}

describe('bandwidth leases across pods', () => {
  it(`${PODS} gateway processes draining one budget overspend at most the documented bound`, async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: BUDGET });
    for (let i = 0; i < PODS; i++)
      pods.push(
        await fx.spawn(gatewaySpec('basic'), {
          PROXYFLEET_GATEWAY_ID: `pod-${i}`,
          PROXYFLEET_LOG_LEVEL: 'info',
        }),
      );
    const auth = basicAuth(account.proxyUsername, account.proxyPassword);
    const outcomes: number[] = [];
    await Promise.all(
      pods.flatMap((pod) =>
        Array.from({ length: CLIENTS_PER_POD }, async () => {
          const agent = new http.Agent({ keepAlive: false });
          // A customer retries a refusal a few times before giving up.
          let refusals = 0;
          for (let i = 0; i < MAX_DOWNLOADS_PER_CLIENT && refusals < 3; i++) {
            const status = await download(pod.port, auth, agent);
            outcomes.push(status);
            refusals = status === 402 ? refusals + 1 : 0;
            if (status === 402) await new Promise((r) => setTimeout(r, 1_000));
          }
        }),
      ),
    );
    expect(outcomes).toContain(402);
    for (const pod of pods.splice(0)) expect(await pod.stop('SIGTERM')).toBe(0);
    await fold(fx.db.pool);
    const { rows } = await fx.db.pool.query<{
      total_bytes: number;
      used_bytes: number;
      leased_bytes: number;
    }>(
      `SELECT total_bytes, used_bytes, leased_bytes FROM balances WHERE account_id = $1 AND product = 'basic'`,
      [account.id],
    );
    const b = rows[0]!;
    const open = await fx.db.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM bandwidth_leases WHERE released_at IS NULL',
    );
    expect(open.rows[0]!.n).toBe(0);
    expect(b.leased_bytes).toBe(0);
    expect(b.used_bytes).toBeLessThanOrEqual(BUDGET + BOUND);
    // And the budget was really drained (the bound is not met by refusing early).
    expect(b.used_bytes).toBeGreaterThan(BUDGET * 0.95);
    process.stdout.write(
      `lease test: used ${b.used_bytes} of ${BUDGET} (overspend ${b.used_bytes - BUDGET}, bound ${BOUND})\n`,
    );
  }, 120_000);
});
