// The raw upstream client against node:http's (docs/adr/0038): the same requests through two
// gateways over one database, one with PROXYFLEET_GATEWAY_UPSTREAM_CLIENT=raw and one with node,
// to a raw TCP origin that answers each path with exact bytes (split as it likes). Each case must
// give the customer the same bytes (status, headers, body, framing; Date blanked), show the origin
// the same request bytes, and bill the same usage.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import net from 'node:net';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { basicAuth, cacheSynced, gatewaySpec, startTestGateway, usageAfterClose } from '#test/gateway.ts';
import { until } from '#test/process.ts';

type Gateway = Awaited<ReturnType<typeof startTestGateway>>;

let db: TestDatabase;
let raw: Gateway;
let node: Gateway;
let origin: ReturnType<typeof byteServer>;
let originPort: number;

/** How the origin answers: the bytes, written as these pieces (a gap between each), then maybe FIN. */
interface Answer {
  pieces: (string | Buffer)[];
  /** Close the connection after writing (close-delimited bodies, Connection: close). */
  end?: boolean;
  /** Write each piece byte by byte. */
  bytewise?: boolean;
}

const LONG = 'x'.repeat(20 * 1024);

/** Origin behaviours by path; `req` is the request's raw bytes (head and body) as received. */
const answers: Record<string, (req: Buffer, nth: number, peer: string) => Answer | 'close'> = {
  '/cl': () => ({ pieces: ['HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\n\r\nhello'] }),
  '/cl-split': () => ({
    pieces: ['HTTP/1.1 200 OK\r\nContent-Length: 11\r\nX-A: 1\r\n\r\nhello world'],
    bytewise: true,
  }),
  '/chunked': () => ({
    pieces: [
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n',
      '5;ext=1\r\nhello\r\n6;a;b="c"\r\n world\r\n',
      '0\r\nX-Trailer: t\r\n\r\n',
    ],
  }),
  '/chunked-split': () => ({
    pieces: [
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;e\r\nhello\r\nA\r\n0123456789\r\n0\r\nT: 1\r\n\r\n',
    ],
    bytewise: true,
  }),
  '/until-close': () => ({ pieces: ['HTTP/1.1 200 OK\r\nX: y\r\n\r\nbody ', 'until close'], end: true }),
  '/head': () => ({ pieces: ['HTTP/1.1 200 OK\r\nContent-Length: 100\r\nX: h\r\n\r\n'] }),
  '/204': () => ({ pieces: ['HTTP/1.1 204 No Content\r\nX: 1\r\n\r\n'] }),
  '/304': () => ({ pieces: ['HTTP/1.1 304 Not Modified\r\nETag: "x"\r\n\r\n'] }),
  '/100': () => ({
    pieces: ['HTTP/1.1 100 Continue\r\n\r\n', 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'],
  }),
  '/103': () => ({
    pieces: [
      'HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n',
      'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nLink: </s.css>; rel=preload\r\n\r\nok',
    ],
  }),
  '/conn-close': () => ({
    pieces: ['HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok'],
    end: true,
  }),
  '/http10': () => ({ pieces: ['HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nabc'] }),
  '/http10-close': () => ({ pieces: ['HTTP/1.0 200 OK\r\nX: 1\r\n\r\nuntil eof'], end: true }),
  '/http10-keepalive': () => ({
    pieces: ['HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\nabc'],
  }),
  '/big': () => ({
    pieces: [
      `HTTP/1.1 200 OK\r\nContent-Length: ${3 * 1024 * 1024}\r\n\r\n`,
      Buffer.alloc(3 * 1024 * 1024, 7),
    ],
  }),
  // Which request on its origin connection this is: 2 and more when the gateway reused a socket.
  '/nth': (_req, nth) => ({
    pieces: [`HTTP/1.1 200 OK\r\nContent-Length: ${String(nth).length}\r\n\r\n${nth}`],
  }),
  // The address the connection came from (an exit's source address).
  '/peer': (_req, _nth, peer) => ({
    pieces: [`HTTP/1.1 200 OK\r\nContent-Length: ${peer.length}\r\n\r\n${peer}`],
  }),
  // What an upstream proxy answers a request it does not accept (relayed as any answer).
  '/407': () => ({
    pieces: [
      'HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="up"\r\n' +
        'Content-Length: 6\r\n\r\ndenied',
    ],
  }),
  '/echo': (req) => ({
    pieces: [`HTTP/1.1 200 OK\r\nContent-Length: ${req.length}\r\n\r\n`, req],
  }),
  // The second request on a kept-alive connection finds it closed: a stale pooled socket.
  '/stale': (_req, nth) =>
    nth > 1 ? 'close' : { pieces: ['HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfresh'] },
  // No answer at all (the customer leaves first).
  '/never': () => ({ pieces: [] }),
  // Refused by both clients.
  '/cl-and-te': () => ({
    pieces: [
      'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n',
    ],
  }),
  '/two-cl': () => ({
    pieces: ['HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!'],
  }),
  '/bad-chunk': () => ({
    pieces: ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n'],
  }),
  '/oversized': () => ({
    pieces: [`HTTP/1.1 200 OK\r\nX-Long: ${LONG}\r\nContent-Length: 2\r\n\r\nok`],
  }),
  '/bare-lf': () => ({ pieces: ['HTTP/1.1 200 OK\nContent-Length: 2\n\nok'] }),
  '/obs-fold': () => ({
    pieces: ['HTTP/1.1 200 OK\r\nX-A: 1\r\n  folded\r\nContent-Length: 2\r\n\r\nok'],
  }),
  '/bad-token': () => ({ pieces: ['HTTP/1.1 200 OK\r\nBad Header: 1\r\nContent-Length: 2\r\n\r\nok'] }),
  '/cl-nan': () => ({ pieces: ['HTTP/1.1 200 OK\r\nContent-Length: 2x\r\n\r\nok'] }),
  '/te-gzip': () => ({
    pieces: ['HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nok'],
    end: true,
  }),
  '/101': () => ({
    pieces: ['HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n'],
  }),
  '/cut-head': () => ({ pieces: ['HTTP/1.1 200 OK\r\nContent-Le'], end: true }),
  '/cut-body': () => ({ pieces: ['HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello'], end: true }),
  '/chunk-no-crlf': () => ({
    pieces: ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n'],
  }),
};

/** Reads one request (head and any Content-Length or chunked body) from `buf`; its length or -1. */
function requestLength(buf: Buffer): number {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return -1;
  const head = buf.subarray(0, end).toString('latin1').toLowerCase();
  const cl = /\r\ncontent-length: *(\d+)/.exec(head);
  if (cl) return buf.length >= end + 4 + Number(cl[1]) ? end + 4 + Number(cl[1]) : -1;
  if (/\r\ntransfer-encoding: *chunked/.test(head)) {
    const last = buf.indexOf('\r\n0\r\n\r\n', end);
    const first = buf.indexOf('0\r\n\r\n', end + 4);
    if (first === end + 4) return end + 9;
    return last < 0 ? -1 : last + 7;
  }
  return end + 4;
}

async function write(socket: net.Socket, a: Answer): Promise<void> {
  for (const piece of a.pieces) {
    const bytes = Buffer.from(piece);
    if (a.bytewise) {
      for (let i = 0; i < bytes.length; i++) {
        socket.write(bytes.subarray(i, i + 1));
        await new Promise((r) => setImmediate(r));
      }
    } else socket.write(bytes);
    await new Promise((r) => setTimeout(r, 10));
  }
  if (a.end) socket.end();
}

/**
 * A raw TCP server answering each request by its path (origin-form or absolute-form) from
 * `answers`; `sockets` holds its open connections (so a test can close them all), `received`
 * how many requests it has read for each path.
 */
function byteServer(): net.Server & { sockets: Set<net.Socket>; received: Map<string, number> } {
  const sockets = new Set<net.Socket>();
  const received = new Map<string, number>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let buf = Buffer.alloc(0);
    let nth = 0;
    let busy = Promise.resolve();
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      for (let n = requestLength(buf); n > 0; n = requestLength(buf)) {
        const req = buf.subarray(0, n);
        buf = buf.subarray(n);
        const path = /^[A-Z]+ (?:http:\/\/[^/]+)?([^ ?]*)/.exec(req.toString('latin1'))![1]!;
        received.set(path, (received.get(path) ?? 0) + 1);
        const answer = answers[path]!(req, ++nth, socket.remoteAddress!);
        busy = busy.then(() => (answer === 'close' ? void socket.destroy() : write(socket, answer)));
      }
    });
  });
  return Object.assign(server, { sockets, received });
}

