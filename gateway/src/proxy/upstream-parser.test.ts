// The raw upstream client's response parser in isolation (docs/adr/0038): any chunking of a valid
// body decodes to the same bytes, any split of the input into TCP reads gives the same result,
// and the refusals the differential test (upstream.int.test.ts) checks end to end; and the request
// head the raw client (upstream.ts) writes.
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { parse, split } from '#test/response-parser.ts';
import { requestHead } from './upstream.ts';
import { MAX_HEAD_BYTES, parseHead } from './upstream-head.ts';

const bodyArb = fc.uint8Array({ maxLength: 3000 }).map((a) => Buffer.from(a));
const cutsArb = fc.array(fc.nat(), { maxLength: 40 });
const ext = fc.constantFrom('', ';a', ';a=1', ';b="x y"', ';c;d=2');

/** A chunked encoding of `body`: sizes from `sizes`, random extensions, maybe trailers. */
function chunked(body: Buffer, sizes: number[], exts: string[], trailers: boolean): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  let k = 0;
  while (at < body.length) {
    const n = Math.max(1, Math.min(sizes[k % Math.max(1, sizes.length)] ?? 1, body.length - at));
    const e = exts[k % Math.max(1, exts.length)] ?? '';
    parts.push(Buffer.from(`${k % 2 ? n.toString(16).toUpperCase() : n.toString(16)}${e}\r\n`));
    parts.push(body.subarray(at, at + n), Buffer.from('\r\n'));
    at += n;
    k++;
  }
  parts.push(Buffer.from(`0${exts[0] ?? ''}\r\n${trailers ? 'X-T: 1\r\nY: two\r\n' : ''}\r\n`));
  return Buffer.concat(parts);
}

