// The front end's CONNECT fast path against node:http's CONNECT path (docs/adr/0027): the same
// requests, byte for byte, to two gateways over one database, one with the fast path and one
// without, must get the same answers, count the same refusals and bill the same bytes.
import { beforeAll, describe, expect, it } from '@jest/globals';
import net from 'node:net';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { freePort } from '#test/ports.ts';
import {
  cacheSynced,
  gatewaySpec,
  startTestGateway,
  useTestGateway,
  type TestGateway,
} from '#test/gateway/fixture.ts';
import { basicAuth } from '#test/gateway/client.ts';
import { recordedUsage } from '#test/gateway/usage.ts';

let fast: TestGateway;
let legacy: TestGateway;
let closedPort: number;

const fx = useTestGateway({ gateway: false });

beforeAll(async () => {
  const spec = gatewaySpec('basic', undefined, {
    timeouts: { headersSeconds: 2, connectSeconds: 2, idleSeconds: 60, maxLifetimeSeconds: 600 },
  });
  fast = await fx.start(spec);
  legacy = await fx.start(spec, { connectFastPath: false });
  closedPort = await freePort();
});

/**
 * Sends `pieces` (20 ms apart, or each once what was read so far matches its `after` pattern),
 * then `end` (FIN) if asked, and reads until the gateway closes or `expect` bytes came; returns
 * everything read (Date headers blanked: the origin's clock moves).
 */
async function exchange(
  port: number,
  pieces: (string | Buffer)[],
  options: { expect?: number; end?: boolean; after?: (RegExp | undefined)[] } = {},
): Promise<string> {
  const socket = net.connect({ port, host: '127.0.0.1' });
  socket.on('error', () => undefined);
  await new Promise<void>((r) => socket.once('connect', () => r()));
  let read = Buffer.alloc(0);
  let closed = false;
  let progress: () => void = () => undefined;
  const done = new Promise<void>((resolve) => {
    socket.on('data', (c: Buffer) => {
      read = Buffer.concat([read, c]);
      progress();
      if (options.expect !== undefined && read.length >= options.expect) resolve();
    });
    socket.once('close', () => {
      closed = true;
      progress();
      resolve();
    });
  });
  /** Until the bytes read so far match `pattern` (or the gateway closed: nothing more comes). */
  const readUntil = (pattern: RegExp) =>
    new Promise<void>((resolve) => {
      progress = () => {
        if (closed || pattern.test(read.toString('latin1'))) resolve();
      };
      progress();
    });
  for (const [i, piece] of pieces.entries()) {
    const after = options.after?.[i];
    if (after) await readUntil(after);
    else if (i > 0) await new Promise((r) => setTimeout(r, 20));
    socket.write(piece);
  }
  if (options.end) socket.end();
  await done;
  // Let the gateway read what the client sent last before the connection goes.
  await new Promise((r) => setTimeout(r, 50));
  socket.destroy();
  await new Promise((r) => setTimeout(r, 50));
  return read.toString('latin1').replace(/^Date: .*$/gim, 'Date: -');
}

const refusals = async (gateway: typeof fast) =>
  Object.fromEntries(
    (await gateway.registry.getSingleMetric('proxyfleet_gateway_refusals_total')!.get()).values
      .filter((v) => v.value > 0)
      .map((v) => [`${v.labels.reason} ${v.labels.status_class}`, v.value]),
  );

type Case = [
  name: string,
  pieces: (auth: string) => (string | Buffer)[],
  options?: {
    expect?: number;
    end?: boolean;
    after?: (RegExp | undefined)[];
    bandwidth?: number;
    tunnelled?: boolean;
  },
];