beforeAll(async () => {
  db = await createTestDatabase();
  origin = byteServer();
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  originPort = (origin.address() as net.AddressInfo).port;
  const spec = gatewaySpec('basic', undefined, {
    timeouts: { headersSeconds: 2, connectSeconds: 2, idleSeconds: 5, maxLifetimeSeconds: 600 },
  });
  raw = await startTestGateway(db.pool, db.url, spec, { upstreamClient: 'raw' });
  node = await startTestGateway(db.pool, db.url, spec, { upstreamClient: 'node' });
}, 30_000);

afterAll(async () => {
  await raw?.close();
  await node?.close();
  origin?.close();
  await db?.drop();
});

/** Sends `request` on a fresh connection and reads until the gateway closes it (Date blanked). */
async function send(gateway: Gateway, request: string | Buffer): Promise<{ read: string; written: number }> {
  const socket = net.connect({ port: gateway.port, host: '127.0.0.1' });
  socket.on('error', () => undefined);
  await new Promise<void>((r) => socket.once('connect', () => r()));
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  const closed = new Promise<void>((r) => socket.on('close', () => r()));
  socket.write(request);
  const timer = setTimeout(() => socket.destroy(), 8_000);
  await closed;
  clearTimeout(timer);
  return {
    read: Buffer.concat(chunks)
      .toString('latin1')
      .replace(/\r\nDate: [^\r]*/g, '\r\nDate: -'),
    written: socket.bytesWritten,
  };
}

