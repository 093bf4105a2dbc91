// Upgrade requests in absolute form (docs/adr/0029), end to end: a real WebSocket client (ws)
// through a real gateway over a real database to a real WebSocket origin (ws); billing as for a
// CONNECT tunnel, from the customer socket's counters; every refusal from the refusal table,
// counted under its reason; hostile Upgrade requests answered 400 while the gateway keeps serving.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import net from 'node:net';
import { Server as ProxyChainServer } from 'proxy-chain';
import { WebSocket, WebSocketServer } from 'ws';
import { billedFor, knownCustomer } from '#test/customers.ts';
import { freePort } from '#test/ports.ts';
import { setAccountStatus } from '#common/accounts/accounts.ts';
import { cacheSynced, gatewaySpec, startTestGateway, useTestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, get, rawExchange } from '#test/gateway/client.ts';
import { counterDelta, counterValues, flushedUsage } from '#test/gateway/usage.ts';

type Gateway = Awaited<ReturnType<typeof startTestGateway>>;

let origin: http.Server;
let wss: WebSocketServer;
let originPort: number;
let closedPort: number;
/** The request line, raw headers and peer address of every Upgrade request the origin received. */
const received: { line: string; headers: string[]; peer: string | undefined }[] = [];

const spec = gatewaySpec('basic', undefined, {
  timeouts: { headersSeconds: 2, connectSeconds: 2, idleSeconds: 60, maxLifetimeSeconds: 600 },
});

const fx = useTestGateway({ spec });

beforeAll(async () => {
  wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  origin = http.createServer((req, res) => {
    // Plain requests: their headers, as the origin got them.
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(req.rawHeaders));
  });
  origin.on('upgrade', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    received.push({
      line: `${req.method} ${req.url} HTTP/${req.httpVersion}`,
      headers: req.rawHeaders,
      peer: req.socket.remoteAddress,
    });
    socket.on('error', () => undefined);
    if (req.url === '/missing') {
      socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 10\r\nConnection: close\r\n\r\nno socket\n');
      return;
    }
    // ws answers 400 itself to a handshake without a valid Sec-WebSocket-Key.
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on('error', () => undefined);
      ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
    });
  });
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  originPort = (origin.address() as net.AddressInfo).port;
  closedPort = await freePort();
});

afterAll(async () => {
  wss?.close();
  origin?.closeAllConnections();
  await new Promise((r) => origin?.close(r));
});

const customer = (bandwidth?: number) => knownCustomer(fx, bandwidth);

const usage = (accountId: string) => flushedUsage(fx.gateway, fx.db.pool, accountId);

const counted = (name: string) => counterValues(fx.gateway, name);
const refusals = () => counted('proxyfleet_gateway_refusals_total');

/** A ws client whose handshake goes to the gateway as an absolute-form Upgrade request. */
function throughGateway(
  auth: string,
  path = '/echo?x=1',
  port = fx.gateway.port,
): { ws: WebSocket; socket: () => net.Socket } {
  let socket: net.Socket | undefined;
  const ws = new WebSocket(`ws://127.0.0.1:${originPort}${path}`, {
    perMessageDeflate: false,
    headers: { 'Proxy-Authorization': auth },
    createConnection: () => (socket = net.connect({ port, host: '127.0.0.1' })),
    finishRequest: (req) => {
      req.path = `http://127.0.0.1:${originPort}${path}`;
      req.end();
    },
  });
  ws.on('error', () => undefined);
  return { ws, socket: () => socket! };
}

const opened = (ws: WebSocket) =>
  new Promise<void>((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
    ws.once('close', () => reject(new Error('closed before open')));
  });

/** Sends `message` and resolves with the next message back. */
const roundTrip = (ws: WebSocket, message: string | Buffer) =>
  new Promise<{ data: Buffer; isBinary: boolean }>((resolve) => {
    // binaryType is the default 'nodebuffer': every message arrives as one Buffer.
    ws.once('message', (data, isBinary) => resolve({ data: data as Buffer, isBinary }));
    ws.send(message);
  });

/** Writes raw bytes to the gateway on a new connection and reads until the gateway closes it. */
async function raw(request: string | Buffer): Promise<{ status: number; text: string }> {
  const socket = net.connect({ port: fx.gateway.port, host: '127.0.0.1' });
  socket.on('error', () => undefined);
  let buffer = Buffer.alloc(0);
  socket.on('data', (c: Buffer) => (buffer = Buffer.concat([buffer, c])));
  socket.write(request);
  await new Promise((r) => socket.once('close', r));
  const text = buffer.toString('latin1');
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text };
}

