// The differential test of the raw upstream client against node:http's (docs/adr/0038;
// gateway/src/proxy/upstream.int.test.ts and upstream-exits.int.test.ts): a raw TCP origin that
// answers each path with exact bytes (split as it likes), and the driver that sends the same
// requests through a gateway with each client, reading what the customer got and what was billed.
import net from 'node:net';
import type { Pool } from '#common/db/pool.ts';
import { accountWithBandwidth } from './fixtures.ts';
import { cacheSynced, type TestGateway } from './gateway/fixture.ts';
import { basicAuth } from './gateway/client.ts';
import { usageAfterClose } from './gateway/usage.ts';

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
export function byteServer(): net.Server & { sockets: Set<net.Socket>; received: Map<string, number> } {
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

export type ByteServer = ReturnType<typeof byteServer>;

/** Sends `request` on a fresh connection and reads until the gateway closes it (Date blanked). */
async function send(
  gateway: TestGateway,
  request: string | Buffer,
): Promise<{ read: string; written: number }> {
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
 * The same requests through each gateway of `pair` (raw client first, node:http's second), each
 * with its own account whose password gets `suffix` (targeting, e.g. `_country-fr`): what the
 * customer read on each connection (Date blanked), and the usage billed.
 */
export async function compareClients(
  pool: Pool,
  pair: TestGateway[],
  requests: (auth: string) => (string | Buffer)[],
  suffix = '',
) {
  const out = [];
  for (const gateway of pair) {
    const account = await accountWithBandwidth(pool, { basic: 1_000_000_000 });
    await cacheSynced(pool, [gateway]);
    const auth = basicAuth(account.proxyUsername, account.proxyPassword + suffix);
    const reads: string[] = [];
    let written = 0;
    for (const r of requests(auth)) {
      const x = await send(gateway, r);
      reads.push(x.read);
      written += x.written;
    }
    const usage = await usageAfterClose(gateway, pool, account.id, written);
    out.push({
      reads,
      usage: { up: Number(usage.up), down: Number(usage.down), requests: Number(usage.requests) },
    });
  }
  return { raw: out[0]!, node: out[1]! };
}

/**
 * An absolute-form request to the origin on `originPort()` (or another host on that port) with
 * `Connection: close`, its extra header lines and body.
 */
export function requester(originPort: () => number) {
  return (
    method: string,
    path: string,
    auth: string,
    extra = '',
    body: string | Buffer = '',
    host = '127.0.0.1',
  ) =>
    Buffer.concat([
      Buffer.from(
        `${method} http://${host}:${originPort()}${path} HTTP/1.1\r\nHost: ${host}:${originPort()}\r\n` +
          `Proxy-Authorization: ${auth}\r\nConnection: close\r\n${extra}\r\n`,
        'latin1',
      ),
      Buffer.from(body),
    ]);
}
