import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  buildProxyHeader,
  readProxyHeader,
  signed,
  V1_MAX_LENGTH,
  V2_MAX_LENGTH,
  type HeaderRead,
} from './proxy-header.ts';

const V2_SIG = '0d0a0d0a000d0a515549540a';
const hex = (h: string) => Buffer.from(h.replace(/\s+/g, ''), 'hex');
const text = (t: string) => Buffer.from(t, 'latin1');
const client = { address: '203.0.113.7', port: 51_000 };
const lb = { address: '10.0.0.1', port: 8080 };

describe('readProxyHeader', () => {
  const cases: [string, Buffer, HeaderRead][] = [
    [
      'v1 TCP4',
      text('PROXY TCP4 203.0.113.7 10.0.0.1 51000 8080\r\nGET'),
      { kind: 'header', header: { version: 1, length: 44, source: { ...client, family: 'IPv4' } } },
    ],
    [
      'v1 TCP6',
      text('PROXY TCP6 2001:db8::1 2001:db8::2 1 65535\r\n'),
      {
        kind: 'header',
        header: { version: 1, length: 44, source: { address: '2001:db8::1', port: 1, family: 'IPv6' } },
      },
    ],
    [
      'v1 UNKNOWN',
      text('PROXY UNKNOWN\r\n'),
      { kind: 'header', header: { version: 1, length: 15, source: undefined } },
    ],
    [
      'v1 UNKNOWN with addresses',
      text('PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n'),
      { kind: 'header', header: { version: 1, length: 59, source: undefined } },
    ],
    ['v1 a prefix of the signature', text('PRO'), { kind: 'incomplete' }],
    ['v1 before its CRLF', text('PROXY TCP4 203.0.113.7 10.0.0.1 51000 80'), { kind: 'incomplete' }],
    ['v1 CR without LF yet', text('PROXY TCP4 203.0.113.7 10.0.0.1 51000 80\r'), { kind: 'incomplete' }],
    [
      'v1 CR then not LF',
      text('PROXY TCP4 203.0.113.7 10.0.0.1 51000 80\rX'),
      { kind: 'invalid', fault: 'malformed' },
    ],
    ['v1 no CRLF in 107 bytes', text('PROXY ' + 'A'.repeat(101)), { kind: 'invalid', fault: 'too_long' }],
    [
      'v1 CRLF at byte 108',
      text('PROXY ' + 'A'.repeat(100) + '\r\n'),
      { kind: 'invalid', fault: 'too_long' },
    ],
    [
      'v1 TCP4 with IPv6 addresses',
      text('PROXY TCP4 ::1 ::2 1 2\r\n'),
      { kind: 'invalid', fault: 'family_mismatch' },
    ],
    [
      'v1 TCP6 with IPv4 addresses',
      text('PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n'),
      { kind: 'invalid', fault: 'family_mismatch' },
    ],
    [
      'v1 mixed families',
      text('PROXY TCP4 1.2.3.4 ::1 1 2\r\n'),
      { kind: 'invalid', fault: 'family_mismatch' },
    ],
    [
      'v1 unknown protocol',
      text('PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n'),
      { kind: 'invalid', fault: 'malformed' },
    ],
    [
      'v1 port too large',
      text('PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n'),
      { kind: 'invalid', fault: 'malformed' },
    ],
    [
      'v1 port with a leading zero',
      text('PROXY TCP4 1.2.3.4 5.6.7.8 080 2\r\n'),
      { kind: 'invalid', fault: 'malformed' },
    ],
    ['v1 missing field', text('PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n'), { kind: 'invalid', fault: 'malformed' }],
    ['v1 two spaces', text('PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n'), { kind: 'invalid', fault: 'malformed' }],
    [
      'v1 not an address',
      text('PROXY TCP4 1.2.3.999 5.6.7.8 1 2\r\n'),
      { kind: 'invalid', fault: 'malformed' },
    ],
    [
      'v1 a control byte',
      text('PROXY TCP4 1.2.3.4\t5.6.7.8 1 2\r\n'),
      { kind: 'invalid', fault: 'malformed' },
    ],
    ['lowercase proxy is HTTP, not a header', text('proxy TCP4'), { kind: 'none' }],
    ['an HTTP request', text('CONNECT example.com:443 HTTP/1.1\r\n\r\n'), { kind: 'none' }],
    ['POST shares only its P', text('POST / HTTP/1.1\r\n'), { kind: 'none' }],
    ['SOCKS5', hex('050100'), { kind: 'none' }],
    ['TLS', hex('160301'), { kind: 'none' }],
    [
      'v2 PROXY TCP over IPv4',
      hex(V2_SIG + '21 11 000c cb007107 0a000001 c738 1f90 ff'),
      { kind: 'header', header: { version: 2, length: 28, source: { ...client, family: 'IPv4' } } },
    ],
    [
      'v2 PROXY TCP over IPv6',
      hex(V2_SIG + '21 21 0024 20010db8000000000000000000000001 20010db8000000000000000000000002 0001 0002'),
      {
        kind: 'header',
        header: { version: 2, length: 52, source: { address: '2001:db8::1', port: 1, family: 'IPv6' } },
      },
    ],
    [
      'v2 with TLVs after the addresses',
      hex(V2_SIG + '21 11 0013 cb007107 0a000001 c738 1f90 04 0004 00000000'),
      { kind: 'header', header: { version: 2, length: 35, source: { ...client, family: 'IPv4' } } },
    ],
    [
      'v2 LOCAL',
      hex(V2_SIG + '20 00 0000'),
      { kind: 'header', header: { version: 2, length: 16, source: undefined } },
    ],
    [
      'v2 LOCAL with addresses',
      hex(V2_SIG + '20 11 000c 00000000 00000000 0000 0000'),
      { kind: 'header', header: { version: 2, length: 28, source: undefined } },
    ],
    [
      'v2 PROXY UNSPEC',
      hex(V2_SIG + '21 00 0000'),
      { kind: 'header', header: { version: 2, length: 16, source: undefined } },
    ],
    ['v2 a prefix of the signature', hex('0d0a0d0a00'), { kind: 'incomplete' }],
    ['v2 before its length', hex(V2_SIG + '21 11 00'), { kind: 'incomplete' }],
    ['v2 before its addresses end', hex(V2_SIG + '21 11 000c cb007107 0a00'), { kind: 'incomplete' }],
    ['v2 wrong signature', hex('0d0a0d0a000d0a515549540b 21 11 000c'), { kind: 'none' }],
    ['v2 version 1 in the binary form', hex(V2_SIG + '11 11 000c'), { kind: 'invalid', fault: 'malformed' }],
    ['v2 unknown command', hex(V2_SIG + '22 11 000c'), { kind: 'invalid', fault: 'malformed' }],
    ['v2 unknown family', hex(V2_SIG + '21 41 000c'), { kind: 'invalid', fault: 'malformed' }],
    [
      'v2 over UDP',
      hex(V2_SIG + '21 12 000c cb007107 0a000001 c738 1f90'),
      { kind: 'invalid', fault: 'malformed' },
    ],
    ['v2 declared past the bound', hex(V2_SIG + '21 11 ffff'), { kind: 'invalid', fault: 'too_long' }],
    ['v2 IPv6 in an IPv4 length', hex(V2_SIG + '21 21 000c'), { kind: 'invalid', fault: 'family_mismatch' }],
    [
      'v2 IPv4 in too short a length',
      hex(V2_SIG + '21 11 0004 cb007107'),
      { kind: 'invalid', fault: 'family_mismatch' },
    ],
  ];
  it.each(cases)('%s', (_name, bytes, expected) => {
    expect(readProxyHeader(bytes)).toEqual(expected);
  });

  it('tells a whole signature of either version from a prefix of one', () => {
    expect([text('PROXY '), hex(V2_SIG), text('PROXY'), text('POST /'), hex('0d0a0d0a')].map(signed)).toEqual(
      [true, true, false, false, false],
    );
  });

  it('reads back what it builds, in both versions and families', () => {
    for (const version of [1, 2] as const) {
      const v4 = readProxyHeader(buildProxyHeader(version, client, lb));
      expect(v4).toMatchObject({ kind: 'header', header: { source: { ...client, family: 'IPv4' } } });
      const six = { address: '2001:db8::7', port: 443 };
      const v6 = readProxyHeader(buildProxyHeader(version, six, { address: '::1', port: 1 }));
      expect(v6).toMatchObject({ kind: 'header', header: { source: { ...six, family: 'IPv6' } } });
    }
  });

  it('any bytes: never throws, a header never longer than its bound nor than the bytes', () => {
    const signatureLed = fc.oneof(
      fc.uint8Array({ maxLength: 200 }),
      fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.concat([text('PROXY '), b])),
      fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.concat([hex(V2_SIG), b])),
      fc
        .tuple(fc.constantFrom('TCP4', 'TCP6', 'UNKNOWN'), fc.string({ maxLength: 120 }))
        .map(([p, rest]) => text(`PROXY ${p} ${rest}\r\n`)),
    );
    fc.assert(
      fc.property(signatureLed, (raw) => {
        const bytes = Buffer.from(raw);
        const r = readProxyHeader(bytes);
        if (r.kind === 'header') {
          expect(r.header.length).toBeLessThanOrEqual(bytes.length);
          expect(r.header.length).toBeLessThanOrEqual(r.header.version === 1 ? V1_MAX_LENGTH : V2_MAX_LENGTH);
          // What follows the header does not change it: it was not read.
          const cut = bytes.subarray(0, r.header.length);
          expect(readProxyHeader(cut)).toEqual(r);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('a header split across reads: incomplete at every cut, the same header once whole', () => {
    const headers = fc
      .tuple(
        fc.constantFrom(1 as const, 2 as const),
        fc.oneof(fc.ipV4(), fc.ipV6()),
        fc.integer({ min: 0, max: 65_535 }),
        fc.uint8Array({ maxLength: 40 }),
      )
      .map(([version, address, port, after]) => {
        const dst = address.includes(':') ? { address: '::1', port: 80 } : lb;
        return { header: buildProxyHeader(version, { address, port }, dst), after: Buffer.from(after) };
      });
    fc.assert(
      fc.property(headers, ({ header, after }) => {
        for (let i = 0; i < header.length; i++)
          expect(readProxyHeader(header.subarray(0, i)).kind).toBe('incomplete');
        const whole = readProxyHeader(Buffer.concat([header, after]));
        expect(whole).toMatchObject({ kind: 'header', header: { length: header.length } });
      }),
      { numRuns: 300 },
    );
  });
});