const upgradeRequest = (authority: string, auth: string | undefined, extra = '', path = '/echo') =>
  `GET http://${authority}${path} HTTP/1.1\r\nHost: ${authority}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
  `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n` +
  `${auth ? `Proxy-Authorization: ${auth}\r\n` : ''}${extra}\r\n`;

describe('WebSocket through absolute-form Upgrade', () => {
  it('echoes messages both ways and bills exactly the bytes of the customer connection', async () => {
    const a = await customer();
    const requestsBefore = await counted('proxyfleet_gateway_requests_total');
    const { ws, socket } = throughGateway(basicAuth(a.proxyUsername, a.proxyPassword));
    await opened(ws);
    for (let i = 0; i < 5; i++) {
      const text = await roundTrip(ws, `message ${i}`);
      expect([text.data.toString(), text.isBinary]).toEqual([`message ${i}`, false]);
      const payload = Buffer.alloc(20_000 * (i + 1), i + 1);
      const binary = await roundTrip(ws, payload);
      expect(binary.isBinary).toBe(true);
      expect(binary.data.equals(payload)).toBe(true);
    }
    const closed = new Promise((r) => socket().once('close', r));
    ws.close(1000, 'done');
    await closed;
    const { bytesWritten, bytesRead } = socket();
    // Up includes the client's request head, down the origin's 101 head: as for a CONNECT.
    expect(await billedFor(fx, a.id, socket())).toEqual([bytesWritten, bytesRead, 1]);
    expect(bytesWritten).toBeGreaterThan(5 * 20_000);
    expect(counterDelta(await counted('proxyfleet_gateway_requests_total'), requestsBefore)).toEqual({
      upgrade: 1,
    });
  }, 30_000);

  it('sends the origin an origin-form request without Proxy-Authorization, keeping Upgrade', async () => {
    const a = await customer();
    received.length = 0;
    const { ws } = throughGateway(basicAuth(a.proxyUsername, a.proxyPassword), '/echo?x=1');
    await opened(ws);
    ws.close();
    expect(received).toHaveLength(1);
    const { line, headers } = received[0]!;
    expect(line).toBe('GET /echo?x=1 HTTP/1.1');
    const names = headers.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
    expect(names).not.toContain('proxy-authorization');
    expect(headers.join('\n')).not.toContain(a.proxyPassword);
    const value = (name: string) => headers[names.indexOf(name) * 2 + 1];
    expect(value('connection')).toBe('Upgrade');
    expect(value('upgrade')).toBe('websocket');
    expect(value('host')).toBe(`127.0.0.1:${originPort}`);
    expect(value('sec-websocket-key')).toBeDefined();
  }, 30_000);

  it('relays the origin answer when it does not switch protocols (404, 400)', async () => {
    const a = await customer();
    const auth = basicAuth(a.proxyUsername, a.proxyPassword);
    const missing = await raw(upgradeRequest(`127.0.0.1:${originPort}`, auth, '', '/missing'));
    expect(missing.status).toBe(404);
    expect(missing.text).toMatch(/\r\n\r\nno socket\n$/);
    expect(missing.text).not.toContain('Proxy-Status');
    // No Sec-WebSocket-Key: ws itself answers 400.
    const bad = await raw(
      `GET http://127.0.0.1:${originPort}/echo HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n` +
        `Upgrade: websocket\r\nProxy-Authorization: ${auth}\r\n\r\n`,
    );
    expect(bad.status).toBe(400);
    expect(bad.text).not.toContain('Proxy-Status');
  }, 30_000);

  it('forwards an Upgrade header without Connection: upgrade as a plain request, without it', async () => {
    const a = await customer();
    const auth = basicAuth(a.proxyUsername, a.proxyPassword);
    const { responses } = await rawExchange(fx.gateway.port, [
      get(`http://127.0.0.1:${originPort}/headers`, auth, 'Upgrade: websocket\r\n'),
    ]);
    expect(responses[0]!.status).toBe(200);
    const headers = JSON.parse(responses[0]!.body.toString()) as string[];
    expect(headers.map((h) => h.toLowerCase())).not.toContain('upgrade');
    expect(headers.map((h) => h.toLowerCase())).not.toContain('websocket');
  }, 30_000);

  it('cuts a live upgraded connection when the account is suspended, counted as a revocation cut', async () => {
    const a = await customer();
    const cutsBefore = await counted('proxyfleet_gateway_revocation_cuts_total');
    const { ws } = throughGateway(basicAuth(a.proxyUsername, a.proxyPassword));
    await opened(ws);
    expect((await roundTrip(ws, 'before')).data.toString()).toBe('before');
    const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
    await setAccountStatus(fx.db.pool, a.id, 'suspended');
    // (an idle WebSocket stays open for a minute unless the revocation cuts it; 1006: no close frame)
    expect(await closed).toBe(1006);
    expect(counterDelta(await counted('proxyfleet_gateway_revocation_cuts_total'), cutsBefore)).toEqual({
      '': 1,
    });
    await cacheSynced(fx.db.pool, [fx.gateway]);
    const before = await refusals();
    const again = await raw(
      upgradeRequest(`127.0.0.1:${originPort}`, basicAuth(a.proxyUsername, a.proxyPassword)),
    );
    expect(again.status).toBe(403);
    expect(counterDelta(await refusals(), before)).toEqual({ 'account_suspended 4xx': 1 });
  }, 30_000);
  it('bills a plain request and an upgrade on one keep-alive connection as the socket moved them', async () => {
    const a = await customer();
    const auth = basicAuth(a.proxyUsername, a.proxyPassword);
    const socket = net.connect({ port: fx.gateway.port, host: '127.0.0.1' });
    socket.on('error', () => undefined);
    let buffer = Buffer.alloc(0);
    let wake: (() => void) | undefined;
    socket.on('data', (c: Buffer) => {
      buffer = Buffer.concat([buffer, c]);
      wake?.();
    });
    const closed = new Promise<void>((r) => socket.once('close', () => (r(), wake?.())));
    const until = async (done: () => boolean) => {
      while (!done() && !socket.destroyed) await new Promise<void>((r) => (wake = r));
    };
    socket.write(get(`http://127.0.0.1:${originPort}/headers`, auth));
    await until(() => /\r\n\r\n\[.*\]$/s.test(buffer.toString('latin1')));
    expect(buffer.toString('latin1')).toMatch(/^HTTP\/1\.1 200 /);
    buffer = Buffer.alloc(0);
    socket.write(upgradeRequest(`127.0.0.1:${originPort}`, auth));
    await until(() => buffer.includes('\r\n\r\n'));
    expect(buffer.toString('latin1')).toMatch(/^HTTP\/1\.1 101 /);
    buffer = Buffer.alloc(0);
    // One masked text frame (RFC 6455 5.2); the origin echoes it unmasked.
    const mask = Buffer.of(1, 2, 3, 4);
    const text = Buffer.from('hello over a keep-alive connection');
    const masked = Buffer.from(text.map((b, i) => b ^ mask[i % 4]!));
    socket.write(Buffer.concat([Buffer.of(0x81, 0x80 | text.length), mask, masked]));
    await until(() => buffer.length >= 2 + text.length);
    expect(buffer.subarray(2, 2 + text.length).toString()).toBe(text.toString());
    // A close frame; the origin answers with its own and closes.
    socket.write(Buffer.concat([Buffer.of(0x88, 0x80), mask]));
    await closed;
    expect(await billedFor(fx, a.id, socket)).toEqual([socket.bytesWritten, socket.bytesRead, 2]);
  }, 30_000);
});

