// Bandwidth throttling on one gateway (docs/adr/0035): the scheduler that gives an account's
// budgets their token buckets (bucket.ts) from the caps and the fleet size, takes each relayed
// chunk of a throttled budget from them, holds the budget's streams while a bucket is in debt and
// releases them when it is paid. The budget core (budgets.ts) calls it when a budget is created or
// dropped and on every tick; the ledger (ledger.ts) on a cap change and from the hot path of a
// throttled budget.
import type { GatewayMetrics } from '../metrics.ts';
import * as bucket from './bucket.ts';
import { HOLD_SUB_THROTTLE, HOLD_THROTTLE, type Budget, type BudgetGroup } from './meter.ts';

export interface ThrottleOptions {
  metrics: GatewayMetrics;
  /** How many gateways serve this plan now: each enforces its share of a cap. */
  fleetSize: () => number;
  /** The account's cap on this plan for the whole fleet, bytes per second (0: none). */
  throttle: (accountId: string) => number;
  /** A sub-user's own cap for the whole fleet, bytes per second (0: none). */
  subUserThrottle: (accountId: string, subUserId: string) => number;
}

export class Throttle {
  private readonly opts: ThrottleOptions;

  constructor(opts: ThrottleOptions) {
    this.opts = opts;
  }

  /** A budget joined its account's group: held with the others if the account's bucket is in debt. */
  joined(b: Budget, now: number): void {
    if (b.group.throttleTimer) b.holds |= HOLD_THROTTLE;
    this.apply(b.group, now);
  }

  /** A budget left its group (already removed from it): its timer goes, and the group's with the last. */
  left(b: Budget): void {
    clearTimeout(b.throttleTimer);
    if (b.group.budgets.size === 0) clearTimeout(b.group.throttleTimer);
  }

  /**
   * Sets, changes or removes the token buckets of an account's budgets from the caps and the fleet
   * size: each gateway enforces its share, cap / fleet size (docs/adr/0035). The account's cap is
   * one bucket for the whole group (the account's own budget holds it as its `bucket`); a
   * sub-user's cap is a bucket of its budget's own.
   */
  apply(g: BudgetGroup, now: number): void {
    const fleet = this.opts.fleetSize();
    const cap = this.opts.throttle(g.accountId);
    if (cap <= 0) {
      if (g.bucket !== undefined) {
        g.bucket = undefined;
        clearTimeout(g.throttleTimer);
        g.throttleTimer = undefined;
        for (const b of g.budgets) b.release(HOLD_THROTTLE);
      }
    } else {
      const rate = bucket.perPodRate(cap, fleet);
      if (g.bucket === undefined) g.bucket = bucket.newBucket(rate, now);
      else if (g.bucket.rate !== rate) {
        bucket.setRate(g.bucket, rate, now);
        // A held group waits for its debt at the new rate (sooner when the cap was raised).
        if (g.throttleTimer) this.scheduleGroupUnthrottle(g, bucket.waitMs(g.bucket));
      }
    }
    for (const b of g.budgets) {
      if (b.subUserId === undefined) b.bucket = g.bucket;
      else this.applySubUser(b, this.opts.subUserThrottle(b.accountId, b.subUserId), fleet, now);
      b.throttled = b.bucket !== undefined || g.bucket !== undefined;
    }
  }

  private applySubUser(b: Budget, cap: number, fleet: number, now: number): void {
    if (cap <= 0) {
      if (b.bucket === undefined) return;
      b.bucket = undefined;
      clearTimeout(b.throttleTimer);
      b.throttleTimer = undefined;
      b.release(HOLD_SUB_THROTTLE);
      return;
    }
    const rate = bucket.perPodRate(cap, fleet);
    if (b.bucket === undefined) b.bucket = bucket.newBucket(rate, now);
    else if (b.bucket.rate !== rate) {
      bucket.setRate(b.bucket, rate, now);
      if (b.throttleTimer) this.scheduleUnthrottle(b, bucket.waitMs(b.bucket));
    }
  }

  /**
   * Hot path of a throttled budget: a chunk moved. It is taken from the sub-user's own bucket (if
   * any) and from the account's (if any). When it put the sub-user's in debt, that budget's
   * streams are held; when the account's, every budget of the account on this gateway is held,
   * until the debt is paid: one timer per bucket in debt, so the streams move again as soon as the
   * rate allows, not on the next tick (smooth within a chunk per stream).
   */
  take(b: Budget, bytes: number): void {
    const now = performance.now();
    const g = b.group;
    if (b.subUserId !== undefined && b.bucket !== undefined) {
      const wait = bucket.take(b.bucket, bytes, now);
      if (wait > 0 && !b.throttleTimer) {
        this.opts.metrics.throttleHolds.inc({ plan: b.product, scope: 'sub_user' });
        b.hold(HOLD_SUB_THROTTLE);
        this.scheduleUnthrottle(b, wait);
      }
    }
    if (g.bucket === undefined) return;
    const wait = bucket.take(g.bucket, bytes, now);
    if (wait === 0 || g.throttleTimer) return;
    this.opts.metrics.throttleHolds.inc({ plan: b.product, scope: 'account' });
    for (const other of g.budgets) other.hold(HOLD_THROTTLE);
    this.scheduleGroupUnthrottle(g, wait);
  }

  private scheduleUnthrottle(b: Budget, wait: number): void {
    clearTimeout(b.throttleTimer);
    b.throttleTimer = setTimeout(() => this.unthrottle(b), wait);
    b.throttleTimer.unref();
  }

  private scheduleGroupUnthrottle(g: BudgetGroup, wait: number): void {
    clearTimeout(g.throttleTimer);
    g.throttleTimer = setTimeout(() => this.unthrottleGroup(g), wait);
    g.throttleTimer.unref();
  }

  /** A sub-user's debt should be paid: release, or wait again for chunks that arrived while holding. */
  private unthrottle(b: Budget): void {
    b.throttleTimer = undefined;
    const own = b.bucket;
    const wait = own ? (bucket.refill(own, performance.now()), bucket.waitMs(own)) : 0;
    if (wait > 0) return this.scheduleUnthrottle(b, wait);
    b.release(HOLD_SUB_THROTTLE);
  }

  /** The account's debt should be paid: release its budgets, or wait again. */
  private unthrottleGroup(g: BudgetGroup): void {
    g.throttleTimer = undefined;
    const shared = g.bucket;
    const wait = shared ? (bucket.refill(shared, performance.now()), bucket.waitMs(shared)) : 0;
    if (wait > 0) return this.scheduleGroupUnthrottle(g, wait);
    // A released stream that relays at once can put the bucket in debt again (Budget.release):
    // that holds every budget of the account anew, and the rest are not released.
    for (const b of g.budgets) {
      if (g.throttleTimer) break;
      b.release(HOLD_THROTTLE);
    }
  }
}
