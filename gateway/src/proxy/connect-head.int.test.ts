// Differential fuzz test of the front end's CONNECT head parser against llhttp (docs/adr/0027):
// generated heads, well-formed and mutated (the smuggling cases of hardening.int.test.ts and
// protection.int.test.ts among them: duplicate Content-Length, obs-fold, bare LF and CR, spaces
// before the colon, invalid tokens, huge heads), are given to both. Whatever the parser accepts,
// llhttp must accept as the same CONNECT (target, Proxy-Authorization, where the tunnel's data
// starts); whatever it waits on, llhttp must not have judged either. What the parser declines,
// node:http parses in the gateway, so llhttp's answer stays the answer. The oracle is a real
// node:http server with the gateway's parser settings, one connection per head.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import http from 'node:http';
import net from 'node:net';
import { DECLINE, INCOMPLETE, MAX_HEAD_BYTES, parseConnectHead } from './connect-head.ts';

type Verdict =
  | { kind: 'connect'; target: string; proxyAuthorization: string | undefined; rest: number }
  | { kind: 'request' }
  | { kind: 'error'; code: string };

let server: http.Server;
let port: number;
const pending = new Map<number, (v: Verdict) => void>();

beforeAll(async () => {
  // The gateway's server sets no parser options (default maxHeaderSize, strict llhttp).
  server = http.createServer();
  // Each client connects from its own port: the server-side socket's remotePort names the verdict.
  const settle = (socket: net.Socket, v: Verdict) => {
    pending.get(socket.remotePort!)?.(v);
    socket.destroy();
  };
  server.on('connect', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) =>
    settle(socket, {
      kind: 'connect',
      target: req.url!,
      proxyAuthorization: req.headers['proxy-authorization'],
      rest: head.length,
    }),
  );
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    settle(req.socket, { kind: 'request' });
    res.destroy();
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: net.Socket) =>
    settle(socket, { kind: 'error', code: err.code ?? 'unknown' }),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as net.AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

/** llhttp's verdict on `bytes`, sent in one write followed by the client's FIN. */
function llhttp(bytes: Buffer): Promise<Verdict> {
  return new Promise((resolve, reject) => {
    const client = net.connect({ port, host: '127.0.0.1' });
    const timer = setTimeout(
      () => reject(new Error(`no verdict for ${JSON.stringify(bytes.toString('latin1'))}`)),
      5_000,
    );
    client.on('error', () => undefined);
    client.once('connect', () => {
      pending.set(client.localPort!, (v) => {
        clearTimeout(timer);
        pending.delete(client.localPort!);
        client.destroy();
        resolve(v);
      });
      client.end(bytes);
    });
  });
}

/** The property: the parser's judgement of `bytes` agrees with llhttp's. Returns the parser's. */
async function agree(bytes: Buffer): Promise<'accepted' | 'incomplete' | 'declined'> {
  const mine = parseConnectHead(bytes);
  if (mine === DECLINE) return 'declined';
  // No byte at all: node:http, told the input ended, just ends its side too; so does the front end.
  if (bytes.length === 0) return 'incomplete';
  const theirs = await llhttp(bytes);
  if (mine === INCOMPLETE) {
    // All bytes fit a head not yet ended: llhttp, told the input ended, must say just that.
    expect(theirs).toEqual({ kind: 'error', code: 'HPE_INVALID_EOF_STATE' });
    return 'incomplete';
  }
  expect(theirs).toEqual({
    kind: 'connect',
    target: mine.target,
    proxyAuthorization: mine.proxyAuthorization,
    rest: bytes.length - mine.length,
  });
  return 'accepted';
}

const latin1 = (s: string) => Buffer.from(s, 'latin1');

// ---- generators --------------------------------------------------------------------------------

const pick = <T>(...xs: T[]) => fc.constantFrom(...xs);
const ODD = [
  '\x00',
  '\x01',
  '\x7f',
  '\x80',
  '\xff',
  '\t',
  ' ',
  '\r',
  '\n',
  '"',
  '(',
  ',',
  '/',
  '?',
  '#',
  '@',
  '\\',
  'é',
];
/** Strings over a small alphabet with every kind of troublesome byte in it. */
const oddString = (alphabet: string[], maxLength = 12) =>
  fc.array(fc.constantFrom(...alphabet), { maxLength }).map((a) => a.join(''));
