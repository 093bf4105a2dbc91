// Chaining through an upstream proxy: bytes the upstream sends in the same packet as its
// "200 Connection established" (a server that speaks first: SSH, SMTP, IMAP, MySQL) reach the
// customer instead of being dropped between the head parser and the tunnel.
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { openThroughExit } from './connect-exit.ts';
import { buildExit } from './exits.ts';

const GREETING = 'SSH-2.0-OpenSSH_9.6\r\n';

describe('openThroughExit with an upstream proxy', () => {
  let upstream: net.Server;
  const requests: string[] = [];

  beforeAll(async () => {
    upstream = net.createServer((socket) => {
      socket.on('error', () => undefined);
      socket.once('data', (chunk: Buffer) => {
        requests.push(chunk.toString('latin1'));
        // The established answer and the destination's first bytes in one write.
        socket.end(`HTTP/1.1 200 Connection established\r\n\r\n${GREETING}`);
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  });
  afterAll(async () => {
    upstream.unref();
    await new Promise((r) => upstream.close(r));
  });

  it('delivers the bytes that arrive with the 200', async () => {
    const port = (upstream.address() as AddressInfo).port;
    const exit = buildExit({ name: 'up', country: 'us', upstream: { url: `http://127.0.0.1:${port}` } });
    const socket = await openThroughExit(
      exit,
      { host: 'ssh.example', address: '93.184.216.34', port: 22 },
      2_000,
    );
    // A tunnel consumer attaches later (after the customer was told 200): nothing may be lost.
    await new Promise((r) => setTimeout(r, 50));
    let received = '';
    socket.setEncoding('latin1');
    socket.on('data', (c: string) => (received += c));
    const ended = new Promise((r) => socket.once('end', r));
    socket.resume(); // as the tunnel's pipe() does
    await ended;
    socket.destroy();
    expect(received).toBe(GREETING);
    expect(requests[0]).toMatch(/^CONNECT ssh\.example:22 HTTP\/1\.1\r\n/);
  });
});
