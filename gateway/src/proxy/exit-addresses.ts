// Exits whose source address is gone (docs/adr/0117): an address taken off the node (a failover
// moved it, a DHCP lease ran out, a person removed it) made every connection through its exit fail
// to bind, and each customer routed there paid a failed attempt before the next exit was tried.
// The gateway now reads the local interfaces at start and every ADDRESS_CHECK_MS (getifaddrs, a
// few microseconds) and marks such an exit missing: exit choice leaves it out (exits.ts) until the
// address is back. Each change is logged once and shown by proxyfleet_gateway_exit_missing.
//
// Local means what bind() accepts without IP_FREEBIND: an address of an interface that is up, or
// any address in the subnet of a loopback interface (Linux routes all of 127.0.0.0/8 to lo, so
// 127.0.0.2 binds although lo lists 127.0.0.1 only). Nothing here relies on bind failing, which
// loopback addresses never do: tests give their own interface lister.
import net from 'node:net';
import os from 'node:os';
import type { Gauge } from 'prom-client';
import type { Logger } from '#common/logger.ts';
import type { Exit, ExitPool } from './exits.ts';

/** How often the interfaces are read again: a removed address is skipped within this long. */
export const ADDRESS_CHECK_MS = 5_000;

/** os.networkInterfaces(), or a test's stand-in. Node lists only interfaces that are up and running. */
export type InterfaceLister = () => NodeJS.Dict<os.NetworkInterfaceInfo[]>;

/** A test of whether an address is local, from one reading of the interfaces. */
export function localAddresses(
  interfaces: NodeJS.Dict<os.NetworkInterfaceInfo[]>,
): (address: string) => boolean {
  const local = new net.BlockList();
  for (const infos of Object.values(interfaces)) {
    for (const info of infos ?? []) {
      const family = info.family === 'IPv6' ? 'ipv6' : 'ipv4';
      const address = withoutScope(info.address);
      const prefix = Number(info.cidr?.split('/')[1]);
      if (info.internal && Number.isInteger(prefix)) local.addSubnet(address, prefix, family);
      else local.addAddress(address, family);
    }
  }
  return (address) => {
    const bare = withoutScope(address);
    const family = net.isIP(bare);
    // Not an address (the spec does not check): left to bind() to refuse.
    if (family === 0) return true;
    return local.check(bare, family === 6 ? 'ipv6' : 'ipv4');
  };
}

/** fe80::1%eth0 -> fe80::1 (the zone is not part of the address BlockList compares). */
const withoutScope = (address: string) => address.replace(/%.*$/, '');

export interface ExitAddressWatchOptions {
  plan: string;
  logger: Logger;
  /** proxyfleet_gateway_exit_missing (metrics.ts). */
  gauge: Gauge<'plan' | 'exit'>;
  /** Default: os.networkInterfaces. */
  lister?: InterfaceLister;
  /** Default: ADDRESS_CHECK_MS. */
  intervalMs?: number;
}

/** Marks the pool's source-address exits missing, and present again, from the local interfaces. */
export class ExitAddressWatch {
  private readonly pool: ExitPool;
  private readonly bound: Exit[];
  private readonly opts: ExitAddressWatchOptions;
  private timer: NodeJS.Timeout | undefined;

  constructor(pool: ExitPool, opts: ExitAddressWatchOptions) {
    this.pool = pool;
    this.opts = opts;
    this.bound = pool.exits.filter((e) => e.sourceAddress !== undefined);
    for (const e of this.bound) opts.gauge.labels({ plan: opts.plan, exit: e.name }).set(0);
  }

  /** Checks now (before the gateway listens), then every intervalMs. Nothing to watch: no timer. */
  start(): void {
    if (this.bound.length === 0) return;
    this.check();
    this.timer = setInterval(() => this.check(), this.opts.intervalMs ?? ADDRESS_CHECK_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** One reading of the interfaces; logs and counts each exit whose state changes. */
  check(): void {
    const { logger, plan, gauge } = this.opts;
    let isLocal: (address: string) => boolean;
    try {
      isLocal = localAddresses((this.opts.lister ?? os.networkInterfaces)());
    } catch (err) {
      // Keep what was last known rather than judge every exit from nothing.
      logger.warn({ err: (err as Error).message }, 'could not read the network interfaces');
      return;
    }
    for (const exit of this.bound) {
      const missing = !isLocal(exit.sourceAddress!);
      if (!this.pool.setMissing(exit, missing)) continue;
      gauge.labels({ plan, exit: exit.name }).set(missing ? 1 : 0);
      const fields = { plan, exit: exit.name, sourceAddress: exit.sourceAddress };
      if (missing)
        logger.warn(
          fields,
          'exit source address is on no local interface: the exit is skipped until it is back',
        );
      else logger.info(fields, 'exit source address is back: the exit is used again');
    }
  }
}
