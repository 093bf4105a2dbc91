// The PROXY protocol header (HAProxy's proxy-protocol.txt, versions 1 and 2) at the start of a
// connection from a load balancer: the client's own address, which the TCP peer (the balancer) is
// not. A pure reader of bytes as they arrive: it says whether the bytes so far begin no header, a
// header still incomplete, a whole header (and its length, so the rest is the client's), or a
// malformed one. It never reads past the header's end and never throws (docs/adr/0102).
import net from 'node:net';
import { addressBytes } from '#common/ip-allowlist.ts';

/** "PROXY " then the protocol: the text form (version 1). */
const V1_SIGNATURE = Buffer.from('PROXY ', 'latin1');
/** The binary form's 12 bytes (version 2). */
const V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
/** The longest text header, CRLF included (the specification's worst case, TCP6 with 5-digit ports). */
export const V1_MAX_LENGTH = 107;
/**
 * The longest binary header accepted: 16 bytes of fixed part and up to 2032 of addresses and TLVs
 * (an IPv6 pair is 36; the TLVs that balancers add, AWS's VPC endpoint or a unique id, fit well
 * under it). A longer declared length is refused at once, without waiting for its bytes.
 */
export const V2_MAX_LENGTH = 2048;

export interface ProxySource {
  address: string;
  port: number;
  family: 'IPv4' | 'IPv6';
}

export interface ProxyHeader {
  version: 1 | 2;
  /** Bytes of the header; what follows is the client's. */
  length: number;
  /** The client's address; undefined for LOCAL (v2) and UNKNOWN (v1): the peer's own address holds. */
  source: ProxySource | undefined;
}

/** Why a header is refused (a label of proxyfleet_gateway_proxy_protocol_refusals_total). */
export type HeaderFault = 'malformed' | 'too_long' | 'family_mismatch';

export type HeaderRead =
  | { kind: 'none' }
  | { kind: 'incomplete' }
  | { kind: 'header'; header: ProxyHeader }
  | { kind: 'invalid'; fault: HeaderFault };

const NONE: HeaderRead = { kind: 'none' };
const INCOMPLETE: HeaderRead = { kind: 'incomplete' };
const invalid = (fault: HeaderFault): HeaderRead => ({ kind: 'invalid', fault });

/** Whether `bytes` and `signature` agree on their common length (0: none, 1: a prefix, 2: all of it). */
function against(bytes: Buffer, signature: Buffer): 0 | 1 | 2 {
  const n = Math.min(bytes.length, signature.length);
  for (let i = 0; i < n; i++) if (bytes[i] !== signature[i]) return 0;
  return n === signature.length ? 2 : 1;
}

/** Whether `bytes` begin with a whole signature of either version (no need to read on to know). */
export function signed(bytes: Buffer): boolean {
  return against(bytes, V1_SIGNATURE) === 2 || against(bytes, V2_SIGNATURE) === 2;
}

/** Reads the header at the start of `bytes` (the connection's first bytes, possibly only some). */
export function readProxyHeader(bytes: Buffer): HeaderRead {
  if (bytes.length === 0) return INCOMPLETE;
  const v1 = against(bytes, V1_SIGNATURE);
  if (v1 === 1) return INCOMPLETE;
  if (v1 === 2) return readV1(bytes);
  const v2 = against(bytes, V2_SIGNATURE);
  if (v2 === 1) return INCOMPLETE;
  if (v2 === 2) return readV2(bytes);
  return NONE;
}

const DECIMAL_PORT = /^(0|[1-9][0-9]{0,4})$/;

function port(text: string): number | undefined {
  if (!DECIMAL_PORT.test(text)) return undefined;
  const n = Number(text);
  return n <= 65_535 ? n : undefined;
}

function readV1(bytes: Buffer): HeaderRead {
  const window = bytes.subarray(0, V1_MAX_LENGTH);
  const cr = window.indexOf(0x0d);
  if (cr < 0) return window.length >= V1_MAX_LENGTH ? invalid('too_long') : INCOMPLETE;
  if (cr + 1 >= V1_MAX_LENGTH) return invalid('too_long');
  if (cr + 1 >= bytes.length) return INCOMPLETE;
  if (bytes[cr + 1] !== 0x0a) return invalid('malformed');
  const length = cr + 2;
  const line = bytes.subarray(V1_SIGNATURE.length, cr);
  // Printable US-ASCII only (the specification's alphabet); anything else is not a header.
  for (const b of line) if (b < 0x20 || b > 0x7e) return invalid('malformed');
  const fields = line.toString('latin1').split(' ');
  if (fields[0] === 'UNKNOWN') return { kind: 'header', header: { version: 1, length, source: undefined } };
  if (fields.length !== 5) return invalid('malformed');
  const [proto, src, dst, sport, dport] = fields as [string, string, string, string, string];
  const family = proto === 'TCP4' ? 4 : proto === 'TCP6' ? 6 : 0;
  if (family === 0) return invalid('malformed');
  const srcFamily = net.isIP(src);
  const dstFamily = net.isIP(dst);
  if (srcFamily === 0 || dstFamily === 0) return invalid('malformed');
  if (srcFamily !== family || dstFamily !== family) return invalid('family_mismatch');
  const p = port(sport);
  if (p === undefined || port(dport) === undefined) return invalid('malformed');
  const source: ProxySource = { address: src, port: p, family: family === 4 ? 'IPv4' : 'IPv6' };
  return { kind: 'header', header: { version: 1, length, source } };
}

