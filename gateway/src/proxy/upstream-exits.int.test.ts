// The raw upstream client against node:http's through exits (docs/adr/0038; the cases without
// exits: upstream.int.test.ts): an upstream-proxy exit, whose "proxy" is a byte-exact server like
// the origin (it answers absolute-form requests itself, so the customer sees the exact bytes each
// client sent it), and source-address exits (loopback 127.0.0.x). Two gateways over one database,
// one with the raw client and one with node:http's (test/node-upstream.ts), to a raw TCP origin
// that answers each path with exact bytes (test/byte-origin.ts): the customer's bytes, the request
// bytes, the usage and the exits' failures must be the same.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import net from 'node:net';
import os from 'node:os';
import { byteServer, compareClients, requester, type ByteServer } from '#test/byte-origin.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { cacheSynced, gatewaySpec, useTestGateway, type TestGateway } from '#test/gateway/fixture.ts';
import { basicAuth } from '#test/gateway/client.ts';
import { until } from '#test/process.ts';

let origin: ByteServer;
let originPort: number;

const fx = useTestGateway({ gateway: false });

beforeAll(async () => {
  origin = byteServer();
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  originPort = (origin.address() as net.AddressInfo).port;
});

afterAll(() => {
  origin?.close();
});

const both = (
  requests: (auth: string) => (string | Buffer)[],
  { pair, suffix }: { pair: TestGateway[]; suffix: string },
) => compareClients(fx.db.pool, pair, requests, suffix);

const request = requester(() => originPort);

