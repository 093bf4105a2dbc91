// The meter: per-connection byte counters read from the sockets themselves, and the per-budget
// estimate the proxy feeds between two reads (docs/adr/0020).
//
// Billing is exact and comes from the customer socket's own counters: bytesRead, and
// bytesWritten - writableLength (bytes delivered to the kernel, not merely queued); for a TLS
// connection, those of the TCP socket under it (wire.ts). Enforcement
// needs to act between counter reads, so the proxy also adds every relayed chunk to the budget's
// `estimate` (a plain 'data' listener: no stream in the data path); when the estimate crosses the
// budget's trigger the ledger asks the policy what to do. Every tick replaces the estimates with
// the exact counts.
import type net from 'node:net';
import type { Readable } from 'node:stream';
import type { Plan } from '../spec.ts';
import { newBudgetState, type BudgetState } from './budget-state.ts';
import type { Bucket } from './bucket.ts';
import { wireOf, type WireCounters } from './wire.ts';

/**
 * Why a budget's streams are held: a grant on its way (docs/adr/0024) or the throttle's bucket in
 * debt (docs/adr/0035). A bit each: releasing one reason never resumes streams another still holds.
 */
export const HOLD_LEASE = 1;
/** The account's bucket (its cap covers all its traffic, sub-users' included) is in debt. */
export const HOLD_THROTTLE = 2;
/** A sub-user's own bucket is in debt (docs/adr/0037). */
export const HOLD_SUB_THROTTLE = 4;

/** A customer connection whose bytes are billed. */
export class Metered {
  readonly socket: net.Socket;
  /** The counters billed: the socket's own, or the TCP socket's under a TLS session (wire.ts). */
  readonly wire: WireCounters;
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
  /**
   * Admitted, not yet answered: the request may still be refused, and a refusal after admission
   * is not billed, so ticks leave its bytes for the answer, the refusal or the close to count
   * (a tick between a CONNECT's admission and the destination's refusal billed its head).
   */
  answering = false;
  /** Counters at the end of the last completed request (bytes after it belong to the next one). */
  markIn = 0;
  markOut = 0;
  /**
   * Between two requests: the last one completed and the next is not admitted yet. Bytes after the
   * mark are the next request's head, whose owner is known only at its admission (a keep-alive
   * connection may switch between the account and its sub-users), so ticks bill up to the mark.
   */
  between = false;
  readonly startedAt = Date.now();
  lastActive = Date.now();
  private seenIn = 0;
  private seenOut = 0;
  closed = false;

  constructor(socket: net.Socket) {
    this.socket = socket;
    this.wire = wireOf(socket);
  }

  /** Delivered bytes: written to the kernel, not merely queued (gateway.md, byte counting). */
  delivered(): number {
    return this.wire.bytesWritten - this.wire.writableLength;
  }

  /** Admitted: a request's answer is on its way (it may still be refused), no longer between two. */
  admitted(): void {
    this.answering = true;
    this.between = false;
  }

  /** Marks the end of a request on a keep-alive connection. */
  mark(): void {
    this.markIn = this.wire.bytesRead;
    this.markOut = this.wire.bytesWritten;
    this.between = true;
  }

  /** True when bytes moved since the last call. */
  moved(): boolean {
    const inNow = this.wire.bytesRead;
    const outNow = this.wire.bytesWritten;
    const moved = inNow !== this.seenIn || outNow !== this.seenOut;
    this.seenIn = inNow;
    this.seenOut = outNow;
    return moved;
  }
}

/**
 * The budgets of one account on this gateway (its own and its sub-users', docs/adr/0037): they
 * share the overdraft while grants are pending, the plan's connection cap and the account's cap.
 */
export class BudgetGroup {
  readonly accountId: string;
  readonly budgets = new Set<Budget>();
  /** The account's token bucket (its cap covers the whole group); undefined: no cap. */
  bucket: Bucket | undefined;
  /** The release of the group's throttle hold. */
  throttleTimer: NodeJS.Timeout | undefined;

  constructor(accountId: string) {
    this.accountId = accountId;
  }

  /** Open connections of every budget of the account on this gateway. */
  connections(): number {
    let n = 0;
    for (const b of this.budgets) n += b.conns.size;
    return n;
  }
}

/** One (account or sub-user, product) on this gateway: its policy state and what is live on it. */
export class Budget {
  readonly accountId: string;
  readonly product: Plan;
  /** Set on a sub-user's budget: its leases are drawn against the sub-user's limit too. */
  readonly subUserId: string | undefined;
  readonly group: BudgetGroup;
  readonly conns = new Set<Metered>();
  readonly state: BudgetState = newBudgetState();
  pending: Promise<void> | undefined;
  /** Streams paused while a reason to hold them stands. */
  readonly held = new Set<Readable>();
  /** The reasons they are held (HOLD_* bits; 0: not held). */
  holds = 0;
  /**
   * The throttle's token bucket: the account's (the group's) on the account's own budget, the
   * sub-user's own cap on a sub-user's budget; undefined: none.
   */
  bucket: Bucket | undefined;
  /** This budget or its group has a bucket (the hot path's one comparison). */
  throttled = false;
  /** The release of a sub-user's own throttle hold, scheduled when its bucket's debt is paid. */
  throttleTimer: NodeJS.Timeout | undefined;
  lastActive = Date.now();
  bytesUp = 0;
  bytesDown = 0;
  requests = 0;

  constructor(accountId: string, product: Plan, group?: BudgetGroup, subUserId?: string) {
    this.accountId = accountId;
    this.product = product;
    this.group = group ?? new BudgetGroup(accountId);
    this.subUserId = subUserId;
  }

  /**
   * Pauses every stream of the budget for `reason` (0: only the streams not yet held, under the
   * reasons already standing), also those already paused by back-pressure: a 'drain' must not
   * resume them meanwhile (docs/adr/0024).
   */
  hold(reason: number): void {
    this.holds |= reason;
    if (this.holds === 0) return;
    for (const conn of this.conns) {
      for (const stream of conn.sources) {
        if (this.held.has(stream)) continue;
        stream.pause();
        this.held.add(stream);
      }
    }
  }

  /**
   * Drops `reason`; the streams resume only when no other reason holds them. A stream may relay at
   * once inside its resume() (the raw upstream client's Valve) and so hold the budget again: the
   * streams not yet resumed then stay paused, and held by that new hold.
   */
  release(reason: number): void {
    this.holds &= ~reason;
    if (this.holds !== 0) return;
    const streams = [...this.held];
    this.held.clear();
    for (const stream of streams) {
      if (this.holds !== 0) break;
      if (!stream.destroyed) stream.resume();
    }
  }
}
