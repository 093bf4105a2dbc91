// Caps at accept (docs/adr/0023): 25,000 idle connections from one address. Before the caps the process
// ran out of file descriptors and reset everyone; now the flood's source is capped at accept and
// a customer from another address, and the health endpoint, are answered at once.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import http from 'node:http';
import { Health, startHealthServer, type HealthServer } from '#common/health.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { cacheSynced, useTestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, get, rawExchange } from '#test/gateway/client.ts';
import { raiseFileLimit } from './limits.ts';

const FLOOD = 25_000;
let healthServer: HealthServer;
const flooders: ChildProcess[] = [];
/** The flood comes from child processes (one process here cannot hold 25,000 descriptors). */
const FLOODERS = 2;

// Declared before the gateway's hooks: the limit is raised before it starts, and the flooders
// and the health server go before it closes.
beforeAll(() => {
  raiseFileLimit(() => undefined);
});
afterAll(async () => {
  for (const f of flooders) f.kill();
  await healthServer?.close();
}, 60_000);

const fx = useTestGateway();

beforeAll(async () => {
  healthServer = await startHealthServer(new Health([fx.gateway.registry]), '127.0.0.1', 0);
});

function startFlooder(
  port: number,
  localAddress: string,
  count: number,
): Promise<{ open: number; closed: number }> {
  const child = spawn(
    process.execPath,
    [
      path.join(import.meta.dirname, '../../../test/bin/flooder.ts'),
      String(port),
      localAddress,
      String(count),
    ],
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

/**
 * The kernel's count of connections it dropped at a listener (TcpExt ListenDrops, all sockets):
 * a handshake completed by a SYN cookie whose last ACK met a full accept queue is dropped for good
 * (no state was kept to retry it), though its client counts it open.
 */
async function listenDrops(): Promise<number> {
  const lines = (await readFile('/proc/net/netstat', 'utf8'))
    .split('\n')
    .filter((l) => l.startsWith('TcpExt:'));
  const names = lines[0]!.split(' ');
  return Number(lines[1]!.split(' ')[names.indexOf('ListenDrops')]);
}

describe('connection flood', () => {
  it(`serves a customer and the health endpoint during a flood of ${FLOOD} idle connections from one address`, async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    await cacheSynced(fx.db.pool, [fx.gateway]);
    const dropsBefore = await listenDrops();
    const started = Date.now();
    const results = await Promise.all(
      Array.from({ length: FLOODERS }, () => startFlooder(fx.gateway.port, '127.0.8.1', FLOOD / FLOODERS)),
    );
    const floodMs = Date.now() - started;
    const open = results.reduce((n, r) => n + r.open, 0);
    const t0 = Date.now();
    const r = await rawExchange(
      fx.gateway.port,
      [
        get(
          `http://127.0.0.1:${fx.origin.port}/peer`,
          basicAuth(account.proxyUsername, account.proxyPassword),
        ),
      ],
      { sourceAddress: '127.0.8.2' },
    );
    const customerMs = Date.now() - t0;
    expect(r.responses[0]!.status).toBe(200);
    expect(await healthStatus(healthServer.port)).toBe(200);
    // The source is held to its cap on the gateway's side; everything past it is reset at accept.
    // The clients count as open what the gateway has not accepted: up to one accept queue (511),
    // handshakes whose last ACK met a full queue and wait for the kernel's SYN-ACK retry (1 s, 2 s,
    // 4 s, ...), and, on a busy machine, handshakes the kernel dropped for good (SYN cookies: the
    // landing CI of stop 19, and a run after the 60 s wait here, fell 44 to 233 short of a floor
    // that ignored them). So wait for the retried ones to be refused, and leave out what the kernel
    // says it dropped.
    const total = async (name: string) =>
      (await fx.gateway.registry.getSingleMetric(name)!.get()).values.reduce((n, v) => n + v.value, 0);
    const floor = async () => FLOOD - 256 - 512 - ((await listenDrops()) - dropsBefore);
    let refused = await total('proxyfleet_gateway_connection_refusals_total');
    for (const deadline = Date.now() + 30_000; refused < (await floor()) && Date.now() < deadline;) {
      await new Promise((r) => setTimeout(r, 250));
      refused = await total('proxyfleet_gateway_connection_refusals_total');
    }
    const held = await total('proxyfleet_gateway_active_connections');
    const dropped = (await listenDrops()) - dropsBefore;
    expect(held).toBeLessThanOrEqual(256);
    expect(refused).toBeGreaterThanOrEqual(await floor());
    console.log(
      `flood of ${FLOOD} from one address: ${floodMs} ms to send, ${open} open as the clients saw it, ${held} held by the gateway, ${refused} reset at accept, ${dropped} dropped by the kernel (ListenDrops); customer answered in ${customerMs} ms`,
    );
    // The refusals' 30 s deadline above on top of the flood itself: the test's own limit is not
    // what should end a slow run.
  }, 180_000);
});
