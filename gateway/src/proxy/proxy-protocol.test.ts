// readHeaderOf on a real loopback connection: the header's client becomes the socket's peer for
// every reader (the access log's `client` here), and the client's first bytes are handed on as
// read, the header not among them; the policy's trusted ranges and IPv4-mapped peers.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import net from 'node:net';
import { Writable } from 'node:stream';
import { createLogger } from '#common/logger.ts';
import { AccessLog } from './access-log.ts';
import { buildProxyHeader } from './proxy-header.ts';
import { ProxyProtocolPolicy, readHeaderOf, type ProxyProtocolRefusal } from './proxy-protocol.ts';

type Outcome = { socket: net.Socket; first: string } | { refused: ProxyProtocolRefusal };

let server: net.Server;
const outcomes: ((o: Outcome) => void)[] = [];
const accepted: net.Socket[] = [];
const policy = new ProxyProtocolPolicy({ mode: 'optional', trustedCidrs: ['127.0.0.0/8'] });

beforeAll(async () => {
  server = net.createServer((socket) => {
    accepted.push(socket);
    readHeaderOf(socket, policy, {
      identified: () => true,
      proceed: (s, _h, first) => outcomes.shift()!({ socket: s, first: first.toString('latin1') }),
      refuse: (s, reason) => {
        s.destroy();
        outcomes.shift()!({ refused: reason });
      },
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
});

afterAll(async () => {
  for (const s of accepted) s.destroy();
  await new Promise((r) => server.close(r));
});

async function send(...parts: Buffer[]): Promise<Outcome> {
  const outcome = new Promise<Outcome>((r) => outcomes.push(r));
  const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  client.on('error', () => undefined);
  // Each part in its own write, a tick apart: the header may arrive in pieces.
  for (const part of parts) {
    client.write(part);
    await new Promise((r) => setTimeout(r, 5));
  }
  const o = await outcome;
  client.destroy();
  return o;
}

describe('readHeaderOf', () => {
  it('makes the header’s client the peer everything reads, the access log included', async () => {
    const header = buildProxyHeader(
      2,
      { address: '203.0.113.7', port: 4444 },
      { address: '127.0.0.1', port: 1 },
    );
    const o = await send(header.subarray(0, 10), header.subarray(10), Buffer.from('GET / HTTP/1.1\r\n'));
    if (!('socket' in o)) throw new Error(`refused: ${o.refused}`);
    expect([o.socket.remoteAddress, o.socket.remotePort, o.socket.remoteFamily]).toEqual([
      '203.0.113.7',
      4444,
      'IPv4',
    ]);
    expect(o.first).toBe('GET / HTTP/1.1\r\n');
    const lines: Record<string, unknown>[] = [];
    const out = new Writable({
      write(chunk: Buffer, _e, cb) {
        lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
        cb();
      },
    });
    new AccessLog(createLogger('test', 'debug', out), 'basic', 1).done('http', o.socket, 200, undefined, 0);
    expect(lines[0]).toMatchObject({ client: '203.0.113.7' });
  });

  it('without a header (optional), the peer stays the connection’s and every byte is handed on', async () => {
    const o = await send(Buffer.from('P'), Buffer.from('OST / HTTP/1.1\r\n'));
    if (!('socket' in o)) throw new Error(`refused: ${o.refused}`);
    expect(o.socket.remoteAddress).toBe('127.0.0.1');
    expect(o.first).toBe('POST / HTTP/1.1\r\n');
  });

  it('a second header split across reads is refused', async () => {
    const v1 = buildProxyHeader(1, { address: '203.0.113.7', port: 1 }, { address: '127.0.0.1', port: 2 });
    expect(await send(v1, Buffer.from('PRO'), Buffer.from('XY TCP4'))).toEqual({ refused: 'second_header' });
  });
});

describe('ProxyProtocolPolicy', () => {
  it('trusts its ranges, IPv4-mapped peers by their IPv4, and nothing else', () => {
    const p = new ProxyProtocolPolicy({
      mode: 'required',
      trustedCidrs: ['10.0.0.0/8', 'fd00::/8', '192.0.2.1'],
    });
    expect(['10.1.2.3', '::ffff:10.1.2.3', 'fd12::1', '192.0.2.1'].map((a) => p.trusts(a))).toEqual([
      true,
      true,
      true,
      true,
    ]);
    expect(['11.0.0.1', '192.0.2.2', 'fe80::1', '', undefined].map((a) => p.trusts(a))).toEqual([
      false,
      false,
      false,
      false,
      false,
    ]);
  });

  it('refuses a range that is not one, naming it', () => {
    expect(() => new ProxyProtocolPolicy({ mode: 'optional', trustedCidrs: ['10.0.0.0/40'] })).toThrow(
      /10\.0\.0\.0\/40/,
    );
  });
});
