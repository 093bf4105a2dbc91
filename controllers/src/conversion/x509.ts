// Just enough X.509 to make the conversion webhook's certificates with node:crypto alone: a
// self-signed CA and a serving certificate it signs, both ECDSA P-256 with SHA-256, DER built by
// hand (RFC 5280). Checked by node's X509Certificate and by the API server itself in the tests.
import { createPrivateKey, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { isIP } from 'node:net';

const tlv = (tag: number, content: Buffer): Buffer => {
  const n = content.length;
  let len: Buffer;
  if (n < 0x80) len = Buffer.of(n);
  else {
    const bytes: number[] = [];
    for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v % 256);
    len = Buffer.from([0x80 | bytes.length, ...bytes]);
  }
  return Buffer.concat([Buffer.of(tag), len, content]);
};
const seq = (...parts: Buffer[]) => tlv(0x30, Buffer.concat(parts));
const set = (...parts: Buffer[]) => tlv(0x31, Buffer.concat(parts));
const octets = (b: Buffer) => tlv(0x04, b);
const bits = (b: Buffer, unused = 0) => tlv(0x03, Buffer.concat([Buffer.of(unused), b]));
const bool = (v: boolean) => tlv(0x01, Buffer.of(v ? 0xff : 0));
const explicit = (n: number, inner: Buffer) => tlv(0xa0 + n, inner);

function oid(dotted: string): Buffer {
  const [a, b, ...rest] = dotted.split('.').map(Number);
  const out = [a! * 40 + b!];
  for (const v of rest) {
    const chunk = [v & 0x7f];
    for (let x = v >>> 7; x > 0; x >>>= 7) chunk.unshift((x & 0x7f) | 0x80);
    out.push(...chunk);
  }
  return tlv(0x06, Buffer.from(out));
}

function integer(b: Buffer): Buffer {
  let i = 0;
  while (i < b.length - 1 && b[i] === 0) i++;
  const v = b.subarray(i);
  return tlv(0x02, v[0]! & 0x80 ? Buffer.concat([Buffer.of(0), v]) : v);
}

/** UTCTime through 2049, GeneralizedTime after (RFC 5280 4.1.2.5). */
function time(d: Date): Buffer {
  const iso = d
    .toISOString()
    .replace(/[-:T]/g, '')
    .replace(/\.\d+Z$/, 'Z'); // YYYYMMDDHHMMSSZ
  return d.getUTCFullYear() < 2050
    ? tlv(0x17, Buffer.from(iso.slice(2), 'ascii'))
    : tlv(0x18, Buffer.from(iso, 'ascii'));
}

const name = (cn: string) => seq(set(seq(oid('2.5.4.3'), tlv(0x0c, Buffer.from(cn, 'utf8')))));
const ECDSA_SHA256 = seq(oid('1.2.840.10045.4.3.2'));
const extension = (id: string, critical: boolean, value: Buffer) =>
  seq(oid(id), ...(critical ? [bool(true)] : []), octets(value));

function ipBytes(ip: string): Buffer {
  if (isIP(ip) === 4) return Buffer.from(ip.split('.').map(Number));
  const [head, tail] = ip.split('::') as [string, string | undefined];
  const groups = (s: string | undefined) => (s ? s.split(':') : []);
  const h = groups(head);
  const t = groups(tail);
  const all = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  return Buffer.concat(all.map((g) => Buffer.of(parseInt(g, 16) >> 8, parseInt(g, 16) & 0xff)));
}

export interface KeyPair {
  /** PEM, PKCS#8. */
  key: string;
  /** PEM certificate. */
  cert: string;
}

export interface CertificateOptions {
  commonName: string;
  notBefore: Date;
  notAfter: Date;
  /** Subject alternative names: DNS names and IP addresses (serving certificates). */
  hosts?: string[];
  /** Absent: self-signed CA. */
  issuer?: KeyPair;
}

const pem = (label: string, der: Buffer) =>
  `-----BEGIN ${label}-----\n${der
    .toString('base64')
    .match(/.{1,64}/g)!
    .join('\n')}\n-----END ${label}-----\n`;

function issuerName(cert: string): Buffer {
  // The issuer's subject as it is encoded in its certificate: TBS -> 6th element (after version).
  const der = Buffer.from(cert.replace(/-----[^-]+-----|\s/g, ''), 'base64');
  const children = (buf: Buffer, at: number): Array<[number, number]> => {
    const out: Array<[number, number]> = [];
    const [start, end] = contentRange(buf, at);
    for (let i = start; i < end;) {
      const [, e] = contentRange(buf, i);
      out.push([i, e]);
      i = e;
    }
    return out;
  };
  const tbs = children(der, 0)[0]!;
  const [subjectStart, subjectEnd] = children(der, tbs[0])[5]!;
  return der.subarray(subjectStart, subjectEnd);
}

/** [content start, element end] of the DER element at `at`. */
function contentRange(buf: Buffer, at: number): [number, number] {
  const first = buf[at + 1]!;
  if (first < 0x80) return [at + 2, at + 2 + first];
  const n = first & 0x7f;
  let len = 0;
  for (let i = 0; i < n; i++) len = len * 256 + buf[at + 2 + i]!;
  return [at + 2 + n, at + 2 + n + len];
}

export function createCertificate(o: CertificateOptions): KeyPair {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  const signer: KeyObject = o.issuer ? createPrivateKey(o.issuer.key) : privateKey;
  const ca = !o.issuer;
  const extensions = [
    extension('2.5.29.19', true, ca ? seq(bool(true)) : seq()),
    // keyCertSign + cRLSign for the CA; digitalSignature for the server.
    extension('2.5.29.15', true, ca ? bits(Buffer.of(0x06), 1) : bits(Buffer.of(0x80), 7)),
  ];
  if (!ca) {
    extensions.push(extension('2.5.29.37', false, seq(oid('1.3.6.1.5.5.7.3.1'))));
    const sans = (o.hosts ?? []).map((h) =>
      isIP(h) ? tlv(0x87, ipBytes(h)) : tlv(0x82, Buffer.from(h, 'ascii')),
    );
    extensions.push(extension('2.5.29.17', false, seq(...sans)));
  }
  const tbs = seq(
    explicit(0, integer(Buffer.of(2))),
    integer(Buffer.concat([Buffer.of(0x01), randomBytes(15)])),
    ECDSA_SHA256,
    o.issuer ? issuerName(o.issuer.cert) : name(o.commonName),
    seq(time(o.notBefore), time(o.notAfter)),
    name(o.commonName),
    spki,
    explicit(3, seq(...extensions)),
  );
  const signature = sign('sha256', tbs, signer);
  return {
    key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    cert: pem('CERTIFICATE', seq(tbs, ECDSA_SHA256, bits(signature))),
  };
}
