// Connection admission at accept, before a byte is parsed: a per-process cap on open customer
// connections (every gateway of the process shares it) and a per-source-address cap on
// connections that have not yet authenticated. Refusing is a reset: no parsing, no answer, no
// timer. Defaults are sized from the process's file-descriptor limit (docs/gateway.md, limits).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type net from 'node:net';

export type ConnectionRefusal = 'process_cap' | 'source_cap';

/** File descriptors kept back from the connection cap: the database pool, the health and API servers, logs. */
const RESERVED_FDS = 1024;
export const DEFAULT_UNAUTHENTICATED_PER_SOURCE = 256;

/** The soft RLIMIT_NOFILE of this process (from /proc; 1024 when it cannot be read). */
export function openFileLimit(): number {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = line?.split(/\s{2,}/)[1];
    if (soft === 'unlimited') return 1_048_576;
    const n = Number(soft);
    return Number.isFinite(n) && n > 0 ? n : 1024;
  } catch {
    return 1024;
  }
}

/**
 * Default process cap: each customer connection may hold a second descriptor (its upstream), so
 * half of what is left after the reserve.
 */
export function defaultMaxConnections(fdLimit = openFileLimit()): number {
  return Math.max(64, Math.floor((fdLimit - RESERVED_FDS) / 2));
}

export class ConnectionLimiter {
  readonly maxConnections: number;
  readonly maxUnauthenticatedPerSource: number;
  private open = 0;
  private readonly unauthenticated = new Map<string, number>();
  /** Sockets not yet authenticated, and the source address they count against. */
  private readonly pending = new WeakMap<net.Socket, string>();

  constructor(maxConnections: number, maxUnauthenticatedPerSource: number) {
    this.maxConnections = maxConnections;
    this.maxUnauthenticatedPerSource = maxUnauthenticatedPerSource;
  }

  get connections(): number {
    return this.open;
  }

  /** Counts an accepted socket, or says why it must be refused (the caller resets it). */
  accept(socket: net.Socket): ConnectionRefusal | undefined {
    if (this.open >= this.maxConnections) return 'process_cap';
    const address = socket.remoteAddress ?? '';
    const n = this.unauthenticated.get(address) ?? 0;
    if (n >= this.maxUnauthenticatedPerSource) return 'source_cap';
    this.open++;
    this.unauthenticated.set(address, n + 1);
    this.pending.set(socket, address);
    socket.once('close', () => {
      this.open--;
      this.authenticated(socket);
    });
    return undefined;
  }

  /** The socket's first request authenticated: it no longer counts against its source's cap. */
  authenticated(socket: net.Socket): void {
    const address = this.pending.get(socket);
    if (address === undefined) return;
    this.pending.delete(socket);
    const n = (this.unauthenticated.get(address) ?? 1) - 1;
    if (n > 0) this.unauthenticated.set(address, n);
    else this.unauthenticated.delete(address);
  }
}

/**
 * Raises this process's RLIMIT_NOFILE soft limit to its hard limit. Node cannot call setrlimit,
 * so util-linux's prlimit does it on our pid (in the image: node:24-slim has util-linux). Returns
 * the soft limit in force afterwards.
 */
export function raiseFileLimit(onFailure: (message: string) => void): number {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const [, soft, hard] = line?.split(/\s{2,}/) ?? [];
    if (soft !== undefined && hard !== undefined && soft !== hard) {
      execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${hard}:${hard}`], {
        stdio: 'ignore',
        timeout: 5_000,
      });
    }
  } catch (err) {
    onFailure(err instanceof Error ? err.message : String(err));
  }
  return openFileLimit();
}
