// The destination guard: customers may not reach loopback, private, link-local, cloud metadata,
// CGNAT, multicast or reserved addresses, in any spelling (IPv4-mapped IPv6, decimal, hex and
// octal IPv4 forms are normalised by the WHATWG URL parser first), nor names that resolve to
// them: every name is resolved first (localhost names to loopback, RFC 6761), then its
// addresses are judged. The check runs on the resolved address and a direct exit connects to
// exactly that address, so DNS rebinding between check and connect is impossible there. A chained exit sends
// the name to its upstream proxy, so that it resolves where the exit is (geo DNS); what the name
// means inside the upstream's network is the upstream's to guard. PROXYFLEET_GATEWAY_ALLOW_CIDRS
// exempts ranges (tests, demos). Port policy: no outbound mail ports (docs/gateway.md).
import { lookup } from 'node:dns/promises';
import net from 'node:net';

const BLOCKED_V4: readonly [string, number][] = [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // RFC 1918
  ['100.64.0.0', 10], // CGNAT, RFC 6598 (Alibaba metadata 100.100.100.200)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata 169.254.169.254
  ['172.16.0.0', 12], // RFC 1918
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // TEST-NET-1
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16], // RFC 1918
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // TEST-NET-2
  ['203.0.113.0', 24], // TEST-NET-3
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
];
const BLOCKED_V6: readonly [string, number][] = [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['::', 96], // IPv4-compatible (deprecated, RFC 4291 2.5.5.1): embeds an IPv4 address
  ['64:ff9b:1::', 48], // local-use NAT64 (RFC 8215): embeds IPv4 addresses at operator-chosen places
  ['100::', 64], // discard
  ['2001::', 23], // IETF protocol assignments (Teredo, ORCHID...)
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4 (embeds an IPv4 address)
  ['fc00::', 7], // unique local (AWS IMDS fd00:ec2::254)
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
];
/**
 * `localhost` and every name under `.localhost` mean this machine's loopback (RFC 6761 6.3): they
 * are answered here, never sent to DNS, and judged like 127.0.0.1 (refused unless an allowed
 * range covers it). Every other name is judged by the addresses it resolves to.
 */
const LOOPBACK_NAME = [{ address: '127.0.0.1', family: 4 }];
/** Cloud metadata names answered without DNS (their fixed address), so they are judged as such. */
const METADATA_NAMES: ReadonlyMap<string, { address: string; family: number }[]> = new Map([
  ['metadata.google.internal', [{ address: '169.254.169.254', family: 4 }]],
]);
const staticAnswer = (name: string) =>
  name === 'localhost' || name.endsWith('.localhost') ? LOOPBACK_NAME : METADATA_NAMES.get(name);
/** Outbound SMTP and submission: open proxies are abused for spam. */
export const BLOCKED_PORTS: ReadonlySet<number> = new Set([0, 25, 465, 587]);
const DNS_CACHE_MS = 30_000;
const DNS_CACHE_LIMIT = 10_000;

export type GuardResult =
  | { ok: true; address: string; family: 4 | 6 }
  | {
      ok: false;
      status: 403 | 502 | 400;
      reason: 'destination_prohibited' | 'port_prohibited' | 'dns_error' | 'bad_destination';
    };

export class DestinationGuard {
  private readonly blocked = new net.BlockList();
  private readonly allowed = new net.BlockList();
  private readonly dns = new Map<string, { at: number; addresses: { address: string; family: number }[] }>();
  private readonly resolve: (host: string) => Promise<{ address: string; family: number }[]>;

  constructor(
    allowCidrs: readonly string[],
    resolve?: (host: string) => Promise<{ address: string; family: number }[]>,
  ) {
    for (const [a, p] of BLOCKED_V4) this.blocked.addSubnet(a, p, 'ipv4');
    for (const [a, p] of BLOCKED_V6) this.blocked.addSubnet(a, p, 'ipv6');
    for (const cidr of allowCidrs) {
      const [address, prefix] = cidr.split('/');
      const family = net.isIP(address ?? '');
      if (!family) throw new Error(`PROXYFLEET_GATEWAY_ALLOW_CIDRS: not a CIDR range: ${cidr}`);
      const bits = prefix === undefined ? (family === 4 ? 32 : 128) : Number(prefix);
      if (!Number.isInteger(bits) || bits < 0 || bits > (family === 4 ? 32 : 128))
        throw new Error(`PROXYFLEET_GATEWAY_ALLOW_CIDRS: bad prefix: ${cidr}`);
      this.allowed.addSubnet(address!, bits, family === 4 ? 'ipv4' : 'ipv6');
    }
    this.resolve = resolve ?? ((host) => lookup(host, { all: true, verbatim: true }));
  }