/**
 * The same requests through both gateways (`pair`: raw first), each with its own account whose
 * password gets `suffix` (targeting, e.g. `_country-fr`): answers and usage.
 */
async function both(
  requests: (auth: string) => (string | Buffer)[],
  { pair = [raw, node], suffix = '' }: { pair?: Gateway[]; suffix?: string } = {},
) {
  const out = [];
  for (const gateway of pair) {
    const account = await accountWithBandwidth(db.pool, { basic: 1_000_000_000 });
    await cacheSynced(db.pool, [gateway]);
    const auth = basicAuth(account.proxyUsername, account.proxyPassword + suffix);
    const reads: string[] = [];
    let written = 0;
    for (const r of requests(auth)) {
      const x = await send(gateway, r);
      reads.push(x.read);
      written += x.written;
    }
    const usage = await usageAfterClose(gateway, db.pool, account.id, written);
    out.push({
      reads,
      usage: { up: Number(usage.up), down: Number(usage.down), requests: Number(usage.requests) },
    });
  }
  return { raw: out[0]!, node: out[1]! };
}

const request = (
  method: string,
  path: string,
  auth: string,
  extra = '',
  body: string | Buffer = '',
  host = '127.0.0.1',
) =>
  Buffer.concat([
    Buffer.from(
      `${method} http://${host}:${originPort}${path} HTTP/1.1\r\nHost: ${host}:${originPort}\r\n` +
        `Proxy-Authorization: ${auth}\r\nConnection: close\r\n${extra}\r\n`,
      'latin1',
    ),
    Buffer.from(body),
  ]);

