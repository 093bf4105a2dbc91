// What the proxy code holds for one admitted request or tunnel (docs/adr/0024): through the tab
// that Ledger.admit returns it counts the request's head and chunks, names the streams to hold,
// marks the request's end, or undoes it when it is refused. The tab calls back into the ledger
// that admitted it; forward.ts and tunnel.ts never touch a budget or a counter themselves.
import type net from 'node:net';
import type { Readable } from 'node:stream';
import type { Budget, Metered } from './meter.ts';

/** What a tab asks of the ledger that admitted it (ledger.ts). */
export interface TabLedger {
  /** The budget's estimate crossed its trigger: cut, hold or draw. */
  pressure(b: Budget): void;
  /** A chunk of a throttled budget moved (throttle.ts). */
  throttled(b: Budget, bytes: number): void;
  /** A connection of the budget starts relaying new streams. */
  relaying(b: Budget): void;
  /** Bills the connection up to its last completed request and leaves it with no owner. */
  detach(conn: Metered): void;
}

/**
 * What the proxy code holds for one admitted request or tunnel: the only way it reaches billing.
 * Bound to the budget it was admitted on (a later request on the same keep-alive connection with
 * other credentials gets its own tab).
 */
export class Tab {
  private readonly ledger: TabLedger;
  private readonly budget: Budget;
  private readonly conn: Metered;

  constructor(ledger: TabLedger, budget: Budget, conn: Metered) {
    this.ledger = ledger;
    this.budget = budget;
    this.conn = conn;
  }

  /** One request (or tunnel) starts: counted, and its head added to the estimate. */
  request(headBytes = 0): void {
    this.budget.requests++;
    if (headBytes) this.onChunk(headBytes);
  }

  /** Hot path: a relayed chunk, either direction (enforcement between two counter reads). */
  onChunk(bytes: number): void {
    const b = this.budget;
    const s = b.state;
    s.estimate += bytes;
    this.conn.estimated += bytes;
    if (s.estimate > s.trigger) this.ledger.pressure(b);
    // Unthrottled budgets pay this one comparison (docs/adr/0035).
    if (b.throttled) this.ledger.throttled(b, bytes);
  }

  /** The streams relayed to or from the customer: paused while the budget waits for a lease. */
  relaying(...sources: Readable[]): void {
    this.conn.answering = false;
    this.conn.between = false;
    this.conn.sources = sources;
    this.ledger.relaying(this.budget);
  }

  /** Whether the ledger holds this stream (a 'drain' must not resume it). */
  isHeld(stream: Readable): boolean {
    return this.budget.held.has(stream);
  }

  /** The connection became a tunnel to `upstream` (destroyed with it when the budget is cut). */
  tunnel(upstream: net.Socket): void {
    this.conn.answering = false;
    this.conn.between = false;
    this.conn.kind = 'tunnel';
    this.conn.peer = upstream;
  }

  /** The request completed: bytes after this belong to the next request on the connection. */
  done(): void {
    this.conn.mark();
  }

  /** The request was refused after admission: bill up to the last completed request only. */
  refused(): void {
    this.ledger.detach(this.conn);
  }
}
