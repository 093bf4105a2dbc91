// Source ports of exits that bind a source address (docs/gateway.md, "Exits with a source address under load").
//
// `bind(address, 0)` before `connect()` makes the kernel pick a port that no other socket on that
// address holds, whatever the destination, and the port stays held through the connection's
// TIME_WAIT (60 s) when the gateway closed first. Short tunnels closed by their customers thus used
// up the whole ephemeral range of an exit's address at about 28,000 / 60 s = 470 tunnels per second,
// and every further connect through the exit failed with EADDRINUSE (502 `exit_failed`, the exit
// marked failed). The kernel's answer is IP_BIND_ADDRESS_NO_PORT (pick the port at connect, where
// only the 4-tuple must be unique); Node cannot set it. So the gateway picks the port itself:
// libuv binds with SO_REUSEADDR, and a bind to an explicit port with SO_REUSEADDR shares the port
// with other such sockets (connections to other destinations, TIME_WAIT ones); `connect()` then
// refuses only a 4-tuple still in use (EADDRNOTAVAIL), and the next port is tried.
//
// Only odd ports of the range are used, as the kernel's own bind(0) prefers them: ports bound
// explicitly are skipped by the kernel when it picks ports for unbound connects (the even ones
// first), so the process's database connections and unbound exits keep half the range.
import { readFileSync } from 'node:fs';
import net from 'node:net';

/** Ports tried for one connection before the exit is judged out of ports. */
export const MAX_PORT_ATTEMPTS = 16;
/** Linux's default net.ipv4.ip_local_port_range, when /proc cannot be read. */
const DEFAULT_RANGE = { low: 32_768, high: 60_999 };

export interface PortRange {
  low: number;
  high: number;
  /** net.ipv4.ip_local_reserved_ports: never chosen. */
  reserved: ReadonlySet<number>;
}

/** The kernel's ephemeral port range and reserved ports, read once per exit pool. */
export function ephemeralRange(read: (file: string) => string = (f) => readFileSync(f, 'utf8')): PortRange {
  let low = DEFAULT_RANGE.low;
  let high = DEFAULT_RANGE.high;
  const reserved = new Set<number>();
  try {
    const [a, b] = read('/proc/sys/net/ipv4/ip_local_port_range').trim().split(/\s+/).map(Number);
    if (Number.isInteger(a) && Number.isInteger(b) && a! > 0 && b! >= a!) [low, high] = [a!, b!];
  } catch {
    // Not Linux, or no /proc: the default range.
  }
  try {
    for (const part of read('/proc/sys/net/ipv4/ip_local_reserved_ports').trim().split(',')) {
      if (!part) continue;
      const [from, to = from] = part.split('-').map(Number);
      for (let p = from!; p <= to!; p++) reserved.add(p);
    }
  } catch {
    // None reserved.
  }
  return { low, high, reserved };
}

/**
 * The ports one source address uses, taken in turn from a random start: the next port is the one
 * used longest ago, so its TIME_WAIT connections are the oldest (which loopback and
 * `net.ipv4.tcp_tw_reuse=1` let connect() reuse after 1 s).
 */
export class SourcePorts {
  private readonly ports: number[];
  private next_: number;

  constructor(range: PortRange, random: () => number = Math.random) {
    this.ports = [];
    for (let p = range.low | 1; p <= range.high; p += 2) if (!range.reserved.has(p)) this.ports.push(p);
    if (this.ports.length === 0) throw new Error(`no usable odd port in ${range.low}-${range.high}`);
    this.next_ = Math.floor(random() * this.ports.length);
  }

  get size(): number {
    return this.ports.length;
  }

  next(): number {
    const port = this.ports[this.next_]!;
    this.next_ = (this.next_ + 1) % this.ports.length;
    return port;
  }
}

/** The port is held by a socket that cannot share it, or the 4-tuple is in use: try another port. */
export function isPortClash(err: NodeJS.ErrnoException): boolean {
  return err.code === 'EADDRINUSE' || err.code === 'EADDRNOTAVAIL';
}

/**
 * Connects from `address` to the destination, choosing the source port (above). Resolves with the
 * connected socket; rejects with the socket's error (the last port clash after MAX_PORT_ATTEMPTS
 * ports), or with an error of code ETIMEDOUT after `timeoutMs`.
 */
export function dialFrom(
  address: string,
  ports: SourcePorts,
  dest: { host: string; port: number },
  timeoutMs: number,
): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    let attempt = 0;
    let socket: net.Socket | undefined;
    const timer = setTimeout(() => {
      socket?.destroy();
      const err: NodeJS.ErrnoException = new Error(`connect ETIMEDOUT ${dest.host}:${dest.port}`);
      err.code = 'ETIMEDOUT';
      err.syscall = 'connect';
      reject(err);
    }, timeoutMs);
    const dial = () => {
      attempt++;
      const s = net.connect({
        host: dest.host,
        port: dest.port,
        localAddress: address,
        localPort: ports.next(),
        noDelay: true,
      });
      socket = s;
      const onError = (err: NodeJS.ErrnoException) => {
        s.destroy();
        if (isPortClash(err) && attempt < MAX_PORT_ATTEMPTS) return dial();
        clearTimeout(timer);
        reject(err);
      };
      s.once('error', onError);
      s.once('connect', () => {
        clearTimeout(timer);
        s.off('error', onError);
        resolve(s);
      });
    };
    dial();
  });
}