describe('raw upstream client against node:http (same answers, same billing)', () => {
  const cases: [string, string, string?, string?][] = [
    ['content-length', '/cl'],
    ['content-length written byte by byte', '/cl-split'],
    ['chunked with extensions and trailers', '/chunked'],
    ['chunked written byte by byte', '/chunked-split'],
    ['close-delimited', '/until-close'],
    ['HEAD with a Content-Length', '/head', 'HEAD'],
    ['204', '/204'],
    ['304', '/304'],
    ['100 Continue, then 200', '/100'],
    ['103 Early Hints, then 200', '/103'],
    ['Connection: close', '/conn-close'],
    ['HTTP/1.0 with Content-Length', '/http10'],
    ['HTTP/1.0 close-delimited', '/http10-close'],
    ['HTTP/1.0 keep-alive', '/http10-keepalive'],
    ['3 MiB body', '/big'],
    ['POST with Content-Length (the origin echoes what it got)', '/echo', 'POST', 'Content-Length: 11\r\n'],
    ['POST without a body header (an empty chunked body, as node sends it)', '/echo', 'POST'],
    ['DELETE without a body', '/echo', 'DELETE'],
    ['CL and TE: refused', '/cl-and-te'],
    ['two different Content-Lengths: refused', '/two-cl'],
    ['bad chunk size: cut', '/bad-chunk'],
    ['oversized head: refused', '/oversized'],
    ['obs-fold: refused', '/obs-fold'],
    ['invalid header name: refused', '/bad-token'],
    ['non-numeric Content-Length: refused', '/cl-nan'],
    ['head cut by EOF: refused', '/cut-head'],
    ['body cut by EOF: cut', '/cut-body'],
    ['chunk data without CRLF: cut', '/chunk-no-crlf'],
    ['bare LF in the head: refused', '/bare-lf'],
  ];
  for (const [name, path, method = 'GET', extra = ''] of cases) {
    it(
      name,
      async () => {
        const body = extra.includes('Content-Length: 11') ? 'hello world' : '';
        const r = await both((auth) => [request(method, path, auth, extra, body)]);
        expect(r.raw.reads).toEqual(r.node.reads);
        expect(r.raw.usage).toEqual(r.node.usage);
        // A refusal after admission bills nothing (tab.refused()); answers relayed bill their bytes.
        if (!/refused|cut/.test(name)) expect(r.raw.usage.up).toBeGreaterThan(0);
      },
      60_000,
    );
  }

  it('POST chunked: re-encoded to the origin the same way', async () => {
    const body = '5\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n';
    const r = await both((auth) => [request('POST', '/echo', auth, 'Transfer-Encoding: chunked\r\n', body)]);
    expect(r.raw.reads).toEqual(r.node.reads);
    // The body as node's server decoded it, chunk by chunk; the customer's trailer is not sent on.
    expect(r.raw.reads[0]).toContain(
      'Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n',
    );
    expect(r.raw.usage).toEqual(r.node.usage);
  }, 60_000);

  it('a 1 MiB chunked upload and its 1 MiB echo: the same bytes both ways', async () => {
    const piece = 'a'.repeat(64 * 1024);
    const body = `${Array.from({ length: 16 }, () => `10000\r\n${piece}\r\n`).join('')}0\r\n\r\n`;
    const r = await both((auth) => [request('POST', '/echo', auth, 'Transfer-Encoding: chunked\r\n', body)]);
    // How the upload is cut into chunks follows the customer socket's reads (timing): compared
    // decoded, with the heads the origin saw compared exactly.
    const decoded = (read: string) => {
      const echo = read.slice(read.indexOf('\r\n\r\n') + 4);
      const headEnd = echo.indexOf('\r\n\r\n') + 4;
      let data = '';
      for (let at = headEnd; ;) {
        const eol = echo.indexOf('\r\n', at);
        const size = parseInt(echo.slice(at, eol), 16);
        if (!size) break;
        data += echo.slice(eol + 2, eol + 2 + size);
        at = eol + 2 + size + 2;
      }
      return { head: echo.slice(0, headEnd), data: data.length, same: data === 'a'.repeat(data.length) };
    };
    expect(decoded(r.raw.reads[0]!)).toEqual({
      head: decoded(r.node.reads[0]!).head,
      data: 1024 * 1024,
      same: true,
    });
    expect(decoded(r.node.reads[0]!).data).toBe(1024 * 1024);
    expect(r.raw.usage.up).toBe(r.node.usage.up);
  }, 60_000);

  it('a request with a body to a closed port: the same 502', async () => {
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const r = await both((auth) => [
      Buffer.from(
        `POST http://127.0.0.1:${port}/ HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nProxy-Authorization: ${auth}\r\n` +
          'Content-Length: 5\r\nConnection: close\r\n\r\nhello',
      ),
    ]);
    expect(r.raw.reads[0]).toMatch(/^HTTP\/1\.1 502 /);
    expect(r.raw.reads).toEqual(r.node.reads);
    expect(r.raw.usage).toEqual(r.node.usage);
  }, 60_000);

  it('keep-alive: pooled sockets reused across customer connections and requests alike', async () => {
    const keep = (auth: string) =>
      `GET http://127.0.0.1:${originPort}/nth HTTP/1.1\r\nHost: 127.0.0.1:${originPort}\r\nProxy-Authorization: ${auth}\r\n\r\n`;
    const r = await both((auth) => [
      request('GET', '/nth', auth),
      request('GET', '/nth', auth),
      // Two requests on one customer connection, the second sent with the first.
      Buffer.from(keep(auth) + request('GET', '/nth', auth).toString('latin1')),
    ]);
    expect(r.raw.reads).toEqual(r.node.reads);
    // The second request went on the socket the first left in the pool (earlier cases may have left others).
    const nth = (read: string) => Number(read.slice(read.lastIndexOf('\r\n\r\n') + 4));
    expect(nth(r.raw.reads[1]!)).toBe(nth(r.raw.reads[0]!) + 1);
    expect(r.raw.usage).toEqual(r.node.usage);
  }, 60_000);

  it('a stale pooled socket (closed by the origin at the next request): sent again', async () => {
    const r = await both((auth) => [request('GET', '/stale', auth), request('GET', '/stale', auth)]);
    expect(r.raw.reads).toEqual(r.node.reads);
    expect(r.raw.reads[1]).toMatch(/^HTTP\/1\.1 200 OK[^]*fresh$/);
    expect(r.raw.usage).toEqual(r.node.usage);
  }, 60_000);

  // Where the two legitimately differ.
  it('Transfer-Encoding not ending in chunked: raw refuses it (node relays it close-delimited)', async () => {
    const r = await both((auth) => [request('GET', '/te-gzip', auth)]);
    expect(r.raw.reads[0]).toMatch(/^HTTP\/1\.1 502 /);
    // node:http reads it to EOF and relays a body whose coding it dropped (TE is hop-by-hop).
    expect(r.node.reads[0]).toMatch(/^HTTP\/1\.1 200 /);
  }, 60_000);

  it('101 to a request that asked no upgrade: raw answers 502 (node answers nothing)', async () => {
    const r = await both((auth) => [request('GET', '/101', auth)]);
    expect(r.raw.reads[0]).toMatch(/^HTTP\/1\.1 502 /);
    // node:http's client hands a 101 to an 'upgrade' listener forward.ts does not have: the
    // customer gets no answer until the idle timeout closes the connection.
    expect(r.node.reads[0]).toBe('');
  }, 60_000);
});