describe('response parser: properties', () => {
  it('any chunking of a body, read in any split and paused anywhere, decodes to the body', () => {
    fc.assert(
      fc.property(
        bodyArb,
        fc.array(fc.integer({ min: 1, max: 700 }), { minLength: 1, maxLength: 10 }),
        fc.array(ext, { maxLength: 5 }),
        fc.boolean(),
        cutsArb,
        fc.integer({ min: 0, max: 3 }),
        (body, sizes, exts, trailers, cuts, pauseEvery) => {
          const msg = Buffer.concat([
            Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX: y\r\n\r\n'),
            chunked(body, sizes, exts, trailers),
          ]);
          const r = parse(split(msg, cuts), { pauseEvery });
          expect(r.error).toBeUndefined();
          expect(r.complete).toBe(true);
          expect(r.rest).toBe(false);
          expect(r.head?.keepAlive).toBe(true);
          expect(r.body.equals(body)).toBe(true);
        },
      ),
    );
  });

  it('Content-Length and close-delimited bodies: any split gives the same body', () => {
    fc.assert(
      fc.property(bodyArb, cutsArb, fc.boolean(), fc.boolean(), (body, cuts, withLength, interim) => {
        const head = withLength
          ? `HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n`
          : 'HTTP/1.1 200 OK\r\nX: 1\r\n\r\n';
        const msg = Buffer.concat([
          Buffer.from(
            interim ? 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n' : '',
          ),
          Buffer.from(head),
          body,
        ]);
        const r = parse(split(msg, cuts), { eof: !withLength });
        expect(r.error).toBeUndefined();
        expect(r.complete).toBe(true);
        expect(r.head?.statusCode).toBe(200);
        expect(r.head?.keepAlive).toBe(withLength);
        expect(r.body.equals(body)).toBe(true);
      }),
    );
  });

  it('any split of any input gives the same result as one read', () => {
    const pieces = fc.constantFrom(
      'HTTP/1.1 200 OK\r\n',
      'HTTP/1.0 204 No\r\n',
      'Content-Length: 3\r\n',
      'Transfer-Encoding: chunked\r\n',
      '\r\n',
      '\n',
      ' fold\r\n',
      'abc',
      '3\r\nabc\r\n',
      '0\r\n\r\n',
      'zz\r\n',
      'Connection: close\r\n',
      'Bad Name: x\r\n',
    );
    fc.assert(
      fc.property(fc.array(pieces, { maxLength: 12 }), cutsArb, fc.boolean(), (parts, cuts, eof) => {
        const msg = Buffer.from(parts.join(''), 'latin1');
        const whole = parse([msg], { eof });
        const pieced = parse(split(msg, cuts), { eof });
        expect(pieced).toEqual(whole);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('response parser: refusals and framing', () => {
  const one = (text: string, options: { head?: boolean; eof?: boolean } = {}) =>
    parse([Buffer.from(text, 'latin1')], options);

  it.each([
    [
      'CL with TE',
      'HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n',
      'HPE_UNEXPECTED_CONTENT_LENGTH',
    ],
    [
      'two different CLs',
      'HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n',
      'HPE_UNEXPECTED_CONTENT_LENGTH',
    ],
    ['non-numeric CL', 'HTTP/1.1 200 OK\r\nContent-Length: 3x\r\n\r\n', 'HPE_INVALID_CONTENT_LENGTH'],
    ['negative CL', 'HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n', 'HPE_INVALID_CONTENT_LENGTH'],
    [
      'TE not ending in chunked',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n',
      'HPE_INVALID_TRANSFER_ENCODING',
    ],
    ['obs-fold', 'HTTP/1.1 200 OK\r\nX: 1\r\n 2\r\n\r\n', 'HPE_INVALID_HEADER_TOKEN'],
    ['space before the colon', 'HTTP/1.1 200 OK\r\nX : 1\r\n\r\n', 'HPE_INVALID_HEADER_TOKEN'],
    ['control character in a value', 'HTTP/1.1 200 OK\r\nX: a\x01b\r\n\r\n', 'HPE_INVALID_HEADER_TOKEN'],
    ['bare LF', 'HTTP/1.1 200 OK\nX: 1\r\n\r\n', 'HPE_CR_EXPECTED'],
    ['bad status line', 'HTTP/1.1 20 OK\r\n\r\n', 'HPE_INVALID_STATUS'],
    ['HTTP/2 status line', 'HTTP/2.0 200 OK\r\n\r\n', 'HPE_INVALID_STATUS'],
    ['101 without upgrade', 'HTTP/1.1 101 Switching\r\n\r\n', 'HPE_UNEXPECTED_UPGRADE'],
    [
      'bad chunk size',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
      'HPE_INVALID_CHUNK_SIZE',
    ],
    [
      'chunk size with a space',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3 \r\n',
      'HPE_INVALID_CHUNK_SIZE',
    ],
    [
      'huge chunk size',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffff\r\n',
      'HPE_INVALID_CHUNK_SIZE',
    ],
    ['chunk without CRLF', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX', 'HPE_STRICT'],
    [
      'bare LF after a chunk size',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc',
      'HPE_CR_EXPECTED',
    ],
  ])('%s: refused', (_name, text, code) => {
    expect(one(text).error).toBe(code);
  });

  it('a head over 16 KiB is refused, also without its end', () => {
    const long = `HTTP/1.1 200 OK\r\nX: ${'a'.repeat(MAX_HEAD_BYTES)}\r\n\r\n`;
    expect(one(long).error).toBe('HPE_HEADER_OVERFLOW');
    expect(one(long.slice(0, MAX_HEAD_BYTES + 10)).error).toBe('HPE_HEADER_OVERFLOW');
  });

  it('no body for HEAD, 204 and 304, whatever the head says', () => {
    for (const [text, head] of [
      ['HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n', true],
      ['HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n', false],
      ['HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n', false],
    ] as const) {
      const r = one(text, { head });
      expect(r.complete).toBe(true);
      expect(r.body.length).toBe(0);
      expect(r.head?.keepAlive).toBe(true);
    }
  });

  it('keep-alive: HTTP/1.1 unless close; HTTP/1.0 only with keep-alive; bytes after the end are seen', () => {
    expect(one('HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n').head?.keepAlive).toBe(
      false,
    );
    expect(one('HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n').head?.keepAlive).toBe(false);
    expect(
      one('HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n').head?.keepAlive,
    ).toBe(true);
    const extra = one('HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1');
    expect(extra.complete && extra.rest).toBe(true);
    expect(
      one('HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5\r\nContent-Length: 0\r\n\r\n').head?.keepAliveHint,
    ).toBe(5);
  });

  it('an answer cut by EOF is an error; none at all is a hang-up', () => {
    expect(one('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab', { eof: true }).error).toBe(
      'HPE_INVALID_EOF_STATE',
    );
    expect(parse([], { eof: true }).error).toBe('ECONNRESET');
  });

  it('keeps header names and values as sent (OWS trimmed); refuses a repeated Content-Length, even identical', () => {
    const h = parseHead('HTTP/1.1 200 Fine\r\nX-Case:  v a \r\nContent-Length: 2');
    expect(h.rawHeaders).toEqual(['X-Case', 'v a', 'Content-Length', '2']);
    expect(() => parseHead('HTTP/1.1 200 OK\r\nContent-Length: 2\r\ncontent-length: 2')).toThrow(
      'repeated Content-Length',
    );
    expect(h.statusMessage).toBe('Fine');
  });

  it('writes the request head as node:http does for forward.ts', () => {
    expect(requestHead('GET', '/a?b', ['Host', 'x', 'Accept', '*/*'], false)).toBe(
      'GET /a?b HTTP/1.1\r\nHost: x\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n',
    );
    expect(requestHead('POST', '/', ['Host', 'x'], false)).toBe(
      'POST / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
    );
    expect(requestHead('POST', '/', ['Host', 'x', 'Content-Length', '0'], false)).toBe(
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n',
    );
  });
});
