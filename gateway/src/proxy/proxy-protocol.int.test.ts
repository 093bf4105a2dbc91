// The PROXY protocol on the plan's port (docs/adr/0102) with HAProxy in front, as a cloud load
// balancer would be: HAProxy's connections to the gateways leave from 127.0.0.9 (the trusted
// balancer), customers connect to HAProxy from their own loopback addresses (Linux routes all of
// 127/8 to lo), and the IP allowlist admits them by the address HAProxy's header names. Hostile
// headers are sent straight from the trusted address, past HAProxy, as a compromised or buggy
// balancer (or anyone who can reach the pod) could.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import net from 'node:net';
import { DEFAULT_ALLOWLIST_MAX } from '#common/ip-allowlist.ts';
import type { NewAccount } from '#common/accounts/accounts.ts';
import { addAllowlistEntry } from '#api/modules/ip-allowlist/repo.ts';
import { allowlistCreate } from '#api/modules/ip-allowlist/schemas.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { get, rawExchange } from '#test/gateway/client.ts';
import { cacheSynced, gatewaySpec, type TestGateway, useTestGateway } from '#test/gateway/fixture.ts';
import { counterDelta, counterValues, recordedUsage } from '#test/gateway/usage.ts';
import { startHaproxy, type Haproxy } from '#test/haproxy.ts';
import { until } from '#test/process.ts';
import { createTestCa, type TestCa } from '#test/tls.ts';
import { buildProxyHeader } from './proxy-header.ts';

const BALANCER = '127.0.0.9';
const proxied = (mode: 'optional' | 'required') =>
  gatewaySpec('basic', undefined, {
    proxyProtocol: { mode, trustedCidrs: [`${BALANCER}/32`] },
    timeouts: { headersSeconds: 2, connectSeconds: 5, idleSeconds: 60, maxLifetimeSeconds: 600 },
  });

const fx = useTestGateway({ spec: () => proxied('optional') });
let required: TestGateway;
let capped: TestGateway;
let secure: TestGateway;
let ca: TestCa;
let haproxy: Haproxy;
/** HAProxy's frontends: the optional gateway by v1, v2 and no header; the others by v2. */
const front = { v1: 0, v2: 0, none: 0, required: 0, capped: 0, tls: 0 };

beforeAll(async () => {
  required = await fx.start(proxied('required'));
  capped = await fx.start(proxied('optional'), { limits: { maxUnauthenticatedPerSource: 2 } });
  ca = await createTestCa();
  const leaf = await ca.issue('gateway');
  secure = await fx.start(proxied('optional'), { tls: { certFile: leaf.certFile, keyFile: leaf.keyFile } });
  haproxy = await startHaproxy(
    [
      { backendPort: fx.gateway.port, proxy: 1 },
      { backendPort: fx.gateway.port, proxy: 2 },
      { backendPort: fx.gateway.port, proxy: undefined },
      { backendPort: required.port, proxy: 2 },
      { backendPort: capped.port, proxy: 2 },
      { backendPort: secure.port, proxy: 1 },
    ],
    BALANCER,
  );
  [front.v1, front.v2, front.none, front.required, front.capped, front.tls] = haproxy.ports as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
}, 60_000);

afterAll(async () => {
  await haproxy?.stop();
  await ca?.remove();
});

// Each test takes its own customer addresses: 127.40.<n>.x.
let nextSubnet = 0;
const subnet = () => `127.40.${++nextSubnet}`;

/** An account whose allowlist admits `cidr` (through the API's own schema and repo). */
async function allowlisted(cidr: string): Promise<NewAccount> {
  const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
  const body = allowlistCreate(true).parse({ product: 'basic', cidr });
  await addAllowlistEntry(fx.db.pool, account.id, body, DEFAULT_ALLOWLIST_MAX);
  await cacheSynced(fx.db.pool, [fx.gateway, required, capped, secure]);
  return account;
}

/** A request without credentials from `from` on `port`: its status (0: closed unanswered). */
async function status(port: number, from: string, path = '/bytes/1000'): Promise<number> {
  try {
    const { responses } = await rawExchange(port, [get(`http://127.0.0.1:${fx.origin.port}${path}`)], {
      sourceAddress: from,
    });
    return responses[0]!.status;
  } catch {
    return 0;
  }
}

const refusals = (g: TestGateway) => counterValues(g, 'proxyfleet_gateway_proxy_protocol_refusals_total');