describe('raw upstream client against node:http through exits', () => {
  let proxy: ByteServer;
  let pair: TestGateway[];
  const PROXY_AUTH = `Basic ${Buffer.from('up:secret').toString('base64')}`;
  const failures = async (gateway: TestGateway) =>
    (await gateway.registry.getSingleMetric('proxyfleet_gateway_exit_failures_total')!.get()).values.reduce(
      (n, v) => n + v.value,
      0,
    );
  /** Connections the upstream proxy accepted. */
  let accepted = 0;

  beforeAll(async () => {
    proxy = byteServer();
    proxy.on('connection', () => accepted++);
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const proxyPort = (proxy.address() as net.AddressInfo).port;
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const deadPort = (closed.address() as net.AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const spec = gatewaySpec(
      'basic',
      [
        { name: 'fr-up', upstream: { url: `http://up:secret@127.0.0.1:${proxyPort}` }, country: 'fr' },
        { name: 'it-dead', upstream: { url: `http://up:secret@127.0.0.1:${deadPort}` }, country: 'it' },
        { name: 'es-dead', upstream: { url: `http://up:secret@127.0.0.1:${deadPort}` }, country: 'es' },
        { name: 'es-local', sourceAddress: '127.0.0.3', country: 'es' },
        { name: 'de-local', sourceAddress: '127.0.0.2', country: 'de' },
        // An address this host does not have (TEST-NET-1): binding it fails. The gateways are told
        // it is on an interface (as between its removal and the next check, exit-addresses.ts), so
        // the exit is tried and the bind failure is what is tested.
        { name: 'nl-unbound', sourceAddress: '192.0.2.1', country: 'nl' },
      ],
      { timeouts: { headersSeconds: 2, connectSeconds: 2, idleSeconds: 5, maxLifetimeSeconds: 600 } },
    );
    const interfaces = () => ({
      ...os.networkInterfaces(),
      test: [
        {
          address: '192.0.2.1',
          netmask: '255.255.255.255',
          family: 'IPv4' as const,
          mac: '00:00:00:00:00:00',
          internal: false,
          cidr: '192.0.2.1/32',
        },
      ],
    });
    pair = [
      await fx.start(spec, { upstreamClient: 'raw', interfaces }),
      await fx.start(spec, { upstreamClient: 'node', interfaces }),
    ];
  }, 30_000);

  afterAll(async () => {
    for (const g of pair ?? []) await g.close();
    proxy?.close();
  });

  // Each case starts with no pooled sockets: the proxy and the origin close every connection
  // (idle pooled sockets seeing EOF are dropped by both clients).
  beforeEach(async () => {
    for (const s of [...proxy.sockets, ...origin.sockets]) s.destroy();
    await new Promise((r) => setTimeout(r, 100));
    accepted = 0;
  });

  it('upstream proxy: the exact request each client sends it (absolute form, Proxy-Authorization, Host, Connection)', async () => {
    const r = await both((auth) => [request('GET', '/echo', auth)], { pair, suffix: '_country-fr' });
    const target = `127.0.0.1:${originPort}`;
    expect(r.raw.reads[0]).toMatch(
      new RegExp(
        `\r\n\r\nGET http://${target}/echo HTTP/1\\.1\r\nHost: ${target}\r\n` +
          `Proxy-Authorization: ${PROXY_AUTH}\r\nConnection: keep-alive\r\n\r\n$`,
      ),
    );
    expect(r.raw.reads).toEqual(r.node.reads);
    expect(r.raw.usage).toEqual(r.node.usage);
  }, 60_000);

  const cases: [string, string, string?, string?, string?][] = [
    ['content-length', '/cl'],
    ['HEAD with a Content-Length', '/head', 'HEAD'],
    ['100 Continue, then 200', '/100'],
    ['chunked with extensions and trailers', '/chunked'],
    ['close-delimited', '/until-close'],
    ['POST with Content-Length (echoed)', '/echo', 'POST', 'Content-Length: 11\r\n', 'hello world'],
    [
      'POST chunked (re-encoded, echoed)',
      '/echo',
      'POST',
      'Transfer-Encoding: chunked\r\n',
      '5\r\nhello\r\n0\r\n\r\n',
    ],
    // The upstream proxy's own 407 is relayed as an origin's answer would be (Proxy-Authenticate
    // dropped as hop-by-hop), and the exit is not marked failed: node did so, raw does the same.
    ['a 407 from the upstream proxy: relayed', '/407'],
    // Through an upstream proxy any failure before the answer is the exit's (isExitFault): both
    // mark it and answer exit_failed; after the answer began, the customer's connection is cut.
    ['head cut by EOF: refused, the exit counted failed', '/cut-head'],
    ['body cut by EOF: cut', '/cut-body'],
  ];
  for (const [name, path, method = 'GET', extra = '', body = ''] of cases) {
    it(`upstream proxy: ${name}`, async () => {
      const before = await Promise.all(pair.map(failures));
      const r = await both((auth) => [request(method, path, auth, extra, body)], {
        pair,
        suffix: '_country-fr',
      });
      expect(r.raw.reads).toEqual(r.node.reads);
      const status = { '/407': 407, '/cut-head': 502 }[path] ?? 200;
      expect(r.raw.reads[0]).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
      if (status === 407) expect(r.raw.reads[0]).not.toContain('Proxy-Authenticate');
      if (status === 502) expect(r.raw.reads[0]).toContain('could not be reached');
      expect(r.raw.usage).toEqual(r.node.usage);
      if (status !== 502) expect(r.raw.usage.up).toBeGreaterThan(0);
      const failed = (await Promise.all(pair.map(failures))).map((n, i) => n - before[i]!);
      expect(failed).toEqual(status === 502 ? [1, 1] : [0, 0]);
    }, 60_000);
  }

  it('upstream proxy: one pooled socket per exit, reused across requests and destinations', async () => {
    const nth = (read: string) => read.slice(read.lastIndexOf('\r\n\r\n') + 4);
    const dials: number[] = [];
    const r = await both(
      (auth) => {
        dials.push(accepted);
        return [
          request('GET', '/nth', auth),
          request('GET', '/nth', auth),
          // Another destination: the same connection to the upstream proxy.
          request('GET', '/nth', auth, '', '', '127.0.0.2'),
        ];
      },
      { pair, suffix: '_country-fr' },
    );
    dials.push(accepted);
    expect(r.raw.reads).toEqual(r.node.reads);
    expect(r.raw.reads.map(nth)).toEqual(['1', '2', '3']);
    // Each gateway dialled the proxy once.
    expect(dials[1]! - dials[0]!).toBe(1);
    expect(dials[2]! - dials[1]!).toBe(1);
    expect(r.raw.usage).toEqual(r.node.usage);
  }, 60_000);

  it('upstream proxy: a pooled socket it closed at the next request (stale) is sent again on a new one', async () => {
    const before = await Promise.all(pair.map(failures));
    const dials: number[] = [];
    const r = await both(
      (auth) => {
        dials.push(accepted);
        return [request('GET', '/stale', auth), request('GET', '/stale', auth)];
      },
      { pair, suffix: '_country-fr' },
    );
    dials.push(accepted);
    expect(r.raw.reads).toEqual(r.node.reads);
    expect(r.raw.reads[1]).toMatch(/^HTTP\/1\.1 200 OK[^]*fresh$/);
    expect([dials[1]! - dials[0]!, dials[2]! - dials[1]!]).toEqual([2, 2]);
    expect(r.raw.usage).toEqual(r.node.usage);
    // A stale pooled socket is not the exit failing.
    expect(await Promise.all(pair.map(failures))).toEqual(before);
  }, 60_000);

  it('upstream proxy refusing the connection: 502 exit_failed, the exit counted failed', async () => {
    const before = await Promise.all(pair.map(failures));
    const r = await both((auth) => [request('GET', '/cl', auth)], { pair, suffix: '_country-it' });
    // exit_failed's message (destination_refused says "refused or closed the connection").
    expect(r.raw.reads[0]).toMatch(/^HTTP\/1\.1 502 [^]*could not be reached/);
    expect(r.raw.reads).toEqual(r.node.reads);
    expect(r.raw.usage).toEqual(r.node.usage);
    expect((await Promise.all(pair.map(failures))).map((n, i) => n - before[i]!)).toEqual([1, 1]);
  }, 60_000);

  it('upstream proxy refusing a request with a body: not resent elsewhere, 502 exit_failed', async () => {
    const before = await Promise.all(pair.map(failures));
    const r = await both((auth) => [request('POST', '/echo', auth, 'Content-Length: 5\r\n', 'hello')], {
      pair,
      suffix: '_country-it',
    });
    expect(r.raw.reads[0]).toMatch(/^HTTP\/1\.1 502 [^]*could not be reached/);
    expect(r.raw.reads).toEqual(r.node.reads);
    expect(r.raw.usage).toEqual(r.node.usage);
    expect((await Promise.all(pair.map(failures))).map((n, i) => n - before[i]!)).toEqual([1, 1]);
  }, 60_000);

  it('upstream proxy refusing, with another exit matching: fails over to it', async () => {
    const before = await Promise.all(pair.map(failures));
    // Rotation starts at es-dead (first in the spec), whose proxy refuses; es-local answers.
    const r = await both((auth) => [request('GET', '/peer', auth), request('GET', '/peer', auth)], {
      pair,
      suffix: '_country-es',
    });
    expect(r.raw.reads).toEqual(r.node.reads);
    for (const read of r.raw.reads) expect(read).toMatch(/^HTTP\/1\.1 200 [^]*\r\n\r\n127\.0\.0\.3$/);
    expect((await Promise.all(pair.map(failures))).map((n, i) => n - before[i]!)).toEqual([1, 1]);
    expect(r.raw.usage).toEqual(r.node.usage);
  }, 60_000);

  it('source-address exit whose address cannot be bound: 502 exit_failed, the exit counted failed', async () => {
    const before = await Promise.all(pair.map(failures));
    const r = await both((auth) => [request('GET', '/cl', auth)], { pair, suffix: '_country-nl' });
    expect(r.raw.reads[0]).toMatch(/^HTTP\/1\.1 502 [^]*could not be reached/);
    expect(r.raw.reads).toEqual(r.node.reads);
    expect(r.raw.usage).toEqual(r.node.usage);
    expect((await Promise.all(pair.map(failures))).map((n, i) => n - before[i]!)).toEqual([1, 1]);
  }, 60_000);

  it('source-address exit: the origin sees the same address and request bytes, the socket is pooled', async () => {
    const nth = (read: string) => read.slice(read.lastIndexOf('\r\n\r\n') + 4);
    const r = await both(
      (auth) => [
        request('GET', '/peer', auth),
        request('GET', '/echo', auth),
        request('POST', '/echo', auth, 'Content-Length: 11\r\n', 'hello world'),
        request('GET', '/nth', auth),
        request('GET', '/nth', auth),
      ],
      { pair, suffix: '_country-de' },
    );
    expect(r.raw.reads).toEqual(r.node.reads);
    expect(nth(r.raw.reads[0]!)).toBe('127.0.0.2');
    // Origin-form through a source-address exit, no Proxy-Authorization.
    expect(r.raw.reads[1]).toMatch(
      new RegExp(
        `\r\n\r\nGET /echo HTTP/1\\.1\r\nHost: 127\\.0\\.0\\.1:${originPort}\r\nConnection: keep-alive\r\n\r\n$`,
      ),
    );
    // One pooled socket carried them all: /peer, two /echo, then /nth is its 4th and 5th request.
    expect(r.raw.reads.slice(3).map(nth)).toEqual(['4', '5']);
    expect(r.raw.usage).toEqual(r.node.usage);
  }, 60_000);

  it("a malformed answer on a pooled socket through an upstream proxy: the exit's fault for both, as on a new socket", async () => {
    const before = await Promise.all(pair.map(failures));
    const r = await both((auth) => [request('GET', '/cl', auth), request('GET', '/bare-lf', auth)], {
      pair,
      suffix: '_country-fr',
    });
    expect(r.raw.reads).toEqual(r.node.reads);
    // raw resends only what a stale socket gives (EOF or reset before any byte of an answer); an
    // answer that began and is malformed is the upstream proxy's, pooled socket or not. node's
    // send() resends on any error of a reused socket and reaches the same 502 on the new one.
    expect(r.raw.reads[1]).toMatch(/^HTTP\/1\.1 502 [^]*could not be reached/);
    expect((await Promise.all(pair.map(failures))).map((n, i) => n - before[i]!)).toEqual([1, 1]);
  }, 60_000);

  // Where the two legitimately differ through an upstream-proxy exit.
  it('the customer leaving before the answer: node counts it against the upstream exit, raw does not', async () => {
    const abandoned = async (gateway: TestGateway) =>
      (await gateway.registry.getSingleMetric('proxyfleet_gateway_refusals_total')!.get()).values
        .filter((v) => v.labels.reason === 'client_abandoned')
        .reduce((n, v) => n + v.value, 0);
    const before = await Promise.all(pair.map(failures));
    const abandonedBefore = await Promise.all(pair.map(abandoned));
    for (const gateway of pair) {
      const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
      await cacheSynced(fx.db.pool, [gateway]);
      const sent = proxy.received.get('/never') ?? 0;
      const socket = net.connect({ port: gateway.port, host: '127.0.0.1' });
      socket.on('error', () => undefined);
      socket.write(
        request('GET', '/never', basicAuth(account.proxyUsername, `${account.proxyPassword}_country-fr`)),
      );
      // The customer leaves once the upstream proxy has the request (not before it is sent).
      await until(
        () => (proxy.received.get('/never') ?? 0) > sent,
        'the upstream proxy to get the request',
        10_000,
      );
      socket.destroy();
    }
    // Both gateways' verdicts, awaited: raw counts the abandonment, node the exit's failure.
    const delta = async (count: (g: TestGateway) => Promise<number>, then: number[]) =>
      (await Promise.all(pair.map(count))).map((n, i) => n - then[i]!);
    await until(
      async () =>
        (await delta(abandoned, abandonedBefore))[0]! >= 1 && (await delta(failures, before))[1]! >= 1,
      'raw to count the abandonment and node the exit failure',
      10_000,
    );
    // node's destroyed request emits ECONNRESET, which isExitFault counts for an upstream exit.
    expect(await delta(failures, before)).toEqual([0, 1]);
  }, 60_000);
});
