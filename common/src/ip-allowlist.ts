// Addresses and ranges of the IP allowlist (docs/adr/0036): parsed and checked once here, for the
// API (what may be stored) and the gateway (what a source address matches). Addresses are bytes
// (4 or 16), so a range is a prefix of bytes whatever the notation it was written in.
import net from 'node:net';

/** The widest range an entry may cover: a /24 of IPv4 (256 addresses), a /48 of IPv6 (one site). */
export const WIDEST_PREFIX = { 4: 24, 6: 48 } as const;
/** Entries per account unless PROXYFLEET_IP_ALLOWLIST_MAX says otherwise. */
export const DEFAULT_ALLOWLIST_MAX = 20;

export interface Cidr {
  family: 4 | 6;
  /** The network address (host bits zero), 4 or 16 bytes. */
  bytes: Buffer;
  prefix: number;
}

/** The 16 bytes of an IPv6 address net.isIPv6 accepted (no zone). */
function ipv6Bytes(text: string): Buffer {
  const out = Buffer.alloc(16);
  let head = text;
  let tail = '';
  const gap = text.indexOf('::');
  if (gap >= 0) {
    head = text.slice(0, gap);
    tail = text.slice(gap + 2);
  }
  const groups = (part: string): number[] => {
    if (part === '') return [];
    const words: number[] = [];
    for (const g of part.split(':')) {
      if (g.includes('.')) {
        const v4 = g.split('.').map(Number);
        words.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
      } else words.push(parseInt(g, 16));
    }
    return words;
  };
  const h = groups(head);
  const t = groups(tail);
  h.forEach((w, i) => out.writeUInt16BE(w, i * 2));
  t.forEach((w, i) => out.writeUInt16BE(w, 16 - (t.length - i) * 2));
  return out;
}

/** The bytes of an address, IPv4-mapped IPv6 (`::ffff:a.b.c.d`) as the IPv4 it is; undefined if none. */
export function addressBytes(text: string): Buffer | undefined {
  if (net.isIPv4(text)) return Buffer.from(text.split('.').map(Number));
  if (!net.isIPv6(text) || text.includes('%')) return undefined;
  const bytes = ipv6Bytes(text);
  return isMapped(bytes) ? bytes.subarray(12) : bytes;
}

function isMapped(bytes: Buffer): boolean {
  return (
    bytes.length === 16 &&
    bytes.subarray(0, 10).every((b) => b === 0) &&
    bytes[10] === 0xff &&
    bytes[11] === 0xff
  );
}

/** `bytes` with every bit past `prefix` cleared (a copy). */
export function maskTo(bytes: Buffer, prefix: number): Buffer {
  const out = Buffer.from(bytes);
  for (let i = 0; i < out.length; i++) {
    const keep = Math.max(0, Math.min(8, prefix - i * 8));
    out[i]! &= (0xff << (8 - keep)) & 0xff;
  }
  return out;
}

export function formatCidr(c: Cidr): string {
  const address =
    c.family === 4
      ? [...c.bytes].join('.')
      : // The compressed form PostgreSQL and Node print (RFC 5952).
        new net.SocketAddress({ address: ipv6Text(c.bytes), family: 'ipv6' }).address;
  return `${address}/${c.prefix}`;
}

function ipv6Text(bytes: Buffer): string {
  const words: string[] = [];
  for (let i = 0; i < 16; i += 2) words.push(bytes.readUInt16BE(i).toString(16));
  return words.join(':');
}

export type CidrResult = { ok: true; cidr: Cidr; text: string } | { ok: false; problem: string };

/**
 * An address (`203.0.113.7`, `2001:db8::1`) or a range (`203.0.113.0/24`) as an entry may hold:
 * no host bits past the prefix (the answer names the range meant), no wider than WIDEST_PREFIX,
 * IPv4 written as IPv4, and, unless `allowPrivate`, no address a gateway could see for traffic that
 * is not the customer's own (private, loopback, link-local and the like: a load balancer or NAT in
 * front of the gateways would make everyone behind it the account).
 */
export function parseAllowlistCidr(text: string, allowPrivate: boolean): CidrResult {
  const slash = text.indexOf('/');
  const address = slash < 0 ? text : text.slice(0, slash);
  const bytes =
    net.isIPv4(address) || (net.isIPv6(address) && !address.includes('%'))
      ? addressBytes(address)
      : undefined;
  if (!bytes)
    return { ok: false, problem: 'must be an IPv4 or IPv6 address, or a range such as 203.0.113.0/24' };
  if (net.isIPv6(address) && bytes.length === 4)
    return { ok: false, problem: `must write an IPv4 address as IPv4 (${[...bytes].join('.')})` };
  const family = bytes.length === 4 ? 4 : 6;
  const bits = family === 4 ? 32 : 128;
  let prefix = bits;
  if (slash >= 0) {
    const p = text.slice(slash + 1);
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p) || Number(p) > bits)
      return { ok: false, problem: `must have a prefix length from 0 to ${bits}` };
    prefix = Number(p);
  }
  if (prefix < WIDEST_PREFIX[family])
    return {
      ok: false,
      problem: `must be no wider than /${WIDEST_PREFIX[family]} for IPv${family}`,
    };
  const network = maskTo(bytes, prefix);
  const cidr: Cidr = { family, bytes: network, prefix };
  if (!network.equals(bytes))
    return { ok: false, problem: `must not have host bits set (the range is ${formatCidr(cidr)})` };
  if (!allowPrivate && !isPublic(cidr))
    return {
      ok: false,
      problem: 'must be a public address (private, loopback and reserved ranges are refused)',
    };
  return { ok: true, cidr, text: formatCidr(cidr) };
}

// Ranges whose addresses never reach a gateway as a customer's own source on the internet.
const NOT_PUBLIC = new net.BlockList();
for (const [a, p] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
  ['224.0.0.0', 3],
] as const)
  NOT_PUBLIC.addSubnet(a, p, 'ipv4');
for (const [a, p] of [
  ['::', 127],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const)
  NOT_PUBLIC.addSubnet(a, p, 'ipv6');

function isPublic(c: Cidr): boolean {
  // Ranges are at most /24 and /48 wide, so the network address and the last one decide.
  const last = Buffer.from(c.bytes);
  for (let bit = c.prefix; bit < last.length * 8; bit++) last[bit >> 3]! |= 0x80 >> (bit & 7);
  const type = c.family === 4 ? 'ipv4' : 'ipv6';
  const text = (b: Buffer) => (c.family === 4 ? [...b].join('.') : ipv6Text(b));
  return !NOT_PUBLIC.check(text(c.bytes), type) && !NOT_PUBLIC.check(text(last), type);
}
