// The budget and lease core of one gateway (docs/adr/0020, 0024): one budget per account and per
// sub-user served here (docs/adr/0037), each spending bandwidth leases drawn from the database. It
// runs the pure policy (policy.ts) against real leases and connections: when a budget's estimate
// crosses its trigger it cuts, holds or draws; a draw asks the lease client (lease-client.ts) and
// waits while other gateways give back (untilGivenBack); a failed draw is answered by the outage
// credit (outage-credit.ts); a cut ends the budget's connections (connections.ts).
//
// The invariant is policy.ts's bound: what a budget serves never passes its leases, plus the
// OVERDRAFT_BYTES its account's budgets on this gateway share while a grant is pending, plus
// PER_CONNECTION_SLACK_BYTES per open connection (plus its outage credit during an outage). A
// budget has at most one draw pending; its streams are held while it runs past HOLD_AT_BYTES.
import type { Logger } from '#common/logger.ts';
import type { GatewayMetrics } from '../metrics.ts';
import type { Plan } from '../spec.ts';
import type { Connections } from './connections.ts';
import { giveBack } from './lease-book.ts';
import { untilGivenBack, type LeaseClient } from './lease-client.ts';
import { Budget, BudgetGroup, HOLD_LEASE } from './meter.ts';
import type { OutageCredit } from './outage-credit.ts';
import * as policy from './policy.ts';
import type { Throttle } from './throttle.ts';

/** The parts the core works with (the ledger composes them, ledger.ts). */
export interface BudgetsParts {
  plan: Plan;
  logger: Logger;
  metrics: GatewayMetrics;
  leases: Pick<LeaseClient, 'acquireOrWait' | 'shrink'>;
  connections: Connections;
  outage: OutageCredit;
  throttle: Throttle;
}

/** The budget's map key: the account's own traffic, or one of its sub-users'. */
const budgetKey = (accountId: string, subUserId?: string) =>
  subUserId === undefined ? accountId : `${accountId}/${subUserId}`;

export class Budgets {
  /** Per account, and per sub-user as `account/sub-user` (budgetKey). */
  private readonly budgets = new Map<string, Budget>();
  /** The budgets of each account on this gateway (they share the overdraft, caps and the account's cap). */
  private readonly groups = new Map<string, BudgetGroup>();
  private readonly parts: BudgetsParts;
  /** The last lease request or usage batch could not reach the database. */
  databaseDown = false;
  /** When a lease request last failed (0: never): the give-back wait is longer right after. */
  private lastFailureAt = 0;

  constructor(parts: BudgetsParts) {
    this.parts = parts;
  }

  /** The budget of an account's own traffic, or of one of its sub-users (docs/adr/0037). */
  get(accountId: string, subUserId?: string): Budget {
    const key = budgetKey(accountId, subUserId);
    let b = this.budgets.get(key);
    if (!b) {
      let g = this.groups.get(accountId);
      if (!g) {
        g = new BudgetGroup(accountId);
        this.groups.set(accountId, g);
      }
      b = new Budget(accountId, this.parts.plan, g, subUserId);
      g.budgets.add(b);
      this.budgets.set(key, b);
      this.regroup(g);
      this.parts.throttle.joined(b, performance.now());
    }
    return b;
  }

  /** The budget, if it is live here. */
  find(accountId: string, subUserId?: string): Budget | undefined {
    return this.budgets.get(budgetKey(accountId, subUserId));
  }

  /** The budgets of an account live here, if any. */
  group(accountId: string): BudgetGroup | undefined {
    return this.groups.get(accountId);
  }

  /** Every live budget, with its key for `drop`. */
  entries(): IterableIterator<[string, Budget]> {
    return this.budgets.entries();
  }

  /** A budget leaves (idle, or the gateway stops); its group shares no overdraft with it any more. */
  drop(key: string, b: Budget): void {
    this.budgets.delete(key);
    const g = b.group;
    g.budgets.delete(b);
    this.parts.throttle.left(b);
    if (g.budgets.size === 0) {
      if (this.groups.get(g.accountId) === g) this.groups.delete(g.accountId);
    } else this.regroup(g);
  }

  /** The group's budgets share the overdraft only when there are several (policy.groupPressure). */
  private regroup(g: BudgetGroup): void {
    const grouped = g.budgets.size > 1;
    for (const b of g.budgets) {
      if (b.state.grouped === grouped) continue;
      b.state.grouped = grouped;
      policy.recompute(b.state);
    }
  }

  /**
   * Bandwidth for an admission: at once, refused by a recent denial, or asked of the database
   * (waiting while other gateways give back). 402 only when it said none is left.
   */
  async admit(b: Budget): Promise<ReturnType<typeof policy.verdict>> {
    const s = b.state;
    b.lastActive = Date.now();
    if (policy.admission(s, Date.now()) !== 'ask') return policy.verdict(s);
    // The draw forgets the denial itself (policy.drawStarted), knowing it was one: what the budget
    // ran past its leases since the last grant is still one overdraft, not covered by this draw.
    await untilGivenBack(
      () => this.draw(b),
      () => policy.waitForContended(s),
      Date.now,
      policy.contendedWaitMs(this.lastFailureAt, Date.now()),
    );
    return policy.verdict(s);
  }