const hosts = pick(
  '127.0.0.1',
  'example.com',
  'a',
  '[::1]',
  '[2001:db8::1]',
  'xn--bcher-kva.example',
  'a.b-c_d~e',
);
const authority = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(hosts, fc.integer({ min: 0, max: 70000 })).map(([h, p]) => `${h}:${p}`) },
  { weight: 1, arbitrary: hosts },
  { weight: 2, arbitrary: oddString(['a', '1', ':', '.', '[', ']', '%', '-', ...ODD]) },
  { weight: 1, arbitrary: pick('*', '/', '/a', 'http://a:1/', 'a:1?x', 'a:1#x', 'u@a:1', '') },
);
const method = fc.oneof(
  { weight: 8, arbitrary: fc.constant('CONNECT') },
  { weight: 1, arbitrary: pick('connect', 'CONNECTX', 'GET', 'CONNEC', 'C', 'PRI') },
);
const space = fc.oneof(
  { weight: 8, arbitrary: fc.constant(' ') },
  { weight: 1, arbitrary: pick('  ', '\t', '', ' \t') },
);
const version = fc.oneof(
  { weight: 6, arbitrary: pick('HTTP/1.1', 'HTTP/1.0') },
  {
    weight: 1,
    arbitrary: pick(
      'HTTP/0.9',
      'HTTP/2.0',
      'HTTP/1.2',
      'http/1.1',
      'HTTP/1.1 ',
      'HTTP/1',
      'HTTP/11',
      '',
      'ICE/1.0',
    ),
  },
);
const eol = fc.oneof(
  { weight: 10, arbitrary: fc.constant('\r\n') },
  { weight: 1, arbitrary: pick('\n', '\r', '\r\r\n', '\n\r') },
);
const fieldName = fc.oneof(
  {
    weight: 4,
    arbitrary: pick(
      'Host',
      'Proxy-Authorization',
      'proxy-authorization',
      'PROXY-AUTHORIZATION',
      'User-Agent',
      'X-A',
      'Connection',
      'Upgrade',
      'Proxy-Connection',
    ),
  },
  { weight: 2, arbitrary: pick('Content-Length', 'content-length', 'Transfer-Encoding') },
  {
    weight: 2,
    arbitrary: oddString([
      '!',
      '#',
      '$',
      '%',
      '&',
      "'",
      '*',
      '+',
      '-',
      '.',
      '^',
      '_',
      '`',
      '|',
      '~',
      'a',
      'Z',
      '0',
    ]),
  },
  { weight: 1, arbitrary: oddString(['a', 'b', ...ODD, ':', ' ']) },
);
const separator = fc.oneof(
  { weight: 6, arbitrary: pick(': ', ':') },
  { weight: 1, arbitrary: pick(' :', ':\t', ' : ', ':  ', '\t:', '') },
);
const fieldValue = fc.oneof(
  {
    weight: 3,
    arbitrary: pick('Basic dXNlcjpwYXNz', '127.0.0.1:80', '1', '0', 'chunked', 'close', 'keep-alive'),
  },
  { weight: 2, arbitrary: oddString(['a', 'B', '1', ' ', '\t', '=', ',', ...ODD], 20) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(pick(' ', '\t', '  '), pick('Basic x', 'a'), pick(' ', '\t', '  ', ''))
      .map((p) => p.join('')),
  },
);
const field = fc.oneof(
  { weight: 10, arbitrary: fc.tuple(fieldName, separator, fieldValue, eol).map((p) => p.join('')) },
  // obs-fold: a continuation line
  {
    weight: 1,
    arbitrary: fc
      .tuple(fieldName, fieldValue, pick(' ', '\t'), fieldValue)
      .map(([n, v, ws, c]) => `${n}: ${v}\r\n${ws}${c}\r\n`),
  },
);
/** A whole head, mostly well-formed, with a mutation here and there, and maybe tunnel data after it. */
const head = fc
  .tuple(
    method,
    space,
    authority,
    space,
    version,
    eol,
    fc.array(field, { maxLength: 6 }),
    eol,
    pick('', 'x', '\x16\x03\x01\x00', 'GET / HTTP/1.1\r\n\r\n'),
  )
  .map((parts) => latin1(parts.join('')));
