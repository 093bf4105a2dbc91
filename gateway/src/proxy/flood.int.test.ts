// Finding 1 of issue 10: 25,000 idle connections from one address. Before the caps the process
// ran out of file descriptors and reset everyone; now the flood's source is capped at accept and
// a customer from another address, and the health endpoint, are answered at once.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import http from 'node:http';
import { Health, startHealthServer, type HealthServer } from '../../../common/src/health.ts';
import { createTestDatabase, type TestDatabase } from '../../../test/db.ts';
import { accountWithBandwidth } from '../../../test/fixtures.ts';
import {
  basicAuth,
  cacheSynced,
  gatewaySpec,
  get,
  rawExchange,
  startOrigin,
  startTestGateway,
  type Origin,
} from '../testing/harness.ts';
import { raiseFileLimit } from './limits.ts';

const FLOOD = 25_000;
let db: TestDatabase;
let origin: Origin;
let gateway: Awaited<ReturnType<typeof startTestGateway>>;
let healthServer: HealthServer;
const flooders: ChildProcess[] = [];
/** The flood comes from child processes (one process here cannot hold 25,000 descriptors). */
const FLOODERS = 2;

beforeAll(async () => {
  raiseFileLimit(() => undefined);
  db = await createTestDatabase();
  origin = await startOrigin();
  gateway = await startTestGateway(db.pool, db.url, gatewaySpec('basic'));
  healthServer = await startHealthServer(new Health([gateway.registry]), '127.0.0.1', 0);
}, 60_000);

afterAll(async () => {
  for (const f of flooders) f.kill();
  await healthServer?.close();
  await gateway?.close();
  await origin?.close();
  await db?.drop();
}, 60_000);

function startFlooder(
  port: number,
  localAddress: string,
  count: number,
): Promise<{ open: number; closed: number }> {
  const child = spawn(
    process.execPath,
    [path.join(import.meta.dirname, '../testing/flooder.ts'), String(port), localAddress, String(count)],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  flooders.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('\n')) resolve(JSON.parse(out) as { open: number; closed: number });
    });
    child.once('exit', (code) => reject(new Error(`flooder exited with ${code}`)));
  });
}

const healthStatus = (port: number) =>
  new Promise<number>((resolve) => {
    http
      .get({ host: '127.0.0.1', port, path: '/healthz' }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
      .on('error', () => resolve(0));
  });

describe('connection flood', () => {
  it(`serves a customer and the health endpoint during a flood of ${FLOOD} idle connections from one address`, async () => {
    const account = await accountWithBandwidth(db.pool, { basic: 1_000_000_000 });
    await cacheSynced(db.pool, [gateway]);
    const started = Date.now();
    const results = await Promise.all(
      Array.from({ length: FLOODERS }, () => startFlooder(gateway.port, '127.0.8.1', FLOOD / FLOODERS)),
    );
    const floodMs = Date.now() - started;
    const open = results.reduce((n, r) => n + r.open, 0);
    const t0 = Date.now();
    const r = await rawExchange(
      gateway.port,
      [get(`http://127.0.0.1:${origin.port}/peer`, basicAuth(account.proxyUsername, account.proxyPassword))],
      { sourceAddress: '127.0.8.2' },
    );
    const customerMs = Date.now() - t0;
    expect(r.responses[0]!.status).toBe(200);
    expect(await healthStatus(healthServer.port)).toBe(200);
    // The source is held to its cap on the gateway's side; everything past it is reset at accept.
    // The clients count as open what the kernel has not handed to the gateway yet: up to one
    // accept queue (511), and, on a busy machine, handshakes whose last ACK met a full queue and
    // wait for the kernel's SYN-ACK retry (1 s, 2 s, 4 s, ...). So wait for those to arrive and be
    // refused, with a deadline, rather than count at one instant.
    const total = async (name: string) =>
      (await gateway.registry.getSingleMetric(name)!.get()).values.reduce((n, v) => n + v.value, 0);
    const floor = FLOOD - 256 - 512;
    let refused = await total('proxyfleet_gateway_connection_refusals_total');
    for (const deadline = Date.now() + 60_000; refused < floor && Date.now() < deadline;) {
      await new Promise((r) => setTimeout(r, 250));
      refused = await total('proxyfleet_gateway_connection_refusals_total');
    }
    const held = await total('proxyfleet_gateway_active_connections');
    expect(held).toBeLessThanOrEqual(256);
    expect(refused).toBeGreaterThanOrEqual(floor);
    console.log(
      `flood of ${FLOOD} from one address: ${floodMs} ms to send, ${open} open as the clients saw it, ${held} held by the gateway, ${refused} reset at accept; customer answered in ${customerMs} ms`,
    );
    // The refusals' 60 s deadline above on top of the flood itself: the test's own limit is not
    // what should end a slow run.
  }, 180_000);
});