describe('Upgrade through exits', () => {
  let upstream: ProxyChainServer;
  let chained: Gateway;
  beforeAll(async () => {
    upstream = new ProxyChainServer({
      port: 0,
      host: '127.0.0.1',
      verbose: false,
      prepareRequestFunction: ({ username, password }) => ({
        requestAuthentication: username !== 'up' || password !== 'secret',
        localAddress: '127.0.0.9',
      }),
    });
    await upstream.listen();
    // Two upstream-proxy exits, one of them dead: rotation tries it first for one of two upgrades.
    chained = await startTestGateway(
      fx.db.pool,
      fx.db.url,
      gatewaySpec('basic', [
        { name: 'up-dead', upstream: { url: `http://127.0.0.1:${closedPort}` }, country: 'fr' },
        { name: 'up-live', upstream: { url: `http://up:secret@127.0.0.1:${upstream.port}` }, country: 'fr' },
      ]),
    );
  });
  afterAll(async () => {
    await chained?.close();
    await upstream?.close(true);
  });

  it('goes through an upstream proxy exit (CONNECT to it) and fails over from a dead one', async () => {
    const a = await customer();
    await cacheSynced(fx.db.pool, [chained]);
    const failures = async () =>
      (await chained.registry.getSingleMetric('proxyfleet_gateway_exit_failures_total')!.get()).values
        .filter((v) => v.labels.reason === 'refused')
        .reduce((n, v) => n + v.value, 0);
    const before = await failures();
    received.length = 0;
    for (let i = 0; i < 2; i++) {
      const { ws } = throughGateway(basicAuth(a.proxyUsername, a.proxyPassword), '/echo', chained.port);
      await opened(ws);
      expect((await roundTrip(ws, `via upstream ${i}`)).data.toString()).toBe(`via upstream ${i}`);
      ws.close();
    }
    // The upstream's own address reached the origin: the upgrade went through it.
    expect(received.map((r) => r.peer)).toEqual(['127.0.0.9', '127.0.0.9']);
    expect((await failures()) - before).toBe(1);
  }, 30_000);
});

