// The raw upstream client against node:http's (docs/adr/0038): the same requests through two
// gateways over one database, one with the raw client and one with node:http's (the oracle,
// test/node-upstream.ts), to a raw TCP origin that answers each path with exact bytes (split as it
// likes; test/byte-origin.ts). Each case must give the customer the same bytes (status, headers,
// body, framing; Date blanked), show the origin the same request bytes, and bill the same usage.
// The same through exits: upstream-exits.int.test.ts.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import net from 'node:net';
import { byteServer, compareClients, requester, type ByteServer } from '#test/byte-origin.ts';
import { gatewaySpec, useTestGateway, type TestGateway } from '#test/gateway/fixture.ts';

let raw: TestGateway;
let node: TestGateway;
let origin: ByteServer;
let originPort: number;

const fx = useTestGateway({ gateway: false });

beforeAll(async () => {
  origin = byteServer();
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  originPort = (origin.address() as net.AddressInfo).port;
  const spec = gatewaySpec('basic', undefined, {
    timeouts: { headersSeconds: 2, connectSeconds: 2, idleSeconds: 5, maxLifetimeSeconds: 600 },
  });
  raw = await fx.start(spec, { upstreamClient: 'raw' });
  node = await fx.start(spec, { upstreamClient: 'node' });
}, 30_000);

afterAll(() => {
  origin?.close();
});

const both = (requests: (auth: string) => (string | Buffer)[]) =>
  compareClients(fx.db.pool, [raw, node], requests);

const request = requester(() => originPort);

/** A chunked answer as its head, its decoded body and what follows the last chunk. */
/** The chunk-size lines and CRLFs of a chunked answer: its bytes that are neither head nor data. */
function framing(read: string): number {
  const { head, body, rest } = dechunked(read);
  return Buffer.byteLength(read) - Buffer.byteLength(head + body + rest);
}

function dechunked(read: string): { head: string; body: string; rest: string } {
  const headEnd = read.indexOf('\r\n\r\n') + 4;
  let body = '';
  let at = headEnd;
  for (;;) {
    const eol = read.indexOf('\r\n', at);
    if (eol < 0) return { head: read.slice(0, headEnd), body, rest: read.slice(at) };
    const size = parseInt(read.slice(at, eol), 16);
    if (!size) return { head: read.slice(0, headEnd), body, rest: read.slice(eol + 2) };
    body += read.slice(eol + 2, eol + 2 + size);
    at = eol + 2 + size + 2;
  }
}

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
        if (path === '/chunked-split') {
          // Written byte by byte, the body reaches each client in as many reads as TCP makes of it
          // (timing), and both re-chunk per read: compared decoded, the head exactly.
          expect(r.raw.reads.map(dechunked)).toEqual(r.node.reads.map(dechunked));
          // Each client is billed what it was sent, its own chunk framing included: equal without
          // the framing (a CI run billed 198 B down on one side, 133 on the other, the same body).
          const unframed = (side: typeof r.raw) => ({
            ...side.usage,
            down: side.usage.down - side.reads.map(framing).reduce((a, b) => a + b, 0),
          });
          expect(unframed(r.raw)).toEqual(unframed(r.node));
        } else {
          expect(r.raw.reads).toEqual(r.node.reads);
          expect(r.raw.usage).toEqual(r.node.usage);
        }
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