describe('CONNECT fast path against node:http', () => {
  const target = () => `127.0.0.1:${fx.origin.port}`;
  const head = (auth: string, authority = target()) =>
    `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: ${auth}\r\n\r\n`;
  // The origin closes after its answer, and the tunnel with it: the exchange reads everything.
  const inner = 'GET /bytes/5000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n';
  /** The end of the tunnel's 200, read before the request inside goes. */
  const established = /Connection Established\r\n\r\n$/;
  const cases: Case[] = [
    [
      'a tunnel, the request inside sent after the 200',
      (a) => [head(a), inner],
      { after: [undefined, established], tunnelled: true },
    ],
    ['a tunnel with the request inside sent with the head', (a) => [head(a) + inner], { tunnelled: true }],
    ['a head arriving in pieces', (a) => [...head(a).match(/.{1,7}/gs)!, inner], { tunnelled: true }],
    [
      'a TLS-like first flight right after the head',
      (a) => [Buffer.concat([Buffer.from(head(a)), Buffer.alloc(300, 0x16)])],
    ],
    ['wrong password', () => [head(basicAuth('nobody', 'wrong'))]],
    ['no Proxy-Authorization', () => [`CONNECT ${target()} HTTP/1.1\r\nHost: x\r\n\r\n`]],
    [
      'Proxy-Authorization twice (the first counts)',
      (a) => [
        `CONNECT ${target()} HTTP/1.1\r\nProxy-Authorization: ${a}\r\nProxy-Authorization: Basic eDp5\r\n\r\n`,
      ],
      { expect: 39 },
    ],
    ['a port that is prohibited', (a) => [head(a, '127.0.0.1:25')]],
    ['a prohibited destination', (a) => [head(a, '10.1.2.3:443')]],
    ['no port', (a) => [head(a, '127.0.0.1')]],
    ['the destination refuses', (a) => [head(a, `127.0.0.1:${closedPort}`)]],
    ['no bandwidth', (a) => [head(a)], { bandwidth: 0 }],
    [
      'duplicate Content-Length',
      (a) => [
        `CONNECT ${target()} HTTP/1.1\r\nProxy-Authorization: ${a}\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n`,
      ],
    ],
    ['obs-fold', (a) => [`CONNECT ${target()} HTTP/1.1\r\nProxy-Authorization: ${a}\r\nX: a\r\n b\r\n\r\n`]],
    ['bare LF', (a) => [`CONNECT ${target()} HTTP/1.1\nProxy-Authorization: ${a}\n\n`]],
    [
      'a head too large',
      (a) => [
        `CONNECT ${target()} HTTP/1.1\r\nProxy-Authorization: ${a}\r\nX: ${'a'.repeat(20_000)}\r\n\r\n`,
      ],
    ],
    ['a head cut by the client', (a) => [head(a).slice(0, 30)], { end: true }],
    ['nothing, then the client ends', () => [Buffer.alloc(0)], { end: true }],
    [
      'a CONNECT after a plain request on one connection',
      (a) => [
        `GET http://${target()}/bytes/10 HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${a}\r\n\r\n`,
        head(a),
        inner,
      ],
      // (The CONNECT waits for the whole plain answer: sent at once, node:http's 200 for the tunnel
      // can land inside the plain answer's body on either path. The request inside the tunnel
      // waits for the 200.)
      { after: [undefined, /\r\n\r\nx{10}$/, established], tunnelled: true },
    ],
  ];

  for (const [name, pieces, options = {}] of cases) {
    it(`answers and bills alike: ${name}`, async () => {
      const [a, b] = await Promise.all([
        accountWithBandwidth(
          fx.db.pool,
          options.bandwidth === 0 ? {} : { basic: options.bandwidth ?? 1_000_000_000 },
        ),
        accountWithBandwidth(
          fx.db.pool,
          options.bandwidth === 0 ? {} : { basic: options.bandwidth ?? 1_000_000_000 },
        ),
      ]);
      await cacheSynced(fx.db.pool, [fast, legacy]);
      const before = [await refusals(fast), await refusals(legacy)];
      const viaFast = await exchange(fast.port, pieces(basicAuth(a.proxyUsername, a.proxyPassword)), options);
      const viaLegacy = await exchange(
        legacy.port,
        pieces(basicAuth(b.proxyUsername, b.proxyPassword)),
        options,
      );
      expect(viaFast).toBe(viaLegacy);
      // (and the tunnels carried the origin's whole answer)
      if (options.tunnelled)
        expect(viaFast).toMatch(/Connection Established\r\n\r\nHTTP\/1\.1 200 OK[^]*\r\n\r\nx{5000}$/);
      await Promise.all([fast.ledger.flush(), legacy.ledger.flush()]);
      const [usageA, usageB] = await Promise.all([
        recordedUsage(fx.db.pool, a.id),
        recordedUsage(fx.db.pool, b.id),
      ]);
      expect(usageA).toEqual(usageB);
      const counted = (now: Record<string, number>, then: Record<string, number>) =>
        Object.fromEntries(
          Object.entries(now)
            .filter(([k, v]) => v !== (then[k] ?? 0))
            .map(([k, v]) => [k, v - (then[k] ?? 0)]),
        );
      expect(counted(await refusals(fast), before[0]!)).toEqual(counted(await refusals(legacy), before[1]!));
    }, 20_000);
  }
});

describe('front end at shutdown', () => {
  it('closes connections that have not sent a byte at once, as node:http closes its idle ones', async () => {
    const drainMs = 10_000;
    const gateway = await startTestGateway(fx.db.pool, fx.db.url, gatewaySpec('basic'), { drainMs });
    const silent = net.connect({ port: gateway.port, host: '127.0.0.1' });
    silent.on('error', () => undefined);
    await new Promise<void>((r) => silent.once('connect', () => r()));
    const closedAt = new Promise<number>((r) => silent.once('close', () => r(Date.now())));
    const started = Date.now();
    await gateway.close();
    // Without the front end's closeIdle the drain waited its whole 10 s for this connection.
    expect((await closedAt) - started).toBeLessThan(drainMs / 2);
  }, 60_000);
});
