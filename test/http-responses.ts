// fast-check generators of HTTP/1.1 responses for the differential fuzz test of the raw upstream
// client's response parser against llhttp (gateway/src/proxy/upstream-parser.int.test.ts,
// docs/adr/0038): well-formed ones (Content-Length, chunked with extensions and trailers,
// close-delimited, 1xx, 204, 304), noisy ones built from troublesome pieces (duplicate and
// differing Content-Lengths, CL with TE, TE lists, obs-fold, bare LF and CR, spaces before the
// colon, invalid tokens, bad chunk sizes, missing CRLFs, bytes after the end), byte mutations of
// both, and heads within a few bytes of the 16 KiB limit.
import fc from 'fast-check';
import { MAX_HEAD_BYTES } from '../gateway/src/proxy/upstream-head.ts';

export const latin1 = (s: string) => Buffer.from(s, 'latin1');
const pick = <T>(...xs: T[]) => fc.constantFrom(...xs);
/** Every kind of troublesome byte in a head or a chunked framing. */
const ODD = [
  '\x00',
  '\x01',
  '\x0b',
  '\x7f',
  '\x80',
  '\xff',
  '\t',
  ' ',
  '\r',
  '\n',
  '\r\n',
  '"',
  ',',
  ':',
  ';',
  '=',
  '\\',
  '(',
  '/',
  '+',
  '-',
  '0',
  'a',
  'F',
  'é',
];
const oddString = (alphabet: string[], maxLength = 12) =>
  fc.array(fc.constantFrom(...alphabet), { maxLength }).map((a) => a.join(''));

/**
 * A clean choice, or (noisy) sometimes a troublesome one: the clean responses are what most origins
 * send and both parsers must take, the noisy ones the smuggling cases.
 */
const mix = <T>(noisy: boolean, clean: fc.Arbitrary<T>, odd: fc.Arbitrary<T>, weight = 10) =>
  noisy ? fc.oneof({ weight, arbitrary: clean }, { weight: 1, arbitrary: odd }) : clean;

const version = (noisy: boolean) =>
  mix(
    noisy,
    pick('HTTP/1.1', 'HTTP/1.1', 'HTTP/1.0'),
    pick('HTTP/1.2', 'HTTP/2.0', 'http/1.1', 'HTTP/1', 'HTTP/11', '', 'ICY'),
  );
const code = (noisy: boolean) =>
  mix(
    noisy,
    pick('200', '200', '204', '304', '404', '500', '206', '299', '999'),
    fc.oneof(
      pick('100', '101', '102', '103', '199'),
      pick('600', '099', '000', '20', '2000', '0200', ' 200', '2x0', '-20'),
    ),
    5,
  );
const reason = (noisy: boolean) =>
  mix(
    noisy,
    pick(' OK', ' No Content', ' Not Modified', '', ' ', ' a\tb', ' \xe9t\xe9', ' OK ', ' (x)'),
    fc.oneof(pick('  OK', '\tOK', ' \x7f'), oddString([' ', 'O', 'K', ...ODD])),
    6,
  );
const eol = (noisy: boolean) =>
  mix(noisy, fc.constant('\r\n'), pick('\n', '\r', '\r\r\n', '\n\r', '\r\n\r'), 20);
const fieldName = (noisy: boolean) =>
  mix(
    noisy,
    pick(
      'X-A',
      'Set-Cookie',
      'Content-Type',
      'Date',
      'Server',
      'ETag',
      'Connection',
      'connection',
      'Keep-Alive',
      'Upgrade',
      'Trailer',
      "x!#$%&'*+-.^_`|~09",
    ),
    fc.oneof(
      pick(
        'Content-Length',
        'content-length',
        'CONTENT-LENGTH',
        'Transfer-Encoding',
        'transfer-encoding',
        'Content-Length ',
        ' Content-Length',
        'Content-Length\t',
        'Content Length',
        'Content-Lengt',
        'Transfer-Encoding ',
        'Transfer_Encoding',
        '',
      ),
      oddString(["!#$%&'*+-.^_`|~".split(''), 'a', 'Z', '0'].flat()),
      oddString(['a', 'b', ...ODD]),
    ),
    3,
  );