describe('Upgrade refusals, from the refusal table', () => {
  it.each([
    ['a wrong password', 407, 'wrong_password 4xx', 'wrong_password', undefined],
    ['no bandwidth', 402, 'no_bandwidth 4xx', 'no_bandwidth', undefined],
    [
      'a prohibited destination',
      403,
      'destination_prohibited 4xx',
      'destination_prohibited',
      '169.254.169.254:80',
    ],
    ['a closed port', 502, 'destination_refused 5xx', 'destination_refused', 'closed'],
  ])(
    'refuses %s with %i',
    async (_what, status, metric, reason, authority) => {
      const a = await customer(reason === 'no_bandwidth' ? 0 : undefined);
      const password = reason === 'wrong_password' ? `x${a.proxyPassword}` : a.proxyPassword;
      const to =
        authority === 'closed' ? `127.0.0.1:${closedPort}` : (authority ?? `127.0.0.1:${originPort}`);
      const before = await refusals();
      const answer = await raw(upgradeRequest(to, basicAuth(a.proxyUsername, password)));
      expect(answer.status).toBe(status);
      expect(answer.text).toContain(`Proxy-Status: proxyfleet; error=`);
      expect(answer.text).toContain(`details="`);
      expect(counterDelta(await refusals(), before)).toEqual({ [metric]: 1 });
      expect(Number((await usage(a.id)).up)).toBe(0);
    },
    30_000,
  );
});

describe('hostile Upgrade requests', () => {
  let auth: string;
  beforeAll(async () => {
    const a = await customer();
    auth = basicAuth(a.proxyUsername, a.proxyPassword);
  });

  const withUpgrade = (value: string, extra = '', version = '1.1') =>
    `GET http://127.0.0.1:${originPort}/echo HTTP/${version}\r\nHost: x\r\nConnection: Upgrade\r\n` +
    `Upgrade: ${value}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n` +
    `Proxy-Authorization: ${auth}\r\n${extra}\r\n`;

  it.each([
    ['a space inside a token', () => withUpgrade('web socket'), /list of protocol tokens/],
    ['a quoted token', () => withUpgrade('"websocket"'), /list of protocol tokens/],
    ['two slashes', () => withUpgrade('websocket/13/1'), /list of protocol tokens/],
    ['a separator character', () => withUpgrade('web@socket'), /list of protocol tokens/],
    ['only commas', () => withUpgrade(' , ,'), /list of protocol tokens/],
    [
      'a value over 256 bytes',
      () => withUpgrade(Array(40).fill('websocket').join(', ')),
      /at most 256 bytes/,
    ],
    [
      'a Content-Length body',
      () => `${withUpgrade('websocket', 'Content-Length: 5\r\n')}hello`,
      /must not have a body/,
    ],
    [
      'a chunked body',
      () => `${withUpgrade('websocket', 'Transfer-Encoding: chunked\r\n')}5\r\nhello\r\n0\r\n\r\n`,
      /must not have a body/,
    ],
    ['HTTP/1.0', () => withUpgrade('websocket', '', '1.0'), /needs HTTP\/1.1/],
    [
      'an https:// target',
      () => withUpgrade('websocket').replace('http://', 'https://'),
      /use CONNECT for https/,
    ],
    [
      'an origin-form target',
      () => withUpgrade('websocket').replace(`http://127.0.0.1:${originPort}`, ''),
      /absolute-form/,
    ],
  ])(
    'answers 400 to %s and keeps serving',
    async (_what, request, message) => {
      received.length = 0;
      const answer = await raw(request());
      expect(answer.status).toBe(400);
      expect(answer.text).toMatch(message);
      expect(answer.text).toContain('Proxy-Status: proxyfleet; error=http_request_error');
      expect(received).toHaveLength(0);
      // The gateway still serves an upgrade.
      const { ws } = throughGateway(auth);
      await opened(ws);
      expect((await roundTrip(ws, 'still here')).data.toString()).toBe('still here');
      ws.close();
    },
    30_000,
  );

  it('counts the malformed upgrades under bad_upgrade', async () => {
    const before = await refusals();
    await raw(withUpgrade('a b'));
    await raw(`${withUpgrade('websocket', 'Content-Length: 1\r\n')}x`);
    expect(counterDelta(await refusals(), before)).toEqual({ 'bad_upgrade 4xx': 2 });
  }, 30_000);
});
