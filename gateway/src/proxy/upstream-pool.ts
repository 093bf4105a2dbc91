// The raw upstream client's sockets (docs/adr/0038): idle keep-alive sockets per exit and
// destination, and one set of listeners per socket for its life that calls whichever exchange owns
// it now (own()) or drops it from its pool while it is idle.
import net from 'node:net';
import { dialFrom, type SourcePorts } from './source-ports.ts';

/** Idle sockets kept per exit and destination (as node's agent's maxFreeSockets). */
export const MAX_FREE_SOCKETS = 256;

/** What an exchange hears from the socket it owns (see own()). */
export interface SocketUser {
  data(chunk: Buffer): void;
  end(): void;
  error(err: NodeJS.ErrnoException): void;
  close(): void;
  timeout(): void;
  drain(): void;
}

/** A socket's listeners, installed once: they call its owner, or drop it from its pool when idle. */
interface Slot {
  user: SocketUser | undefined;
  pool: UpstreamPool | undefined;
  key: string;
  /** The idle timeout was set from a Keep-Alive hint while pooled (restored when taken). */
  hinted: boolean;
}

const slots = new WeakMap<net.Socket, Slot>();

function slotOf(socket: net.Socket): Slot {
  const slot = slots.get(socket);
  if (slot) return slot;
  const s: Slot = { user: undefined, pool: undefined, key: '', hinted: false };
  slots.set(socket, s);
  const idle = () => s.pool?.drop(s.key, socket);
  socket.on('data', (c: Buffer) => (s.user ? s.user.data(c) : idle()));
  socket.on('end', () => (s.user ? s.user.end() : idle()));
  socket.on('error', (e: NodeJS.ErrnoException) => (s.user ? s.user.error(e) : idle()));
  socket.on('close', () => (s.user ? s.user.close() : idle()));
  socket.on('timeout', () => (s.user ? s.user.timeout() : idle()));
  socket.on('drain', () => s.user?.drain());
  return s;
}

/**
 * Makes `user` hear the socket's events (undefined: nobody). One set of listeners per socket for
 * its life, instead of adding and removing six per request.
 */
export function own(socket: net.Socket, user: SocketUser | undefined): void {
  slotOf(socket).user = user;
}

/**
 * Idle keep-alive sockets of one exit, per destination (`host:port`), newest first out. A pooled
 * socket keeps the idle timeout it had while used (the gateway's idle timeout; the answer's
 * Keep-Alive hint when it gave one): it is dropped when that passes, or on any event while idle.
 */
export class UpstreamPool {
  private readonly free = new Map<string, net.Socket[]>();
  private readonly sourceAddress: string | undefined;
  private readonly ports: SourcePorts | undefined;

  constructor(sourceAddress?: string, ports?: SourcePorts) {
    this.sourceAddress = sourceAddress;
    this.ports = ports;
  }

  /** An idle socket to `key` with its idle timeout set to `timeoutMs`, or undefined. */
  take(key: string, timeoutMs: number): net.Socket | undefined {
    const list = this.free.get(key);
    while (list && list.length > 0) {
      const socket = list.pop()!;
      if (list.length === 0) this.free.delete(key);
      const slot = slotOf(socket);
      slot.pool = undefined;
      if (socket.destroyed || !socket.readable || !socket.writable) {
        socket.destroy();
        continue;
      }
      if (slot.hinted) {
        slot.hinted = false;
        socket.setTimeout(timeoutMs);
      }
      socket.ref();
      return socket;
    }
    return undefined;
  }

  /** Keeps a socket nobody owns after a complete exchange; `hintSeconds` from the answer's Keep-Alive. */
  give(key: string, socket: net.Socket, hintSeconds: number): void {
    let list = this.free.get(key);
    if (!list) {
      list = [];
      this.free.set(key, list);
    }
    // As node's agent: a server hint of timeout=N keeps it N-1 s (at most 1 s less than promised).
    const hintMs = hintSeconds > 0 ? hintSeconds * 1000 - 1000 : 0;
    if (list.length >= MAX_FREE_SOCKETS || (hintSeconds > 0 && hintMs <= 0)) {
      socket.destroy();
      return;
    }
    const slot = slotOf(socket);
    slot.user = undefined;
    slot.pool = this;
    slot.key = key;
    if (hintMs > 0) {
      slot.hinted = true;
      socket.setTimeout(hintMs);
    }
    socket.unref();
    socket.resume();
    list.push(socket);
  }

  /** Removes an idle socket (an event while idle: EOF, error, data, its timeout) and destroys it. */
  drop(key: string, socket: net.Socket): void {
    socket.destroy();
    slotOf(socket).pool = undefined;
    const list = this.free.get(key);
    const at = list ? list.indexOf(socket) : -1;
    if (at >= 0) {
      list!.splice(at, 1);
      if (list!.length === 0) this.free.delete(key);
    }
  }

  /** A new connection: connected (source-address exits) or connecting, its idle timeout set. */
  dial(host: string, port: number, timeoutMs: number): net.Socket | Promise<net.Socket> {
    if (this.sourceAddress && this.ports) {
      return dialFrom(this.sourceAddress, this.ports, { host, port }, timeoutMs).then((s) =>
        s.setTimeout(timeoutMs),
      );
    }
    return net.connect({ host, port, noDelay: true, timeout: timeoutMs });
  }

  destroy(): void {
    for (const list of this.free.values()) for (const s of list) s.destroy();
    this.free.clear();
  }
}