const separator = (noisy: boolean) =>
  mix(noisy, pick(': ', ':', ':  ', ':\t'), pick(' :', ' : ', '\t:', '', '::'));
const lengthValue = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 40 }).map(String) },
  {
    weight: 2,
    arbitrary: pick(
      '00005',
      '+5',
      '-1',
      ' 5',
      '5 ',
      '5\t',
      '5,5',
      '5, 5',
      '5 5',
      '0x5',
      '1e1',
      '5.0',
      '',
      'abc',
      '999999999999999',
      '1000000000000000',
      '18446744073709551616',
      '99999999999999999999999',
      '\xb5',
    ),
  },
);
const teValue = pick(
  'chunked',
  'Chunked',
  'CHUNKED',
  ' chunked ',
  'gzip',
  'gzip, chunked',
  'gzip,chunked',
  'chunked, gzip',
  'chunked, chunked',
  'chunked,',
  ', chunked',
  'identity',
  'chunked;q=1',
  'xchunked',
  'chunk',
  'chunked\t',
  '',
);
const fieldValue = (noisy: boolean) =>
  mix(
    noisy,
    pick(
      '1',
      'close',
      'keep-alive',
      'Keep-Alive',
      'upgrade',
      'timeout=5',
      'text/plain',
      'a=b; c',
      '',
      ' x ',
      '\ta\tb\t',
      '"\xe9\xff"',
      'close, keep-alive',
    ),
    fc.oneof(
      { weight: 2, arbitrary: lengthValue },
      { weight: 1, arbitrary: teValue },
      { weight: 2, arbitrary: oddString(['a', 'B', '1', ' ', '\t', '=', ',', ...ODD], 20) },
    ),
    3,
  );
/** A header line: name, separator, value; sometimes obs-folded. */
const field = (noisy: boolean) =>
  mix(
    noisy,
    fc.tuple(fieldName(noisy), separator(noisy), fieldValue(noisy), eol(noisy)).map((p) => p.join('')),
    fc
      .tuple(fieldName(noisy), fieldValue(noisy), pick(' ', '\t'), fieldValue(noisy))
      .map(([n, v, ws, c]) => `${n}: ${v}\r\n${ws}${c}\r\n`),
    12,
  );
/** The smuggling classics, whole lines. */
const classic = pick(
  'Content-Length: 3\r\nContent-Length: 3\r\n',
  'Content-Length: 3\r\nContent-Length: 4\r\n',
  'Content-Length: 3\r\ncontent-length: 03\r\n',
  'Content-Length: 3, 3\r\n',
  'Content-Length: 3\r\nTransfer-Encoding: chunked\r\n',
  'Transfer-Encoding: chunked\r\nContent-Length: 3\r\n',
  'Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n',
  'Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n',
  'Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n',
  'Transfer-Encoding: chunked\r\n Content-Length: 3\r\n',
  'X: 1\r\n Transfer-Encoding: chunked\r\n',
  'Transfer-Encoding : chunked\r\n',
  'Transfer-Encoding:\x0bchunked\r\n',
  'Transfer-Encoding: \x00chunked\r\n',
  'Content-Length: 3\rX: 1\r\n',
  'Content-Length: 3\nX: 1\r\n',
  'Connection: close\r\n',
  'Connection: keep-alive\r\n',
  'Connection: upgrade\r\nUpgrade: websocket\r\n',
  'Keep-Alive: timeout=5, max=100\r\n',
);

const bytesArb = (maxLength: number) => fc.uint8Array({ maxLength }).map((a) => Buffer.from(a));
/** Body bytes: random, or text that looks like framing (a smuggled response, a last chunk). */
const bodyArb = fc.oneof(
  { weight: 4, arbitrary: bytesArb(300) },
  {
    weight: 2,
    arbitrary: fc
      .array(
        pick(
          'abc',
          '\r\n',
          '0\r\n\r\n',
          'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n',
          '5\r\nhello\r\n',
          '\n',
          'x',
        ),
        { maxLength: 6 },
      )
      .map((p) => latin1(p.join(''))),
  },
);

