// The counters billing reads under a TLS session (wire.ts): what crossed the TCP socket, records
// still queued in libuv when the socket is destroyed left out. Real sockets on loopback; the
// client measures what it received.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import net from 'node:net';
import tls from 'node:tls';
import { createTestCa, type IssuedCertificate, type TestCa } from '#test/tls.ts';
import { carry, carrierOf, wireOf, type TcpCarrier } from './wire.ts';

let ca: TestCa;
let leaf: IssuedCertificate;

beforeAll(async () => {
  ca = await createTestCa();
  leaf = await ca.issue('wire');
});

afterAll(async () => {
  await ca?.remove();
});

/** A TLS server session over an accepted socket, as the gateway makes one, and a client to it. */
async function session(): Promise<{
  server: tls.TLSSocket;
  carrier: TcpCarrier;
  client: tls.TLSSocket;
  tcp: net.Socket;
  close(): void;
}> {
  const context = tls.createSecureContext({ cert: leaf.cert, key: leaf.key });
  const listener = net.createServer();
  const accepted = new Promise<{ server: tls.TLSSocket; carrier: TcpCarrier }>((resolve) => {
    listener.once('connection', (raw: net.Socket) => {
      const server = new tls.TLSSocket(raw, { isServer: true, secureContext: context });
      server.on('error', () => undefined);
      const carrier = carry(server, raw);
      server.once('secure', () => resolve({ server, carrier }));
    });
  });
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  const tcp = net.connect((listener.address() as net.AddressInfo).port, '127.0.0.1');
  tcp.on('error', () => undefined);
  const client = tls.connect({ socket: tcp, ca: ca.ca, servername: 'localhost' });
  client.on('error', () => undefined);
  const { server, carrier } = await accepted;
  return { server, carrier, client, tcp, close: () => listener.close() };
}

describe('TLS wire counters', () => {
  it('are the TCP socket for a TLS session and the socket itself otherwise', async () => {
    const s = await session();
    expect(carrierOf(s.server)).toBe(s.carrier.socket);
    expect(wireOf(s.server)).toBe(s.carrier);
    expect(wireOf(s.tcp)).toBe(s.tcp);
    s.client.destroy();
    s.close();
  });

  it('count records delivered to the kernel, leaving out those dropped from the queue at destroy', async () => {
    const s = await session();
    s.client.pause();
    // One large write: node:tls encrypts it all and hands it to libuv, which queues what the
    // stalled reader's kernel buffers cannot take.
    s.server.write(Buffer.alloc(20_000_000, 1));
    let queued = 0;
    for (let i = 0; i < 100 && queued === 0; i++) {
      await new Promise((r) => setTimeout(r, 20));
      queued = s.carrier.writableLength;
    }
    expect(queued).toBeGreaterThan(0);
    const dispatched = s.carrier.bytesWritten;
    const sent = s.tcp.bytesWritten;
    s.server.destroy();
    await new Promise((r) => s.carrier.socket.once('close', r));
    // After the close the queue is gone from libuv; the counters keep what was dropped.
    expect(s.carrier.bytesWritten).toBe(dispatched);
    expect(s.carrier.writableLength).toBeGreaterThan(0);
    s.client.on('data', () => undefined);
    s.client.resume();
    await new Promise((r) => (s.tcp.destroyed ? r(null) : s.tcp.once('close', r)));
    expect(s.carrier.bytesWritten - s.carrier.writableLength).toBe(s.tcp.bytesRead);
    expect(s.carrier.bytesRead).toBe(sent);
    s.close();
  });
});
