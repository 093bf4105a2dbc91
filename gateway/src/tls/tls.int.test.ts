// TLS on the plan's own port (docs/adr/0071), end to end with node:tls clients: plain requests,
// keep-alive, CONNECT, Upgrade and SOCKS5 inside TLS, with the same admission and refusals, and
// billed as what crossed the customer's TCP socket (TLS records included) to the byte; plain HTTP
// and SOCKS5 on the same port unchanged; TLS 1.2 and 1.3 only, ALPN http/1.1, tickets resume.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import tls from 'node:tls';
import { SocksClient } from 'socks';
import { setAccountStatus } from '#common/accounts/accounts.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { cacheSynced, gatewaySpec, startTestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, connectToProxy, download, get, openTunnel, rawExchange } from '#test/gateway/client.ts';
import { counterDelta, counterValues, flushedUsage, usageAfterClose } from '#test/gateway/usage.ts';
import { useTlsGateway } from '#test/tls.ts';

const fx = useTlsGateway();
let echo: net.Server;
let echoPort: number;

beforeAll(async () => {
  // An origin that echoes raw bytes (tunnels) and answers an Upgrade request with 101 first.
  echo = net.createServer((s) => {
    s.on('error', () => undefined);
    s.once('data', (first: Buffer) => {
      if (first.toString('latin1').startsWith('GET /ws ')) {
        s.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n');
      } else s.write(first);
      s.pipe(s);
    });
  });
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  echoPort = (echo.address() as net.AddressInfo).port;
});

afterAll(async () => {
  await new Promise((r) => echo?.close(r));
});

const auth = () => basicAuth(fx.account.proxyUsername, `${fx.account.proxyPassword}_country-us`);
const trusted = fx.trusted;
/** A SOCKS5 CONNECT to the echo origin with the account's credentials, over `existing` if given. */
const socks5ToEcho = (existing?: net.Socket) =>
  SocksClient.createConnection({
    proxy: {
      host: '127.0.0.1',
      port: fx.gateway.port,
      type: 5,
      userId: fx.account.proxyUsername,
      password: `${fx.account.proxyPassword}_country-us`,
    },
    command: 'connect',
    destination: { host: '127.0.0.1', port: echoPort },
    ...(existing ? { existing_socket: existing } : {}),
  });
/** Usage once every earlier connection has closed and been billed (its close_notify included). */
async function usage(accountId = fx.account.id) {
  const open = async () =>
    (await fx.gateway.registry.getSingleMetric('proxyfleet_gateway_active_connections')!.get()).values[0]
      ?.value;
  for (let i = 0; i < 200 && (await open()) !== 0; i++) await new Promise((r) => setTimeout(r, 10));
  return flushedUsage(fx.gateway, fx.db.pool, accountId);
}

