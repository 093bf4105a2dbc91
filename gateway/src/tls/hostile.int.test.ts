// Hostile TLS handshakes on the plan's port (docs/adr/0071): garbage after the 0x16, a ClientHello
// sent a byte at a time, one never followed by the rest of the handshake, wrong and absurd server
// names, and a crowd of them at once. Each is closed by the gateway (OpenSSL's refusal, or the head
// timer: headersSeconds from accept), counted by reason, and leaves nothing behind: no open
// connection in the gauge, no socket in the process, the per-source cap released; a customer is
// served meanwhile.
import { beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import { cacheSynced, gatewaySpec, startTestGateway, type TestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, get, rawExchange } from '#test/gateway/client.ts';
import { counterDelta, counterValues } from '#test/gateway/usage.ts';
import { useTlsGateway } from '#test/tls.ts';

const HEADERS_SECONDS = 1;
const spec = gatewaySpec('basic', undefined, { timeouts: { headersSeconds: HEADERS_SECONDS } });
const fx = useTlsGateway({ specs: () => [spec] });
let auth: string;
/** A real ClientHello (node:tls's), captured once. */
let hello: Buffer;

/** How late past the head timeout a close may come on a loaded machine and still count as bounded. */
const SLACK_MS = 10_000;

beforeAll(async () => {
  auth = basicAuth(fx.account.proxyUsername, fx.account.proxyPassword);
  hello = await captureClientHello();
});

async function captureClientHello(): Promise<Buffer> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const first = new Promise<Buffer>((resolve) =>
    server.once('connection', (s: net.Socket) => s.once('data', (d: Buffer) => (resolve(d), s.destroy()))),
  );
  const client = tls.connect({
    port: (server.address() as net.AddressInfo).port,
    host: '127.0.0.1',
    servername: 'localhost',
  });
  client.on('error', () => undefined);
  const bytes = await first;
  server.close();
  return bytes;
}

const failures = () => counterValues(fx.gateway, 'proxyfleet_gateway_tls_handshake_failures_total');
const openConnections = async (g: TestGateway) =>
  (await g.registry.getSingleMetric('proxyfleet_gateway_active_connections')!.get()).values[0]?.value ?? -1;
const tcpHandles = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;

/** Opens a TCP connection to the gateway; resolves when it is connected. */
async function raw(port = fx.gateway.port): Promise<net.Socket> {
  const s = net.connect(port, '127.0.0.1');
  s.on('error', () => undefined);
  await new Promise<void>((r) => s.once('connect', () => r()));
  return s;
}

/** Resolves with what the gateway sent before it closed the connection, and when it closed. */
function closed(s: net.Socket): Promise<{ bytes: number; ms: number }> {
  const started = performance.now();
  let bytes = 0;
  s.on('data', (c: Buffer) => (bytes += c.length));
  return new Promise((r) => s.once('close', () => r({ bytes, ms: performance.now() - started })));
}

