// The PROXY protocol on the plan's port (docs/adr/0102): a load balancer in front of the gateway
// (one that SNATs, as a Kubernetes Service with externalTrafficPolicy Cluster does) says who the
// client is in a header before the client's own bytes. Read at accept, before TLS, SOCKS5 or HTTP
// is told apart; from a trusted source only. Once read, the socket's remoteAddress, remotePort and
// remoteFamily are the header's, so everything downstream (the per-source connection cap, the IP
// allowlist, the login backoff, the access log) sees the client and not the balancer.
//
// Refusals close the connection without an answer (the peer is a balancer, not an HTTP client),
// counted by reason: a header from a source not in trustedCidrs, a malformed, oversized or
// mismatched one, a second header after the first, and in `required` mode a connection without one
// or from an untrusted source at all.
import net from 'node:net';
import { parseCidr } from '#common/cidr.ts';
import { readProxyHeader, signed, type HeaderFault, type ProxyHeader } from './proxy-header.ts';

export const PROXY_PROTOCOL_MODES = ['off', 'optional', 'required'] as const;
export type ProxyProtocolMode = (typeof PROXY_PROTOCOL_MODES)[number];

/** Why a connection was closed for its PROXY header (label `reason`): a header's faults and these. */
export type ProxyProtocolRefusal = HeaderFault | 'untrusted_source' | 'missing' | 'second_header' | 'timeout';
export const PROXY_PROTOCOL_REFUSALS: readonly ProxyProtocolRefusal[] = [
  'untrusted_source',
  'missing',
  'malformed',
  'too_long',
  'family_mismatch',
  'second_header',
  'timeout',
];

export interface ProxyProtocolSpec {
  mode: ProxyProtocolMode;
  trustedCidrs: readonly string[];
}

/** The parsed policy of one gateway: its mode and the sources whose headers it believes. */
export class ProxyProtocolPolicy {
  readonly mode: ProxyProtocolMode;
  private readonly trusted = new net.BlockList();

  constructor(spec: ProxyProtocolSpec) {
    this.mode = spec.mode;
    for (const cidr of spec.trustedCidrs) {
      const parsed = parseCidr(cidr);
      if (!parsed)
        throw new Error(`proxyProtocol.trustedCidrs: ${cidr} is not an address range (a.b.c.d/n or x::/n)`);
      this.trusted.addSubnet(parsed.address, parsed.prefix, parsed.family);
    }
  }

  /** Whether a header from this peer is believed (IPv4-mapped IPv6 peers match their IPv4 ranges). */
  trusts(address: string | undefined): boolean {
    if (!address) return false;
    const family = net.isIPv4(address) ? 'ipv4' : 'ipv6';
    return this.trusted.check(address, family);
  }
}

export interface HeaderHandlers {
  /**
   * A trusted header named the client (the socket's peer is now the client's address), before any
   * of the client's bytes: false stops reading (the caller refused the connection).
   */
  identified(socket: net.Socket, header: ProxyHeader): boolean;
  /**
   * The connection may proceed (`header` read, or none where none is needed): `first` holds the
   * client's first bytes, read; the socket still flows, with no 'data' listener until the
   * caller's (added at once, before any further bytes can arrive). Its peer is the header's client.
   */
  proceed(socket: net.Socket, header: ProxyHeader | undefined, first: Buffer): void;
  /** The connection is to be closed for `reason` (the caller counts and destroys). */
  refuse(socket: net.Socket, reason: ProxyProtocolRefusal): void;
}

/** Sets the socket's peer to the header's client, as node:net's getters would report it. */
function adoptClient(socket: net.Socket, header: ProxyHeader): void {
  const source = header.source;
  if (!source) return;
  for (const [key, value] of [
    ['remoteAddress', source.address],
    ['remotePort', source.port],
    ['remoteFamily', source.family],
  ] as const)
    Object.defineProperty(socket, key, { value, configurable: true, enumerable: true });
}

/** A TLS session's peer is its TCP socket's: the header's client, when there was one. */
export function adoptPeer(inner: net.Socket, carrier: net.Socket): void {
  for (const key of ['remoteAddress', 'remotePort', 'remoteFamily'] as const) {
    const own = Object.getOwnPropertyDescriptor(carrier, key);
    if (own) Object.defineProperty(inner, key, own);
  }
}

/**
 * Reads the PROXY header of a freshly accepted socket, per `policy`, then hands the socket on or
 * refuses it. A client's bytes that begin with no header signature are decided at their first
 * differing byte (a SOCKS5 greeting or a ClientHello at once), so no client waits on this.
 */
export function readHeaderOf(socket: net.Socket, policy: ProxyProtocolPolicy, on: HeaderHandlers): void {
  const trusted = policy.trusts(socket.remoteAddress);
  if (!trusted && policy.mode === 'required') return on.refuse(socket, 'untrusted_source');
  let bytes: Buffer = Buffer.alloc(0);
  let spoke = false;
  // Once read: what follows is judged again until it surely begins no second header.
  let header: ProxyHeader | undefined;
  const stop = () => {
    socket.off('data', onData);
    socket.off('end', onEnd);
  };
  const refuse = (reason: ProxyProtocolRefusal) => {
    stop();
    on.refuse(socket, reason);
  };
  // No pause, unshift and resume: the bytes are handed on as read (a tick less per connection).
  const proceed = () => {
    stop();
    on.proceed(socket, header, bytes);
  };
  const judge = (): void => {
    const read = readProxyHeader(bytes);
    // A second header, whole, partial (once its signature is) or malformed, is refused: only the
    // balancer's first counts.
    if (header !== undefined && read.kind !== 'none' && signed(bytes)) return refuse('second_header');
    if (read.kind === 'incomplete') return;
    if (header !== undefined) return read.kind === 'none' ? proceed() : refuse('second_header');
    if (read.kind === 'none') return policy.mode === 'required' ? refuse('missing') : proceed();
    if (!trusted) return refuse('untrusted_source');
    if (read.kind === 'invalid') return refuse(read.fault);
    header = read.header;
    adoptClient(socket, header);
    if (!on.identified(socket, header)) return stop();
    bytes = bytes.subarray(header.length);
    if (bytes.length) judge();
  };
  const onData = (chunk: Buffer) => {
    spoke = true;
    bytes = bytes.length ? Buffer.concat([bytes, chunk]) : chunk;
    judge();
  };
  const onEnd = () => {
    stop();
    // Nothing but a whole header (or nothing at all) before the client's FIN: closed as a silent
    // connection is; a header or a head cut short is refused.
    if (!spoke || (header !== undefined && bytes.length === 0)) socket.end();
    else on.refuse(socket, header === undefined ? 'malformed' : 'second_header');
  };
  socket.on('data', onData);
  socket.once('end', onEnd);
}