describe('requests inside TLS, billed as what crossed the TCP socket', () => {
  it('serves keep-alive plain requests and bills every TLS byte both ways, handshake included', async () => {
    const before = await usage();
    const url = `http://127.0.0.1:${fx.origin.port}`;
    const requests = [
      get(`${url}/bytes/5000`, auth()),
      get(`${url}/bytes/70000`, auth()),
      get(`${url}/peer`, auth()),
    ];
    const { responses, written, read } = await rawExchange(fx.gateway.port, requests, { tls: trusted() });
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(responses[1]!.body.length).toBe(70_000);
    const after = await usageAfterClose(fx.gateway, fx.db.pool, fx.account.id, before.up + written);
    expect(after.up - before.up).toBe(written);
    expect(after.down - before.down).toBe(read);
    expect(after.requests - before.requests).toBe(3);
    // The records, not the cleartext: the handshake alone is hundreds of bytes each way, and
    // every record adds its header and tag.
    const cleartextUp = requests.join('').length;
    expect(written - cleartextUp).toBeGreaterThan(200);
    expect(read - 75_000).toBeGreaterThan(500);
  });

  it('tunnels CONNECT inside TLS and bills the records of both layers', async () => {
    const before = await usage();
    const t = await openTunnel(fx.gateway.port, `127.0.0.1:${echoPort}`, auth(), { tls: trusted() });
    expect(t.status).toBe(200);
    const payload = Buffer.alloc(100_000, 7);
    t.socket.write(payload);
    let got = t.leftover.length;
    await new Promise<void>((r) =>
      t.socket.on('data', (c: Buffer) => {
        got += c.length;
        if (got >= payload.length) r();
      }),
    );
    t.socket.end();
    await new Promise((r) => t.tcp.once('close', r));
    const after = await usageAfterClose(
      fx.gateway,
      fx.db.pool,
      fx.account.id,
      before.up + t.tcp.bytesWritten,
    );
    expect(after.up - before.up).toBe(t.tcp.bytesWritten);
    expect(after.down - before.down).toBe(t.tcp.bytesRead);
    expect(after.requests - before.requests).toBe(1);
    expect(t.tcp.bytesRead).toBeGreaterThan(payload.length);
  });

  it('relays an Upgrade request inside TLS', async () => {
    const { socket, tcp } = await connectToProxy(fx.gateway.port, { tls: trusted() });
    socket.write(
      `GET http://127.0.0.1:${echoPort}/ws HTTP/1.1\r\nHost: 127.0.0.1:${echoPort}\r\nConnection: Upgrade\r\nUpgrade: echo\r\nProxy-Authorization: ${auth()}\r\n\r\n`,
    );
    let text = '';
    await new Promise<void>((r) =>
      socket.on('data', (c: Buffer) => {
        text += c.toString('latin1');
        if (text.includes('\r\n\r\n')) r();
      }),
    );
    expect(text).toMatch(/^HTTP\/1\.1 101 /);
    socket.write('ping');
    await new Promise<void>((r) =>
      socket.on('data', (c: Buffer) => {
        text += c.toString('latin1');
        if (text.endsWith('ping')) r();
      }),
    );
    socket.destroy();
    await new Promise((r) => (tcp.destroyed ? r(null) : tcp.once('close', r)));
  });

  it('serves SOCKS5 inside TLS, and the credentials in it', async () => {
    const { socket } = await connectToProxy(fx.gateway.port, { tls: trusted() });
    const { socket: tunnel } = await socks5ToEcho(socket);
    tunnel.write('hello');
    const echoed = await new Promise<string>((r) => tunnel.once('data', (c: Buffer) => r(c.toString())));
    expect(echoed).toBe('hello');
    tunnel.destroy();
  });

  it('refuses inside TLS as in clear: 407 with Proxy-Authenticate and Proxy-Status, not billed', async () => {
    const before = await usage();
    const { responses } = await rawExchange(
      fx.gateway.port,
      [get(`http://127.0.0.1:${fx.origin.port}/peer`)],
      {
        tls: trusted(),
      },
    );
    expect(responses[0]!.status).toBe(407);
    expect(responses[0]!.headers['proxy-authenticate']).toBe('Basic realm="proxyfleet"');
    expect(responses[0]!.headers['proxy-status']).toBe(
      'proxyfleet; error=http_request_denied; details="proxy credentials required"',
    );
    const t = await openTunnel(
      fx.gateway.port,
      `127.0.0.1:${echoPort}`,
      basicAuth(fx.account.proxyUsername, 'wrong'),
      {
        tls: trusted(),
      },
    );
    expect(t.status).toBe(407);
    await new Promise((r) => (t.tcp.destroyed ? r(null) : t.tcp.once('close', r)));
    expect(await usage()).toEqual(before);
  });

  it('answers a TLS session that sends no head in time with 408 inside it', async () => {
    const slow = await startTestGateway(
      fx.db.pool,
      fx.db.url,
      gatewaySpec('basic', undefined, { timeouts: { headersSeconds: 1 } }),
      { tls: { certFile: fx.leaf.certFile, keyFile: fx.leaf.keyFile } },
    );
    try {
      const { socket, tcp } = await connectToProxy(slow.port, { tls: trusted() });
      let text = '';
      socket.on('data', (c: Buffer) => (text += c.toString('latin1')));
      await new Promise((r) => tcp.once('close', r));
      expect(text).toMatch(/^HTTP\/1\.1 408 /);
      expect(await counterValues(slow, 'proxyfleet_gateway_refusals_total')).toEqual({
        'head_timeout 4xx': 1,
      });
    } finally {
      await slow.close();
    }
  });
});