async function until(done: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await done()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const settled = () => until(async () => (await openConnections(fx.gateway)) === 0, 'no open connections');

describe('hostile handshakes', () => {
  it('closes garbage after 0x16 at once, without a byte of HTTP', async () => {
    await settled();
    const before = await failures();
    const s = await raw();
    s.write(Buffer.concat([Buffer.from([0x16]), randomBytes(2000)]));
    const { bytes, ms } = await closed(s);
    // OpenSSL refuses the record (at most an alert back, never an HTTP answer); not the head timer.
    expect(bytes).toBeLessThan(16);
    expect(ms).toBeLessThan(HEADERS_SECONDS * 1000);
    await until(async () => counterDelta(await failures(), before).protocol_error === 1, 'the count');
    await settled();
  });

  it('closes a handshake record that never ends, a ClientHello sent a byte at a time, and one never followed by the rest, at the head timeout', async () => {
    await settled();
    const before = await failures();
    // A record header announcing 16 KiB, then silence.
    const truncated = await raw();
    truncated.write(Buffer.from([0x16, 0x03, 0x01, 0x40, 0x00, 0x01]));
    // A real ClientHello, one byte every 50 ms (it would take seconds to finish).
    const slow = await raw();
    let dripped = 0;
    const drip = setInterval(() => {
      if (!slow.destroyed && dripped < hello.length) slow.write(hello.subarray(dripped, ++dripped));
    }, 50);
    // A whole ClientHello, then never a Finished: the client does not read the server's flight.
    const stalled = await raw();
    stalled.write(hello);
    const results = await Promise.all([closed(truncated), closed(slow), closed(stalled)]);
    clearInterval(drip);
    expect(dripped).toBeLessThan(hello.length);
    // Closed by the head timer: not before it, and (with ample room for a busy machine) not long after.
    for (const r of results) {
      expect(r.ms).toBeGreaterThanOrEqual(HEADERS_SECONDS * 1000 - 50);
      expect(r.ms).toBeLessThan(HEADERS_SECONDS * 1000 + SLACK_MS);
    }
    // Nothing but TLS came back: no 408 in clear to a TLS client.
    expect(results[0].bytes).toBe(0);
    expect(results[1].bytes).toBe(0);
    await until(async () => counterDelta(await failures(), before).timeout === 3, 'three timeouts');
    expect(counterDelta(await failures(), before)).toEqual({ timeout: 3 });
    await settled();
  });

  it('serves the one certificate whatever the server name: a verifying client refuses a wrong name, the gateway counts it', async () => {
    await settled();
    const before = await failures();
    for (const servername of [
      'wrong.example',
      `${'x'.repeat(60)}.${'y'.repeat(60)}.${'z'.repeat(60)}.example`,
    ]) {
      const error = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
        const c = tls.connect({ port: fx.gateway.port, host: '127.0.0.1', ca: fx.ca.ca, servername });
        c.once('error', resolve);
        c.once('secureConnect', () => (c.destroy(), resolve(undefined)));
      });
      expect(error?.code).toBe('ERR_TLS_CERT_ALTNAME_INVALID');
    }
    // Counted when the client leaves, not at the head timeout.
    await until(async () => counterDelta(await failures(), before).client_closed === 2, 'two failures');
    expect(counterDelta(await failures(), before)).toEqual({ client_closed: 2 });
    // Without verification the name does not matter: the proxy works (the client chose not to check).
    const { responses } = await rawExchange(
      fx.gateway.port,
      [get(`http://127.0.0.1:${fx.origin.port}/peer`, auth)],
      {
        tls: { servername: 'wrong.example', rejectUnauthorized: false },
      },
    );
    expect(responses[0]!.status).toBe(200);
    await settled();
  });

  it('survives a crowd of hostile handshakes, serves a customer meanwhile, and leaks nothing', async () => {
    await settled();
    const handlesBefore = tcpHandles();
    const before = await failures();
    const crowd: Promise<unknown>[] = [];
    for (let i = 0; i < 60; i++) {
      const s = await raw();
      const kind = i % 3;
      if (kind === 0) s.write(Buffer.concat([Buffer.from([0x16]), randomBytes(300)]));
      else if (kind === 1) s.write(hello.subarray(0, 1 + (i % hello.length)));
      else s.write(hello);
      crowd.push(closed(s));
    }
    const { responses } = await rawExchange(
      fx.gateway.port,
      [get(`http://127.0.0.1:${fx.origin.port}/peer`, auth)],
      {
        tls: fx.trusted(),
      },
    );
    expect(responses[0]!.status).toBe(200);
    await Promise.all(crowd);
    await until(async () => {
      const d = counterDelta(await failures(), before);
      return (d.timeout ?? 0) + (d.protocol_error ?? 0) === 60;
    }, 'sixty failures');
    await settled();
    await until(async () => tcpHandles() === handlesBefore, 'the sockets to close');
  });
});

describe('caps', () => {
  it('counts a TLS handshake against its source until a request authenticates inside it', async () => {
    const capped = await startTestGateway(fx.db.pool, fx.db.url, spec, {
      tls: { certFile: fx.leaf.certFile, keyFile: fx.leaf.keyFile },
      limits: { maxUnauthenticatedPerSource: 2 },
    });
    try {
      await cacheSynced(fx.db.pool, [capped]);
      // Two authenticated keep-alive TLS connections leave the source's unauthenticated cap free.
      const kept: tls.TLSSocket[] = [];
      for (let i = 0; i < 2; i++) {
        const c = tls.connect({ port: capped.port, host: '127.0.0.1', ...fx.trusted() });
        c.on('error', () => undefined);
        await new Promise((r) => c.once('secureConnect', r));
        c.write(get(`http://127.0.0.1:${fx.origin.port}/peer`, auth));
        await new Promise((r) => c.once('data', r));
        kept.push(c);
      }
      // Two handshakes that never finish fill it: the third connection is reset at accept.
      const pending = [await raw(capped.port), await raw(capped.port)];
      for (const s of pending) s.write(hello.subarray(0, 10));
      // (Two first: the gateway counts the cap at accept, in order.)
      await until(async () => (await openConnections(capped)) === 4, 'four connections');
      const third = net.connect(capped.port, '127.0.0.1');
      const reset = await new Promise<string>((r) => {
        third.once('error', (e: NodeJS.ErrnoException) => r(e.code ?? ''));
        third.once('close', () => r('closed'));
      });
      expect(reset).toBe('ECONNRESET');
      expect(await counterValues(capped, 'proxyfleet_gateway_connection_refusals_total')).toEqual({
        source_cap: 1,
      });
      for (const c of kept) c.destroy();
      for (const s of pending) s.destroy();
    } finally {
      await capped.close();
    }
  });
});