/** Chunk extensions: llhttp's grammar, and (noisy) looser ones. */
const ext = (noisy: boolean) =>
  mix(
    noisy,
    pick('', '', '', ';a', ';a=1', ';b="x y"', ';c;d=2', ';e="\\"q\\""', ';f=""', ';g="\xe9"', ';A-b.c=x_y~'),
    fc.oneof(
      pick(';', ' ;a', '; a', ';a =1', ';a= 1', ';a=1 ', ';a b', ';a=\xe9', ';a;', ';=1', ';a='),
      fc.tuple(fc.constant(';'), oddString(['a', '=', '"', ...ODD], 6)).map((p) => p.join('')),
    ),
    5,
  );
/** A chunk's size as written: right, or (noisy) sometimes wrong or odd. */
const sizeForm = (noisy: boolean) =>
  mix(
    noisy,
    pick('hex', 'HEX', '00hex'),
    pick('+1', '-1', ' hex', 'hex ', '0xhex', 'ffffffffffffffffff', '1000000000000', '00000000000001', ''),
  );
const afterData = (noisy: boolean) =>
  mix(noisy, fc.constant('\r\n'), pick('', '\n', '\r', 'X\r\n', '\r\r\n', ' \r\n'), 15);
const trailers = (noisy: boolean) =>
  mix(
    noisy,
    pick('', '', '', 'X-T: 1\r\n', 'X-T: 1\r\nY:two\r\n', 'Trailer-Only:\r\n', 'Z:  \xe9 \r\n'),
    pick('X T: 1\r\n', ' X: 1\r\n', 'X: 1\n', 'X: a\x01\r\n', ':x\r\n', 'X\r\n'),
    4,
  );

function chunked(
  body: Buffer,
  sizes: number[],
  exts: string[],
  forms: string[],
  afters: string[],
  trailer: string,
): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  let k = 0;
  const size = (n: number, form: string) =>
    form === 'hex'
      ? n.toString(16)
      : form === 'HEX'
        ? n.toString(16).toUpperCase()
        : form.replace('hex', n.toString(16));
  while (at < body.length) {
    const n = Math.max(1, Math.min(sizes[k % sizes.length]!, body.length - at));
    parts.push(latin1(`${size(n, forms[k % forms.length]!)}${exts[k % exts.length]!}\r\n`));
    parts.push(body.subarray(at, at + n), latin1(afters[k % afters.length]!));
    at += n;
    k++;
  }
  parts.push(latin1(`0${exts[k % exts.length]!}\r\n${trailer}\r\n`));
  return Buffer.concat(parts);
}

/** How the body is framed: the header that says so, and the bytes after the head. */
const framed = (noisy: boolean) =>
  fc.oneof(
    {
      weight: 4,
      arbitrary: fc
        .tuple(
          bodyArb,
          mix(noisy, fc.constant(0), pick(-1, 1, 5), 4),
          pick('', '', '00'),
          pick('Content-Length', 'content-length'),
        )
        .map(([body, delta, zeros, name]) => ({
          field: `${name}: ${zeros}${Math.max(0, body.length + delta)}\r\n`,
          body,
        })),
    },
    {
      weight: 4,
      arbitrary: fc
        .tuple(
          bodyArb,
          fc.array(fc.integer({ min: 1, max: 120 }), { minLength: 1, maxLength: 6 }),
          fc.array(ext(noisy), { minLength: 1, maxLength: 4 }),
          fc.array(sizeForm(noisy), { minLength: 1, maxLength: 4 }),
          fc.array(afterData(noisy), { minLength: 1, maxLength: 4 }),
          trailers(noisy),
          mix(
            noisy,
            pick('chunked', 'Chunked', 'gzip, chunked', 'chunked, chunked'),
            pick('gzip', 'chunked, gzip'),
          ),
        )
        .map(([body, sizes, exts, forms, afters, trailer, te]) => ({
          field: `Transfer-Encoding: ${te}\r\n`,
          body: chunked(body, sizes, exts, forms, afters, trailer),
        })),
    },
    // close-delimited
    { weight: 2, arbitrary: bodyArb.map((body) => ({ field: '', body })) },
  );