describe('one port, three ways in', () => {
  it('still serves plain HTTP and SOCKS5 in clear next to TLS', async () => {
    const { responses } = await rawExchange(fx.gateway.port, [
      get(`http://127.0.0.1:${fx.origin.port}/bytes/10`, auth()),
    ]);
    expect(responses[0]!.status).toBe(200);
    const { socket } = await socks5ToEcho();
    socket.write('x');
    expect(await new Promise<string>((r) => socket.once('data', (c: Buffer) => r(c.toString())))).toBe('x');
    socket.destroy();
  });

  it('sends a TLS-in-TLS ClientHello to the HTTP parser: 400', async () => {
    const { socket, tcp } = await connectToProxy(fx.gateway.port, { tls: trusted() });
    socket.write(Buffer.from([0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5, 0x0d, 0x0a, 0x0d, 0x0a]));
    let text = '';
    socket.on('data', (c: Buffer) => (text += c.toString('latin1')));
    await new Promise((r) => tcp.once('close', r));
    expect(text).toMatch(/^HTTP\/1\.1 400 /);
  });
});

describe('protocol versions, ALPN and resumption', () => {
  interface Handshake {
    protocol?: string | null;
    alpn?: string | false | null;
    reused?: boolean;
    error?: NodeJS.ErrnoException;
    session?: Buffer;
  }
  const handshake = (opts: tls.ConnectionOptions) =>
    new Promise<Handshake>((resolve) => {
      const socket = tls.connect({ port: fx.gateway.port, host: '127.0.0.1', ...trusted(), ...opts });
      let session: Buffer | undefined;
      socket.on('session', (s: Buffer) => (session = s));
      socket.once('error', (error: NodeJS.ErrnoException) => resolve({ error }));
      socket.once('secureConnect', () => {
        const seen = {
          protocol: socket.getProtocol(),
          alpn: socket.alpnProtocol,
          reused: socket.isSessionReused(),
        };
        // TLS 1.3 tickets arrive after the handshake: ask for something so they are read.
        socket.write(get(`http://127.0.0.1:${fx.origin.port}/peer`, auth()));
        socket.once('data', () => {
          socket.end();
          socket.once('close', () => resolve({ ...seen, ...(session ? { session } : {}) }));
        });
      });
    });

  it('negotiates TLS 1.3 and TLS 1.2 with ALPN http/1.1, and resumes both from a ticket', async () => {
    const before = await counterValues(fx.gateway, 'proxyfleet_gateway_tls_handshakes_total');
    for (const version of ['TLSv1.3', 'TLSv1.2'] as const) {
      const first = await handshake({
        minVersion: version,
        maxVersion: version,
        ALPNProtocols: ['h2', 'http/1.1'],
      });
      expect(first).toMatchObject({ protocol: version, alpn: 'http/1.1', reused: false });
      expect(first.session).toBeDefined();
      const again = await handshake({ minVersion: version, maxVersion: version, session: first.session! });
      expect(again).toMatchObject({ protocol: version, reused: true });
    }
    expect(
      counterDelta(await counterValues(fx.gateway, 'proxyfleet_gateway_tls_handshakes_total'), before),
    ).toEqual({
      false: 2,
      true: 2,
    });
  });

  it('refuses TLS 1.1 and a client whose ALPN list lacks http/1.1, and counts them', async () => {
    const before = await counterValues(fx.gateway, 'proxyfleet_gateway_tls_handshake_failures_total');
    const h2only = await handshake({ ALPNProtocols: ['h2'] });
    expect(h2only.error?.code).toBe('ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL');
    // The machine's openssl as a TLS 1.1 client (node:tls refuses to offer it).
    const old = await new Promise<string>((resolve) => {
      const child = execFile(
        'openssl',
        ['s_client', '-connect', `127.0.0.1:${fx.gateway.port}`, '-tls1_1', '-cipher', 'DEFAULT@SECLEVEL=0'],
        { timeout: 10_000 },
        (_err, stdout, stderr) => resolve(stdout + stderr),
      );
      child.stdin?.end();
    });
    expect(old).toMatch(/alert protocol version|no protocols available|wrong version number/);
    const failures = async () =>
      counterDelta(
        await counterValues(fx.gateway, 'proxyfleet_gateway_tls_handshake_failures_total'),
        before,
      );
    // The gateway counts its side of the refusal once it has read the client's hello.
    for (let i = 0; i < 100 && ((await failures()).protocol_error ?? 0) < 2; i++)
      await new Promise((r) => setTimeout(r, 20));
    expect(await failures()).toEqual({ protocol_error: 2 });
  });
});