/** Only the plain form: the fast path must take every one of these. */
const plainHead = fc
  .tuple(
    fc.tuple(hosts, fc.integer({ min: 1, max: 65535 })).map(([h, p]) => `${h}:${p}`),
    pick('HTTP/1.1', 'HTTP/1.0'),
    fc.array(
      fc.tuple(
        pick('Host', 'Proxy-Authorization', 'User-Agent', 'X-Forwarded-For', 'Proxy-Connection'),
        pick(': ', ':'),
        pick('x', 'Basic dXNlcjpwYXNz', 'curl/8.5.0', 'Keep-Alive', ' a\t', '\xe9'),
      ),
      { maxLength: 5 },
    ),
  )
  .map(([target, v, fields]) =>
    latin1(`CONNECT ${target} ${v}\r\n${fields.map((f) => `${f.join('')}\r\n`).join('')}\r\n`),
  );

describe('CONNECT head parser against llhttp', () => {
  it('agrees with llhttp on generated and mutated heads', async () => {
    const seen = { accepted: 0, incomplete: 0, declined: 0 };
    await fc.assert(
      fc.asyncProperty(head, async (bytes) => {
        seen[await agree(bytes)]++;
      }),
      { numRuns: 2_000 },
    );
    // The generator must exercise every outcome, or the test proves little.
    expect(seen.accepted).toBeGreaterThan(20);
    expect(seen.declined).toBeGreaterThan(100);
  }, 120_000);

  it('agrees on every prefix of a head (a head arriving in pieces)', async () => {
    await fc.assert(
      fc.asyncProperty(head, fc.nat(), async (bytes, cut) => {
        await agree(bytes.subarray(0, cut % (bytes.length + 1)));
      }),
      { numRuns: 1_000 },
    );
  }, 120_000);

  it('takes every plain CONNECT head on the fast path, as llhttp reads it', async () => {
    await fc.assert(
      fc.asyncProperty(plainHead, async (bytes) => {
        expect(await agree(bytes)).toBe('accepted');
      }),
      { numRuns: 200 },
    );
  }, 60_000);

  it('declines the smuggling cases and huge heads, which llhttp refuses', async () => {
    const cases: [string, string][] = [
      ['duplicate Content-Length', 'CONNECT a:1 HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n'],
      [
        'Content-Length with Transfer-Encoding',
        'CONNECT a:1 HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n',
      ],
      ['obs-fold', 'CONNECT a:1 HTTP/1.1\r\nX: a\r\n b\r\n\r\n'],
      ['bare LF', 'CONNECT a:1 HTTP/1.1\nHost: a\n\n'],
      ['bare LF after a field', 'CONNECT a:1 HTTP/1.1\r\nHost: a\n\r\n'],
      ['bare CR in a value', 'CONNECT a:1 HTTP/1.1\r\nX: a\rb\r\n\r\n'],
      ['space before the colon', 'CONNECT a:1 HTTP/1.1\r\nHost : a\r\n\r\n'],
      ['invalid token', 'CONNECT a:1 HTTP/1.1\r\nX(: a\r\n\r\n'],
      ['NUL in a value', 'CONNECT a:1 HTTP/1.1\r\nX: a\x00b\r\n\r\n'],
      ['control character in the target', 'CONNECT a\x01:1 HTTP/1.1\r\n\r\n'],
      ['garbage method', 'GARBAGE\x01 / HTTP/1.1\r\n\r\n'],
      ['huge head', `CONNECT a:1 HTTP/1.1\r\nX-Big: ${'a'.repeat(40_000)}\r\n\r\n`],
      [
        'head just past the fast path limit',
        `CONNECT a:1 HTTP/1.1\r\nX-Big: ${'a'.repeat(MAX_HEAD_BYTES)}\r\n\r\n`,
      ],
    ];
    for (const [name, text] of cases) {
      const bytes = latin1(text);
      expect([name, parseConnectHead(bytes)]).toEqual([name, DECLINE]);
      const verdict = await llhttp(bytes);
      // (the 8 KiB head is declined by the fast path and accepted by llhttp: node:http takes it)
      if (name !== 'head just past the fast path limit')
        expect([name, verdict.kind]).toEqual([name, 'error']);
    }
  }, 30_000);
});