  /** The estimate crossed the trigger: cut, hold or draw, as the policy says (policy.budgetPressure). */
  pressure(b: Budget): void {
    switch (policy.budgetPressure(b.state, b.group.budgets)) {
      case 'cut':
        return this.cut(b);
      case 'draw':
        void this.draw(b);
        return;
      case 'hold':
        return b.hold(HOLD_LEASE);
      case 'none':
        return;
    }
  }

  /**
   * A connection of the budget starts relaying new streams (an answer begins): while the budget is
   * held they start held, before their first chunk (16 answers starting during a hold, one chunk
   * each, ran a budget past its overdraft: prefetch.int.test.ts).
   */
  relaying(b: Budget): void {
    const s = b.state;
    if (s.pending && s.estimate > s.trigger) b.hold(HOLD_LEASE);
    else if (b.holds !== 0) b.hold(0);
  }

  /** Each tick, after the exact counts: the throttle follows the caps, and budgets low on leases draw. */
  tick(elapsedMs: number, now: number): void {
    const clock = performance.now();
    for (const g of this.groups.values()) this.parts.throttle.apply(g, clock);
    for (const b of this.budgets.values()) {
      if (b.conns.size) b.lastActive = now;
      const draw = policy.tick(b.state, elapsedMs, now, b.conns.size > 0);
      for (const conn of b.conns) if (conn.answering) b.state.estimate += conn.estimated;
      if (draw) void this.draw(b);
    }
  }

  /**
   * A purchase, or a sub-user's limit changed (change feed): forget a denial on every budget of
   * the account so the next admission asks again.
   */
  balanceChanged(accountId: string): void {
    const g = this.groups.get(accountId);
    if (g) for (const b of g.budgets) policy.balanceChanged(b.state);
  }

  /** Another gateway needs what this one's leases of the account hold (give-back.ts, lease-book.ts). */
  giveBack(accountId: string): void {
    for (const b of this.groups.get(accountId)?.budgets ?? []) {
      if (b.pending || b.state.deniedAt) continue;
      if (b.conns.size === 0) b.lastActive = 0;
      else this.parts.leases.shrink(giveBack(b.state));
    }
  }

  /** At most one draw per budget: a second asker waits for the one pending. */
  private draw(b: Budget): Promise<void> {
    const s = b.state;
    if (!b.pending) {
      b.pending = this.requestLease(b).finally(() => {
        b.pending = undefined;
        if (policy.drawSettled(s) === 'cut') this.cut(b);
        b.release(HOLD_LEASE);
        if (s.estimate > s.trigger && b.conns.size) this.pressure(b);
      });
    }
    return b.pending;
  }

  /**
   * Asks for a lease (sized and started at once, before the first await) and applies the answer:
   * a grant, a denial, or a failure (outage credit).
   */
  private async requestLease(b: Budget): Promise<void> {
    const { metrics, logger, outage } = this.parts;
    const s = b.state;
    const wanted = policy.leaseRequestSize(s, Date.now());
    policy.drawStarted(s);
    const answer = await this.parts.leases.acquireOrWait(
      b,
      wanted,
      Date.now,
      policy.contendedWaitMs(this.lastFailureAt, Date.now()),
    );
    const now = Date.now();
    this.databaseDown = answer.kind === 'failed';
    if (answer.kind === 'failed') {
      this.lastFailureAt = now;
      const credit = outage.unreachable(b, now);
      if (credit > 0)
        logger.warn(
          { err: answer.error.message, account: b.accountId, credit },
          'lease request failed; serving on outage credit',
        );
      else logger.warn({ err: answer.error.message }, 'lease request failed');
    } else if (answer.kind === 'denied') {
      const subUserLimited = answer.subUserLimited ?? false;
      policy.denied(s, answer.held, now, answer.stranded, subUserLimited);
      outage.denied(b, subUserLimited);
      metrics.leaseDenials.inc({ plan: b.product });
    } else {
      policy.granted(s, answer, answer.held, now);
      outage.granted(b, answer.free, answer.subUserLimited ?? false, now);
      metrics.leaseGrants.inc({ plan: b.product });
      metrics.leaseGrantedBytes.inc({ plan: b.product }, answer.granted);
    }
  }

  /** Cuts every connection of a budget that has run out. */
  private cut(b: Budget): void {
    this.parts.metrics.budgetCuts.inc({ plan: b.product });
    policy.cutOff(b.state);
    const { estimate, available, pending, deniedAt } = b.state;
    // Running out after a denial is the customer's bandwidth ending (info); a cut while the
    // grant is pending or unavailable is the gateway's own doing and worth a look (warn).
    this.parts.logger[deniedAt > 0 && !b.state.unavailable ? 'info' : 'warn'](
      {
        account: b.accountId,
        plan: b.product,
        connections: b.conns.size,
        estimate,
        available,
        pending,
        denied: deniedAt > 0,
      },
      'budget cut: connections closed past the leases',
    );
    this.parts.connections.cut([...b.conns]);
  }
}