/** The gateway side's send queue and the client side's receive queue (/proc/net/tcp), "tx:rx". */
async function kernelQueues(gatewayPort: number, clientPort: number): Promise<string> {
  const rows = (await readFile('/proc/net/tcp', 'utf8')).split('\n').map((l) => l.trim().split(/\s+/));
  const port = (address: string | undefined) => parseInt(address?.split(':')[1] ?? '', 16);
  const queue = (local: number, remote: number, i: 0 | 1) =>
    parseInt(rows.find((r) => port(r[1]) === local && port(r[2]) === remote)?.[4]?.split(':')[i] ?? '0', 16);
  return `${queue(gatewayPort, clientPort, 0)}:${queue(clientPort, gatewayPort, 1)}`;
}

describe('a TLS connection cut mid-transfer', () => {
  it('bills the records delivered to the network, not those still queued in the gateway', async () => {
    const victim = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    await cacheSynced(fx.db.pool, [fx.gateway]);
    const victimAuth = basicAuth(victim.proxyUsername, victim.proxyPassword);
    // A first download at full speed sizes the leases from its rate: the second one stalls on the
    // reader, not on a lease boundary (docs/gateway.md, lease prefetch).
    expect(await download(fx.gateway.port, fx.origin.port, victimAuth, 16_000_000)).toBe(200);
    const before = await usage(victim.id);
    const { socket, tcp } = await connectToProxy(fx.gateway.port, { tls: trusted() });
    // A reader that stalls: the kernel buffers fill, then the gateway's queue of TLS records.
    socket.pause();
    socket.write(get(`http://127.0.0.1:${fx.origin.port}/bytes/16000000`, victimAuth));
    // Stalled once the kernel's queues on both ends stop growing: the gateway's next record waits
    // in its own queue then (the relay writes until the TLS socket pushes back).
    let last = '';
    for (let same = 0; same < 3;) {
      await new Promise((r) => setTimeout(r, 200));
      const now = await kernelQueues(fx.gateway.port, tcp.localPort!);
      same = now === last && !now.startsWith('0:') ? same + 1 : 0;
      last = now;
    }
    // Everything the client sends (its close_notify after the cut reaches a closed socket).
    const sent = tcp.bytesWritten;
    // The cut: suspending the account ends its live connections at once (docs/gateway.md).
    await setAccountStatus(fx.db.pool, victim.id, 'suspended');
    // What the gateway delivered before the cut is in the kernel buffers: read it to the end.
    tcp.on('data', () => undefined);
    socket.on('data', () => undefined);
    socket.resume();
    await new Promise((r) => (tcp.destroyed ? r(null) : tcp.once('close', r)));
    expect(tcp.bytesRead).toBeLessThan(16_000_000);
    const billed = await usageAfterClose(fx.gateway, fx.db.pool, victim.id, before.up + sent);
    expect(billed.up - before.up).toBe(sent);
    expect(billed.down - before.down).toBe(tcp.bytesRead);
  });
});