/** Address block sizes of the binary form: AF_INET and AF_INET6 (two addresses, two ports). */
const INET_LENGTH = 12;
const INET6_LENGTH = 36;

function readV2(bytes: Buffer): HeaderRead {
  if (bytes.length < 16) return INCOMPLETE;
  const verCmd = bytes[12]!;
  if (verCmd >> 4 !== 2) return invalid('malformed');
  const command = verCmd & 0x0f;
  if (command > 1) return invalid('malformed');
  const famProto = bytes[13]!;
  const family = famProto >> 4;
  const transport = famProto & 0x0f;
  if (family > 3 || transport > 2) return invalid('malformed');
  const length = 16 + bytes.readUInt16BE(14);
  if (length > V2_MAX_LENGTH) return invalid('too_long');
  // Judged before the bytes arrive: a declared length too short for its family is wrong already.
  const need = family === 1 ? INET_LENGTH : family === 2 ? INET6_LENGTH : 0;
  if (command === 1 && length - 16 < need) return invalid('family_mismatch');
  if (bytes.length < length) return INCOMPLETE;
  // LOCAL (a balancer's own health check), and PROXY for an unspecified family or a UNIX socket:
  // no client address to take, the connection's own holds (the specification says so for both).
  if (command === 0 || family === 0 || family === 3)
    return { kind: 'header', header: { version: 2, length, source: undefined } };
  // This is a TCP port: a datagram (or unspecified) transport under an IP family is not ours.
  if (transport !== 1) return invalid('malformed');
  const body = bytes.subarray(16, length);
  const source: ProxySource =
    family === 1
      ? { address: [...body.subarray(0, 4)].join('.'), port: body.readUInt16BE(8), family: 'IPv4' }
      : { address: ipv6Text(body.subarray(0, 16)), port: body.readUInt16BE(32), family: 'IPv6' };
  return { kind: 'header', header: { version: 2, length, source } };
}

/** The canonical text of 16 address bytes (as node:net prints a peer's address). */
function ipv6Text(b: Buffer): string {
  const words: string[] = [];
  for (let i = 0; i < 16; i += 2) words.push(b.readUInt16BE(i).toString(16));
  // net.SocketAddress normalises (longest zero run compressed, IPv4-mapped kept as such).
  return new net.SocketAddress({ address: words.join(':'), family: 'ipv6' }).address;
}

/** Builds a header (tests, the benchmark): version 1 text or version 2 binary for a TCP client. */
export function buildProxyHeader(
  version: 1 | 2,
  source: { address: string; port: number },
  destination: { address: string; port: number },
): Buffer {
  const six = net.isIPv6(source.address);
  if (version === 1)
    return Buffer.from(
      `PROXY ${six ? 'TCP6' : 'TCP4'} ${source.address} ${destination.address} ${source.port} ${destination.port}\r\n`,
      'latin1',
    );
  const size = six ? INET6_LENGTH : INET_LENGTH;
  const out = Buffer.alloc(16 + size);
  V2_SIGNATURE.copy(out, 0);
  out[12] = 0x21;
  out[13] = six ? 0x21 : 0x11;
  out.writeUInt16BE(size, 14);
  const addr = (text: string, at: number) => {
    const bytes = addressBytes(text) ?? Buffer.alloc(size);
    // addressBytes reads an IPv4-mapped IPv6 address as its IPv4: mapped again here.
    if (six && bytes.length === 4)
      Buffer.concat([Buffer.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]), bytes]).copy(out, at);
    else bytes.copy(out, at);
  };
  addr(source.address, 16);
  addr(destination.address, 16 + (six ? 16 : 4));
  out.writeUInt16BE(source.port, 16 + size - 4);
  out.writeUInt16BE(destination.port, 16 + size - 2);
  return out;
}