  private readonly verdicts = new Map<string, boolean>();

  /** Whether connecting to this literal address is allowed (memoised: the lists never change). */
  addressAllowed(address: string): boolean {
    let verdict = this.verdicts.get(address);
    if (verdict === undefined) {
      verdict = this.judge(address);
      if (this.verdicts.size >= DNS_CACHE_LIMIT) this.verdicts.clear();
      this.verdicts.set(address, verdict);
    }
    return verdict;
  }

  private judge(address: string): boolean {
    const family = net.isIP(address);
    if (family === 4) return this.allowed.check(address, 'ipv4') || !this.blocked.check(address, 'ipv4');
    if (family !== 6) return false;
    const embedded = embeddedIPv4(address);
    if (embedded) return this.judge(embedded);
    return this.allowed.check(address, 'ipv6') || !this.blocked.check(address, 'ipv6');
  }

  /**
   * Checks a destination and returns the address to connect to. `host` is a URL hostname
   * (already normalised by the WHATWG parser: brackets around IPv6, canonical IPv4).
   */
  async check(host: string, port: number): Promise<GuardResult> {
    if (BLOCKED_PORTS.has(port) || port > 65_535)
      return { ok: false, status: 403, reason: 'port_prohibited' };
    const literal = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
    const family = net.isIP(literal);
    if (family) {
      return this.addressAllowed(literal)
        ? { ok: true, address: literal, family: family as 4 | 6 }
        : { ok: false, status: 403, reason: 'destination_prohibited' };
    }
    const name = literal.toLowerCase().replace(/\.$/, '');
    if (!name) return { ok: false, status: 403, reason: 'destination_prohibited' };
    const fixed = staticAnswer(name);
    let cached = fixed ? { at: Date.now(), addresses: fixed } : this.dns.get(name);
    if (!cached || Date.now() - cached.at > DNS_CACHE_MS) {
      try {
        const addresses = await this.resolve(name);
        cached = { at: Date.now(), addresses };
      } catch {
        return { ok: false, status: 502, reason: 'dns_error' };
      }
      if (this.dns.size >= DNS_CACHE_LIMIT) this.dns.clear();
      this.dns.set(name, cached);
    }
    const first = cached.addresses[0];
    if (!first) return { ok: false, status: 502, reason: 'dns_error' };
    // A name with any forbidden address is refused: it is either a mistake or an attack.
    if (!cached.addresses.every((a) => this.addressAllowed(a.address)))
      return { ok: false, status: 403, reason: 'destination_prohibited' };
    return { ok: true, address: first.address, family: first.family === 6 ? 6 : 4 };
  }
}

/** The IPv4 address inside an IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible or NAT64 IPv6 address. */
export function embeddedIPv4(address: string): string | undefined {
  const lower = address.toLowerCase();
  const m = /^(?:::ffff:(?:0:)?|::|64:ff9b::)((?:\d+\.){3}\d+)$/.exec(lower);
  if (m && net.isIPv4(m[1]!)) return m[1];
  const hex = /^(?:::ffff:(?:0:)?|::|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (hex) {
    const hi = parseInt(hex[1]!, 16);
    const lo = parseInt(hex[2]!, 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return undefined;
}

/**
 * The host and port of a CONNECT authority (`host:port`, `[v6]:port`), with the host normalised
 * the way URLs are (so 2130706433, 0x7f.1 and 017700000001 all become 127.0.0.1).
 */
export function parseAuthority(authority: string): { host: string; port: number } | undefined {
  // Fast path: a canonical dotted-quad IPv4 address needs no URL parsing.
  const quad =
    /^((?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}):(\d{1,5})$/.exec(
      authority,
    );
  if (quad) {
    const port = Number(quad[2]);
    return port >= 1 && port <= 65_535 ? { host: quad[1]!, port } : undefined;
  }
  const m = /^(\[[0-9A-Fa-f:.]+\]|[^\s:/?#@[\]]+):(\d{1,5})$/.exec(authority);
  if (!m) return undefined;
  const port = Number(m[2]);
  if (port < 1 || port > 65_535) return undefined;
  const host = normaliseHost(m[1]!);
  return host === undefined ? undefined : { host, port };
}

export function normaliseHost(host: string): string | undefined {
  try {
    const url = new URL(`http://${host}/`);
    return url.hostname || undefined;
  } catch {
    return undefined;
  }
}
