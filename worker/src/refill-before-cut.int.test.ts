// The refill before the cut (docs/api.md: "a fast download on one gateway is refilled before its
// traffic stops"; docs/adr/0073, docs/adr/0097): one download on one real gateway process runs
// past the auto-refill threshold and past what was bought; the refill must come in time, whoever
// buys it (a draw reporting the gateway's spend, or the real worker's fold), and the download must
// arrive whole. Real gateway, real worker, real PostgreSQL.
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithAutoRefill } from '#test/fixtures.ts';
import { startWorkerProcess } from '#test/worker.ts';
import { stopProcess, type RunningProcess } from '#test/process.ts';
import { cacheSynced, gatewaySpec } from '#test/gateway/fixture.ts';
import { startOrigin, type Origin } from '#test/gateway/origin.ts';
import { basicAuth } from '#test/gateway/client.ts';
import { spawnGateway, type GatewayProcess } from '#test/gateway/process.ts';

const MB = 1e6;

let db: TestDatabase;
let origin: Origin;
let worker: RunningProcess | undefined;
let pod: GatewayProcess | undefined;

beforeAll(async () => {
  db = await createTestDatabase();
  origin = await startOrigin();
  worker = await startWorkerProcess(db.url);
}, 60_000);

afterEach(async () => {
  await pod?.stop('SIGTERM');
  pod = undefined;
});

afterAll(async () => {
  await stopProcess(worker);
  await origin?.close();
  await db?.drop();
});

/** One download through the gateway: its status and the body bytes that arrived (-1: the connection broke). */
function download(port: number, auth: string, bytes: number): Promise<{ status: number; received: number }> {
  return new Promise((resolve) => {
    const req = http.request({
      host: '127.0.0.1',
      port,
      method: 'GET',
      path: `http://127.0.0.1:${origin.port}/bytes/${bytes}`,
      headers: { 'proxy-authorization': auth },
      agent: false,
    });
    req.on('response', (res) => {
      let received = 0;
      res.on('data', (c: Buffer) => (received += c.length));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, received }));
      res.on('aborted', () => resolve({ status: -1, received }));
      res.on('error', () => resolve({ status: -1, received }));
    });
    req.on('error', () => resolve({ status: -1, received: 0 }));
    req.end();
  });
}

// The three cases that were cut before the refill arrived (bought 20 MB, refill 50 MB, one 30 MB
// download), each run three times on a fresh account and gateway.
const cases = [
  { name: 'throttled at 2 MB/s, threshold 1 MB', throttle: 2 * MB, thresholdGb: 0.001 },
  { name: 'throttled at 13 MB/s, threshold 5 MB', throttle: 13 * MB, thresholdGb: 0.005 },
  { name: 'unthrottled, threshold 5 MB', throttle: 0, thresholdGb: 0.005 },
];

describe('the refill comes before the cut on one fast gateway', () => {
  it.each(cases.flatMap((c) => [1, 2, 3].map((run) => ({ ...c, run }))))(
    '$name (run $run): a 30 MB download with 20 MB bought completes, one refill bought',
    async ({ throttle, thresholdGb }) => {
      const account = await accountWithAutoRefill(db.pool, 20 * MB, {
        thresholdGb,
        refillGb: 0.05,
        maxRefillsPerMonth: 5,
      });
      if (throttle)
        await db.pool.query(
          `INSERT INTO account_throttles (account_id, product, bytes_per_second) VALUES ($1, 'basic', $2)`,
          [account.id, throttle],
        );
      pod = await spawnGateway(db.url, gatewaySpec('basic'), {
        PROXYFLEET_GATEWAY_ID: `refill-${account.id}`,
      });
      await cacheSynced(db.pool, 1);
      const started = Date.now();
      const result = await download(
        pod.port,
        basicAuth(account.proxyUsername, account.proxyPassword),
        30 * MB,
      );
      const bought = (
        await db.pool.query<{ created_at: Date }>(
          `SELECT created_at FROM purchases WHERE account_id = $1 AND source = 'auto_refill' ORDER BY created_at`,
          [account.id],
        )
      ).rows;
      const at = bought.map((b) => b.created_at.getTime() - started);
      process.stdout.write(
        `refill before the cut, ${throttle ? `${throttle / MB} MB/s` : 'unthrottled'}: ${JSON.stringify(result)} in ${Date.now() - started} ms, refills at ${JSON.stringify(at)} ms\n`,
      );
      if (result.received !== 30 * MB)
        console.log(
          pod
            .output()
            .split('\n')
            .filter((l) => /"level":(40|50)|cut|denied/.test(l))
            .join('\n'),
        );
      expect(result).toEqual({ status: 200, received: 30 * MB });
      expect(bought).toHaveLength(1);
    },
    60_000,
  );
});