const interim = (noisy: boolean) =>
  fc.oneof(
    { weight: 8, arbitrary: fc.constant('') },
    {
      weight: 1,
      arbitrary: mix(
        noisy,
        pick(
          'HTTP/1.1 100 Continue\r\n\r\n',
          'HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n',
          'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n',
          'HTTP/1.1 100 Continue\r\nContent-Length: 3\r\n\r\n',
        ),
        pick(
          'HTTP/1.1 101 Switching Protocols\r\n\r\n',
          'HTTP/1.1 100 Continue\r\n',
          'HTTP/1.1 100\n\n',
          'HTTP/1.0 103 Early Hints\r\n\r\n',
          'HTTP/1.1 100 Continue\r\nConnection: close\r\n\r\n',
        ),
        3,
      ),
    },
  );
/** Bytes after the response: none, or (noisy) some. */
const after = (noisy: boolean) =>
  mix(noisy, fc.constant(''), pick('x', '\r\n', 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n', '0\r\n\r\n'));

/** A response: interim heads, status line, fields with the framing one, body, maybe bytes after it. */
const responseArb = (noisy: boolean) =>
  fc
    .tuple(
      interim(noisy),
      version(noisy),
      code(noisy),
      reason(noisy),
      eol(noisy),
      fc.array(field(noisy), { maxLength: 4 }),
      noisy ? fc.option(classic, { freq: 4 }) : fc.constant(null),
      fc.nat(),
      framed(noisy),
      eol(noisy),
      after(noisy),
    )
    .map(([pre, v, c, r, e1, fields, smuggle, at, { field: framing, body }, e2, tail]) => {
      const lines = [...fields];
      if (framing) lines.splice(at % (lines.length + 1), 0, framing);
      if (smuggle !== null) lines.splice((at >> 3) % (lines.length + 1), 0, smuggle);
      return Buffer.concat([latin1(`${pre}${v} ${c}${r}${e1}${lines.join('')}${e2}`), body, latin1(tail)]);
    });
export const clean = responseArb(false);
export const noisy = responseArb(true);

/** A byte of trouble put anywhere: inserted, replacing one, or one removed; or the input cut. */
const mutation = fc.oneof(
  fc.record({ op: pick('insert', 'replace'), at: fc.nat(), byte: fc.constantFrom(...ODD) }),
  fc.record({ op: pick('delete', 'cut'), at: fc.nat(), byte: fc.constant('') }),
);
function mutate(bytes: Buffer, ms: { op: string; at: number; byte: string }[]): Buffer {
  let b = bytes;
  for (const { op, at, byte } of ms) {
    const i = at % (b.length + 1);
    const tail = op === 'insert' ? b.subarray(i) : b.subarray(i + 1);
    if (op === 'cut') b = b.subarray(0, i);
    else b = Buffer.concat([b.subarray(0, i), latin1(op === 'delete' ? '' : byte), tail]);
  }
  return b;
}

export const mutated = fc
  .tuple(fc.oneof(clean, noisy), fc.array(mutation, { minLength: 1, maxLength: 3 }))
  .map(([bytes, ms]) => mutate(bytes, ms));

/** Heads near the 16 KiB limit: one big field sized to end a few bytes either side of it. */
export const longHead = fc
  .tuple(
    fc.integer({ min: -40, max: 40 }),
    pick('X-Big', 'Set-Cookie'),
    fc.array(field(true), { maxLength: 2 }),
    framed(false),
    fc.boolean(),
  )
  .map(([delta, name, fields, { field: framing, body }, bareLf]) => {
    const start = `HTTP/1.1 200 OK\r\n${fields.join('')}${framing}${name}: `;
    const size = Math.max(0, MAX_HEAD_BYTES - start.length - 4 + delta);
    const value = bareLf ? `${'a'.repeat(size >> 1)}\n${'a'.repeat(size - (size >> 1))}` : 'a'.repeat(size);
    return Buffer.concat([latin1(`${start}${value}\r\n\r\n`), body]);
  });

export const caseOf = (bytes: fc.Arbitrary<Buffer>) =>
  fc.record({
    bytes,
    head: fc.boolean().chain((b) => (b ? fc.boolean() : fc.constant(false))),
    cuts: fc.array(fc.nat(), { maxLength: 30 }),
    pauseEvery: fc.integer({ min: 0, max: 3 }),
  });
