// Connection tracking: which budget each customer connection's bytes are billed to, and the exact
// counts (the socket's own counters, meter.ts) that replace the budget's estimate. The invariant:
// every byte a customer socket moved is billed once, to the budget that owned the connection when
// it moved; the bytes of a request refused before its answer are billed to no one (docs/adr/0024).
// A connection is tracked from its first admission to its close; what it may draw, and when it is
// cut, is the budget core's (budgets.ts), which ends connections through `end`.
import type net from 'node:net';
import type { PlanMetrics } from '../metrics.ts';
import { Metered, type Budget } from './meter.ts';
import { allocate } from './lease-book.ts';

/** The limits a tick closes connections past (the plan's timeouts). */
export interface ConnectionLimits {
  /** A connection that moved no byte for this long is closed. */
  idleMs: number;
  /** A connection older than this is closed. */
  maxLifetimeMs: number;
}

export class Connections {
  private readonly open = new Set<Metered>();
  private readonly bySocket = new WeakMap<net.Socket, Metered>();
  private readonly hot: PlanMetrics;
  private readonly limits: ConnectionLimits;

  constructor(hot: PlanMetrics, limits: ConnectionLimits) {
    this.hot = hot;
    this.limits = limits;
  }

  /** Open customer connections tracked (admitted once at least, not yet closed). */
  get size(): number {
    return this.open.size;
  }

  /** The connection of a socket, once it was admitted. */
  of(socket: net.Socket): Metered | undefined {
    return this.bySocket.get(socket);
  }

  /** Registers a customer connection for billing (once per socket). */
  track(socket: net.Socket): Metered {
    const conn = new Metered(socket);
    this.open.add(conn);
    this.bySocket.set(socket, conn);
    socket.once('close', () => this.untrack(conn));
    return conn;
  }

  /** Points a connection's future bytes at `b`, billing what came before to its previous owner. */
  attach(conn: Metered, b: Budget): void {
    if (conn.budget === b) return;
    const previous = conn.budget;
    if (previous) {
      // Not detach(): the bytes after the last completed request are this admitted request's head
      // (and body so far), billed to `b` from here, not skipped as a refused request's are.
      this.collectToMark(conn);
      previous.conns.delete(conn);
    }
    conn.budget = b;
    b.conns.add(conn);
  }

  /**
   * Bills the connection's bytes up to the end of its last completed request and leaves it with
   * no owner: what follows (a refused request) is not billed.
   */
  detach(conn: Metered): void {
    this.release(conn);
    conn.answering = false;
    conn.billedIn = conn.wire.bytesRead;
    conn.billedOut = conn.wire.bytesWritten;
  }

  /** Bills the connection up to its last completed request; what follows waits for an owner. */
  private release(conn: Metered): void {
    const b = conn.budget;
    if (!b) return;
    this.collectToMark(conn);
    b.conns.delete(conn);
    conn.budget = undefined;
  }

  /**
   * A budget ran out: its connections relaying are ended (billed so far). A keep-alive connection
   * between two requests carries none of its bytes: it stays open, unowned, and its next request
   * is admitted afresh (402, or served after a refill) instead of the client meeting a closed
   * connection (unexpected EOF).
   */
  cut(conns: readonly Metered[]): void {
    for (const conn of conns) {
      if (conn.between) this.release(conn);
      else this.end([conn]);
    }
  }

  /** Ends connections (a cut, a revocation): what they delivered so far is billed. Returns how many. */
  end(conns: readonly Metered[]): number {
    for (const conn of conns) {
      this.settle(conn);
      conn.socket.destroy();
      conn.peer?.destroy();
    }
    return conns.length;
  }

  /**
   * Each tick: exact counts replace the estimates of the connections being answered, and idle or
   * over-age connections are closed.
   */
  sweep(now: number): void {
    for (const conn of this.open) {
      // A request between its admission and its answer may still be refused (not billed), and the
      // next request's head has no owner before its admission: their bytes wait (estimated).
      if (conn.between) this.collectToMark(conn);
      else if (!conn.answering) this.settle(conn);
      if (conn.moved()) conn.lastActive = now;
      else if (now - conn.lastActive > this.limits.idleMs) conn.socket.destroy();
      if (now - conn.startedAt > this.limits.maxLifetimeMs) conn.socket.destroy();
    }
  }

  /** Bills everything every open connection delivered so far (the final flush). */
  settleAll(): void {
    for (const conn of this.open) this.settle(conn);
  }

  private untrack(conn: Metered): void {
    if (conn.closed) return;
    this.settle(conn);
    conn.closed = true;
    conn.budget?.conns.delete(conn);
    this.open.delete(conn);
  }

  /** Bills the connection up to the end of its last completed request. */
  private collectToMark(conn: Metered): void {
    if (conn.budget) this.collect(conn, conn.markIn, Math.min(conn.markOut, conn.delivered()));
  }

  /** Bills everything delivered so far. */
  private settle(conn: Metered): void {
    if (conn.budget) this.collect(conn, conn.wire.bytesRead, conn.delivered());
  }

  private collect(conn: Metered, inNow: number, outNow: number): void {
    const b = conn.budget!;
    // The exact counts replace the connection's chunks in the estimate. A tick restarts the whole
    // estimate anyway; a connection that closes between two ticks would otherwise be counted
    // twice until the next one, and the budget's other connections cut for it (hold.int.test.ts).
    b.state.estimate = Math.max(0, b.state.estimate - conn.estimated);
    conn.estimated = 0;
    const up = Math.max(0, inNow - conn.billedIn);
    const down = Math.max(0, outNow - conn.billedOut);
    if (up === 0 && down === 0) return;
    conn.billedIn += up;
    conn.billedOut += down;
    b.bytesUp += up;
    b.bytesDown += down;
    allocate(b.state, up + down);
    if (up) this.hot.bytesUp.inc(up);
    if (down) this.hot.bytesDown.inc(down);
  }
}
