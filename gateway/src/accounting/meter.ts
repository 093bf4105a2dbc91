// The meter: per-connection byte counters read from the sockets themselves, and the per-budget
// estimate the proxy feeds between two reads (docs/adr/0020).
//
// Billing is exact and comes from the customer socket's own counters: bytesRead, and
// bytesWritten - writableLength (bytes delivered to the kernel, not merely queued). Enforcement
// needs to act between counter reads, so the proxy also adds every relayed chunk to the budget's
// `estimate` (a plain 'data' listener: no stream in the data path); when the estimate crosses the
// budget's trigger the ledger asks the policy what to do. Every tick replaces the estimates with
// the exact counts.
import type net from 'node:net';
import type { Readable } from 'node:stream';
import type { Plan } from '../spec.ts';
import { newBudgetState, type BudgetState } from './policy.ts';

/** A customer connection whose bytes are billed. */
export class Metered {
  readonly socket: net.Socket;
  budget: Budget | undefined;
  /** The other side (upstream) to destroy with it when the budget is cut. */
  peer: net.Socket | undefined;
  /** The streams whose data is relayed to the customer or from them: paused while a grant is pending. */
  sources: Readable[] = [];
  kind: 'http' | 'tunnel' = 'http';
  billedIn = 0;
  billedOut = 0;
  /**
   * This connection's share of its budget's estimate: the chunks relayed since its bytes were
   * last counted exactly. Counting them exactly takes them out of the estimate again.
   */
  estimated = 0;
  /** Counters at the end of the last completed request (bytes after it belong to the next one). */
  markIn = 0;
  markOut = 0;
  readonly startedAt = Date.now();
  lastActive = Date.now();
  private seenIn = 0;
  private seenOut = 0;
  closed = false;

  constructor(socket: net.Socket) {
    this.socket = socket;
  }

  /** Delivered bytes: written to the kernel, not merely queued (gateway.md, byte counting). */
  delivered(): number {
    return this.socket.bytesWritten - this.socket.writableLength;
  }

  /** Marks the end of a request on a keep-alive connection. */
  mark(): void {
    this.markIn = this.socket.bytesRead;
    this.markOut = this.socket.bytesWritten;
  }

  /** True when bytes moved since the last call. */
  moved(): boolean {
    const inNow = this.socket.bytesRead;
    const outNow = this.socket.bytesWritten;
    const moved = inNow !== this.seenIn || outNow !== this.seenOut;
    this.seenIn = inNow;
    this.seenOut = outNow;
    return moved;
  }
}

/** One (account, product) on this gateway: its policy state and what is live on it. */
export class Budget {
  readonly accountId: string;
  readonly product: Plan;
  readonly conns = new Set<Metered>();
  readonly state: BudgetState = newBudgetState();
  pending: Promise<void> | undefined;
  /** Streams paused while a grant is on its way. */
  readonly held = new Set<Readable>();
  lastActive = Date.now();
  bytesUp = 0;
  bytesDown = 0;
  requests = 0;

  constructor(accountId: string, product: Plan) {
    this.accountId = accountId;
    this.product = product;
  }
}
