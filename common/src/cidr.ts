// Address ranges given as text (a.b.c.d/n, x::/n, or a bare address), checked with node:net's
// BlockList: the gateway's PROXY protocol trust (gateway/src/proxy/proxy-protocol.ts) and the
// API's trusted reverse proxies (PROXYFLEET_API_TRUSTED_PROXIES).
import net from 'node:net';

/** `a.b.c.d/n` or `x::/n` (a bare address is its own /32 or /128); undefined if neither. */
export function parseCidr(
  text: string,
): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | undefined {
  const [address = '', bits, ...more] = text.split('/');
  if (more.length) return undefined;
  const v = net.isIP(address);
  if (v === 0) return undefined;
  const max = v === 4 ? 32 : 128;
  if (bits !== undefined && !/^(0|[1-9][0-9]{0,2})$/.test(bits)) return undefined;
  const prefix = bits === undefined ? max : Number(bits);
  if (prefix > max) return undefined;
  return { address, prefix, family: v === 4 ? 'ipv4' : 'ipv6' };
}

/**
 * Whether an address is in one of the ranges (IPv4-mapped IPv6 addresses, as a dual-stack socket
 * reports IPv4 peers, match their IPv4 ranges). Throws on a range parseCidr refuses.
 */
export function cidrMatcher(cidrs: readonly string[]): (address: string | undefined) => boolean {
  const list = new net.BlockList();
  for (const cidr of cidrs) {
    const parsed = parseCidr(cidr);
    if (!parsed) throw new Error(`${cidr} is not an address range (a.b.c.d/n or x::/n)`);
    list.addSubnet(parsed.address, parsed.prefix, parsed.family);
  }
  return (address) => {
    if (!address || net.isIP(address) === 0) return false;
    return list.check(address, net.isIPv4(address) ? 'ipv4' : 'ipv6');
  };
}
