// The raw upstream client against node:http's (docs/adr/0038): the same requests through two
// gateways over one database, one with PROXYFLEET_GATEWAY_UPSTREAM_CLIENT=raw and one with node,
// to a raw TCP origin that answers each path with exact bytes (split as it likes). Each case must
// give the customer the same bytes (status, headers, body, framing; Date blanked), show the origin
// the same request bytes, and bill the same usage.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import net from 'node:net';
import { createTestDatabase, type TestDatabase } from '../../../test/db.ts';
import { accountWithBandwidth } from '../../../test/fixtures.ts';
import {
  basicAuth,
  cacheSynced,
  gatewaySpec,
  startTestGateway,
  usageAfterClose,
} from '../testing/harness.ts';

type Gateway = Awaited<ReturnType<typeof startTestGateway>>;

let db: TestDatabase;
let raw: Gateway;
let node: Gateway;
let origin: net.Server;
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
const answers: Record<string, (req: Buffer, nth: number) => Answer | 'close'> = {
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
  '/echo': (req) => ({
    pieces: [`HTTP/1.1 200 OK\r\nContent-Length: ${req.length}\r\n\r\n`, req],
  }),
  // The second request on a kept-alive connection finds it closed: a stale pooled socket.
  '/stale': (_req, nth) =>
    nth > 1 ? 'close' : { pieces: ['HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfresh'] },
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

beforeAll(async () => {
  db = await createTestDatabase();
  origin = net.createServer((socket) => {
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
        const answer = answers[path]!(req, ++nth);
        busy = busy.then(() => (answer === 'close' ? void socket.destroy() : write(socket, answer)));
      }
    });
  });
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

/** The same requests through both gateways, each with its own account: answers and usage. */
async function both(requests: (auth: string) => (string | Buffer)[]) {
  const out = [];
  for (const gateway of [raw, node]) {
    const account = await accountWithBandwidth(db.pool, { basic: 1_000_000_000 });
    await cacheSynced(db.pool, [gateway]);
    const auth = basicAuth(account.proxyUsername, account.proxyPassword);
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

const request = (method: string, path: string, auth: string, extra = '', body: string | Buffer = '') =>
  Buffer.concat([
    Buffer.from(
      `${method} http://127.0.0.1:${originPort}${path} HTTP/1.1\r\nHost: 127.0.0.1:${originPort}\r\n` +
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
      20_000,
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
  }, 20_000);

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
  }, 20_000);

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
  }, 20_000);

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
  }, 20_000);

  it('a stale pooled socket (closed by the origin at the next request): sent again', async () => {
    const r = await both((auth) => [request('GET', '/stale', auth), request('GET', '/stale', auth)]);
    expect(r.raw.reads).toEqual(r.node.reads);
    expect(r.raw.reads[1]).toMatch(/^HTTP\/1\.1 200 OK[^]*fresh$/);
    expect(r.raw.usage).toEqual(r.node.usage);
  }, 20_000);

  // Where the two legitimately differ.
  it('Transfer-Encoding not ending in chunked: raw refuses it (node relays it close-delimited)', async () => {
    const r = await both((auth) => [request('GET', '/te-gzip', auth)]);
    expect(r.raw.reads[0]).toMatch(/^HTTP\/1\.1 502 /);
    // node:http reads it to EOF and relays a body whose coding it dropped (TE is hop-by-hop).
    expect(r.node.reads[0]).toMatch(/^HTTP\/1\.1 200 /);
  }, 20_000);

  it('101 to a request that asked no upgrade: raw answers 502 (node answers nothing)', async () => {
    const r = await both((auth) => [request('GET', '/101', auth)]);
    expect(r.raw.reads[0]).toMatch(/^HTTP\/1\.1 502 /);
    // node:http's client hands a 101 to an 'upgrade' listener forward.ts does not have: the
    // customer gets no answer until the idle timeout closes the connection.
    expect(r.node.reads[0]).toBe('');
  }, 20_000);
});