// The same through exits (the gap ADR 0038 left): an upstream-proxy exit, whose "proxy" is a
// byte-exact server like the origin (it answers absolute-form requests itself, so the customer
// sees the exact bytes each client sent it), and source-address exits (loopback 127.0.0.x).
describe('raw upstream client against node:http through exits', () => {
  let proxy: ReturnType<typeof byteServer>;
  let pair: Gateway[];
  const PROXY_AUTH = `Basic ${Buffer.from('up:secret').toString('base64')}`;
  const failures = async (gateway: Gateway) =>
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
        // An address this host does not have (TEST-NET-1): binding it fails.
        { name: 'nl-unbound', sourceAddress: '192.0.2.1', country: 'nl' },
      ],
      { timeouts: { headersSeconds: 2, connectSeconds: 2, idleSeconds: 5, maxLifetimeSeconds: 600 } },
    );
    pair = [
      await startTestGateway(db.pool, db.url, spec, { upstreamClient: 'raw' }),
      await startTestGateway(db.pool, db.url, spec, { upstreamClient: 'node' }),
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
    const abandoned = async (gateway: Gateway) =>
      (await gateway.registry.getSingleMetric('proxyfleet_gateway_refusals_total')!.get()).values
        .filter((v) => v.labels.reason === 'client_abandoned')
        .reduce((n, v) => n + v.value, 0);
    const before = await Promise.all(pair.map(failures));
    const abandonedBefore = await Promise.all(pair.map(abandoned));
    for (const gateway of pair) {
      const account = await accountWithBandwidth(db.pool, { basic: 1_000_000_000 });
      await cacheSynced(db.pool, [gateway]);
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
    const delta = async (count: (g: Gateway) => Promise<number>, then: number[]) =>
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