/** Sends `bytes` from `from` (ending its side with `end`); what came back before the gateway closed. */
async function hostile(port: number, bytes: Buffer, from = BALANCER, end = false): Promise<Buffer> {
  const socket = net.connect({ port, host: '127.0.0.1', localAddress: from });
  socket.on('error', () => undefined);
  const got: Buffer[] = [];
  socket.on('data', (c: Buffer) => got.push(c));
  await new Promise<void>((r) => socket.once('connect', () => r()));
  socket.write(bytes);
  if (end) socket.end();
  await new Promise<void>((r) => socket.once('close', () => r()));
  return Buffer.concat(got);
}

describe('PROXY protocol behind HAProxy', () => {
  it('admits an allowlisted customer by its own address (send-proxy and send-proxy-v2), billed to it; refuses it when only HAProxy is seen', async () => {
    const net24 = subnet();
    const account = await allowlisted(`${net24}.0/24`);
    const before = await counterValues(fx.gateway, 'proxyfleet_gateway_proxy_protocol_headers_total');
    expect(await status(front.v1, `${net24}.7`)).toBe(200);
    expect(await status(front.v2, `${net24}.8`)).toBe(200);
    // Without the header the gateway sees HAProxy's 127.0.0.9, which no allowlist entry admits.
    expect(await status(front.none, `${net24}.9`)).toBe(407);
    const after = await counterValues(fx.gateway, 'proxyfleet_gateway_proxy_protocol_headers_total');
    expect(counterDelta(after, before)).toEqual({ '1': 1, '2': 1 });
    await fx.gateway.ledger.flushSettled();
    const usage = await recordedUsage(fx.db.pool, account.id);
    expect(Number(usage.requests)).toBe(2);
    expect(Number(usage.down)).toBeGreaterThan(2_000);
  });

  it('a customer outside the allowlist is refused by its own address through HAProxy', async () => {
    await allowlisted(`${subnet()}.0/24`);
    expect(await status(front.v2, `${subnet()}.7`)).toBe(407);
  });

  it('required: served through HAProxy; a connection without a header, or from an untrusted source, is closed unanswered and counted', async () => {
    const net24 = subnet();
    await allowlisted(`${net24}.0/24`);
    expect(await status(front.required, `${net24}.7`)).toBe(200);
    const before = await refusals(required);
    // Straight to the gateway from the balancer's address, an HTTP request with no header.
    expect(await status(required.port, BALANCER)).toBe(0);
    // From the customer's own address (not a trusted balancer): closed at once, header or not.
    expect(await status(required.port, `${net24}.8`)).toBe(0);
    const header = buildProxyHeader(1, { address: `${net24}.8`, port: 1 }, { address: '127.0.0.1', port: 2 });
    expect(await hostile(required.port, header, `${net24}.8`)).toHaveLength(0);
    expect(counterDelta(await refusals(required), before)).toEqual({ missing: 1, untrusted_source: 2 });
  });

  it('TLS after the header: the session is served and the allowlist sees the header’s address', async () => {
    const net24 = subnet();
    await allowlisted(`${net24}.0/24`);
    const { responses } = await rawExchange(
      front.tls,
      [get(`http://127.0.0.1:${fx.origin.port}/bytes/100`)],
      {
        sourceAddress: `${net24}.7`,
        tls: { ca: ca.ca, servername: 'localhost' },
      },
    );
    expect(responses[0]!.status).toBe(200);
  });

  it('SOCKS5 after the header: an allowlisted customer gets its tunnel without credentials', async () => {
    const net24 = subnet();
    await allowlisted(`${net24}.0/24`);
    const socket = net.connect({ port: front.v2, host: '127.0.0.1', localAddress: `${net24}.7` });
    socket.on('error', () => undefined);
    let buf = Buffer.alloc(0);
    const read = async (n: number) => {
      while (buf.length < n && !socket.destroyed)
        await new Promise<void>((r) =>
          socket.once('data', (c: Buffer) => ((buf = Buffer.concat([buf, c])), r())),
        );
      const out = buf.subarray(0, n);
      buf = buf.subarray(n);
      return [...out];
    };
    socket.write(Buffer.of(5, 1, 0));
    expect(await read(2)).toEqual([5, 0]);
    const p = fx.origin.port;
    socket.write(Buffer.of(5, 1, 0, 1, 127, 0, 0, 1, p >> 8, p & 0xff));
    expect((await read(10))[1]).toBe(0);
    socket.write('GET /bytes/10 HTTP/1.1\r\nHost: origin\r\n\r\n');
    const line = await read(12);
    expect(Buffer.from(line).toString('latin1')).toBe('HTTP/1.1 200');
    socket.destroy();
  });

  it('the per-source cap on connections not yet authenticated counts the header’s address, not HAProxy’s', async () => {
    const a = `${subnet()}.7`;
    const b = `${subnet()}.7`;
    const headers = () => counterValues(capped, 'proxyfleet_gateway_proxy_protocol_headers_total');
    const before = (await headers())['2'] ?? 0;
    // Two silent connections from A through HAProxy: each a header and nothing else yet.
    const silent = [0, 1].map(() => {
      const s = net.connect({ port: front.capped, host: '127.0.0.1', localAddress: a });
      s.on('error', () => undefined);
      return s;
    });
    await until(async () => ((await headers())['2'] ?? 0) >= before + 2, 'two headers read');
    const refusedBefore = await counterValues(capped, 'proxyfleet_gateway_connection_refusals_total');
    // A third from A is over A's cap; B, behind the same HAProxy, is not.
    expect(await status(front.capped, a)).toBe(0);
    expect(await status(front.capped, b)).toBe(407);
    const refused = await counterValues(capped, 'proxyfleet_gateway_connection_refusals_total');
    expect(counterDelta(refused, refusedBefore)).toEqual({ source_cap: 1 });
    for (const s of silent) s.destroy();
  });

  it('hostile headers from the trusted address are closed unanswered and counted; a live tunnel through HAProxy is untouched', async () => {
    const net24 = subnet();
    await allowlisted(`${net24}.0/24`);
    // A keep-alive connection through HAProxy, open across the barrage.
    const live = net.connect({ port: front.v2, host: '127.0.0.1', localAddress: `${net24}.7` });
    live.on('error', () => undefined);
    const ask = () =>
      new Promise<string>((resolve) => {
        let got = '';
        const onData = (c: Buffer) => {
          got += c.toString('latin1');
          if (got.includes('\r\n\r\n') && got.endsWith('x'.repeat(10))) {
            live.off('data', onData);
            resolve(got.split(' ')[1]!);
          }
        };
        live.on('data', onData);
        live.write(get(`http://127.0.0.1:${fx.origin.port}/bytes/10`));
      });
    expect(await ask()).toBe('200');

    const before = await refusals(fx.gateway);
    const client = { address: '203.0.113.7', port: 5000 };
    const gw = { address: '127.0.0.1', port: fx.gateway.port };
    const v1 = buildProxyHeader(1, client, gw);
    const v2 = buildProxyHeader(2, client, gw);
    const request = Buffer.from(get(`http://127.0.0.1:${fx.origin.port}/bytes/10`));
    const cases: [string, Buffer, boolean][] = [
      ['truncated v1', v1.subarray(0, 20), true],
      ['truncated v2', v2.subarray(0, 20), true],
      ['oversized v1', Buffer.from('PROXY TCP4 ' + '1'.repeat(120)), false],
      ['oversized v2', Buffer.concat([v2.subarray(0, 14), Buffer.of(0xff, 0xff)]), false],
      ['family mismatch v1', Buffer.from('PROXY TCP4 ::1 ::2 1 2\r\n'), false],
      ['family mismatch v2', Buffer.concat([v2.subarray(0, 13), Buffer.of(0x21), v2.subarray(14)]), false],
      ['a second header', Buffer.concat([v2, v1, request]), false],
      ['a second header, partial', Buffer.concat([v1, v2.subarray(0, 14)]), true],
    ];
    for (const [name, bytes, end] of cases)
      expect([name, (await hostile(fx.gateway.port, bytes, BALANCER, end)).length]).toEqual([name, 0]);
    // A wrong signature is no header: in `required` mode it is refused as missing; in `optional`
    // mode its bytes are an HTTP head, which node:http refuses with 400.
    const wrong = Buffer.from(v2);
    wrong[11] = 0x0b;
    expect(await hostile(required.port, Buffer.concat([wrong, request]))).toHaveLength(0);
    expect((await hostile(fx.gateway.port, Buffer.concat([wrong, request]))).toString('latin1')).toMatch(
      /^HTTP\/1\.1 400/,
    );
    // A valid header from a source not trusted.
    expect(await hostile(fx.gateway.port, Buffer.concat([v1, request]), `${net24}.9`)).toHaveLength(0);
    expect(counterDelta(await refusals(fx.gateway), before)).toEqual({
      malformed: 2,
      too_long: 2,
      family_mismatch: 2,
      second_header: 2,
      untrusted_source: 1,
    });
    // Part of a header, then silence: closed by the head timer, counted as a timeout.
    await hostile(fx.gateway.port, v1.subarray(0, 10));
    expect(counterDelta(await refusals(fx.gateway), before)).toMatchObject({ timeout: 1 });
    expect(await ask()).toBe('200');
    live.destroy();
  });
});
