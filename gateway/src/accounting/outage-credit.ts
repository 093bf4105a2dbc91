// Outage credit (docs/adr/0021, 0024): while the database cannot be asked, a customer this gateway
// already served (even one whose budget went idle and was dropped) keeps going on its share of the
// fleet's bounded credit; an unknown one is answered 503 until the database is back (never 402:
// its balance is not known). This module keeps what sizes that credit: the accounts this gateway
// was granted leases for, when, and what the database then said was still free.
//
// The invariant: the budgets of one account on this gateway (its own and its sub-users',
// docs/adr/0037) share one credit per outage, at most policy.outageCredit(last free balance, fleet
// size), so the fleet together gives no more than the account had; the memory is bounded
// (SERVED_LIMIT accounts, each remembered SERVED_MEMORY_MS).
import type { Budget } from './meter.ts';
import * as policy from './policy.ts';

/** How long an account served here is remembered (outage credit survives idle budgets). */
const SERVED_MEMORY_MS = 24 * 3600_000;
const SERVED_LIMIT = 200_000;

export class OutageCredit {
  /** Per account: when it was last granted a lease, what was then free, what credit it was given since. */
  private readonly served = new Map<string, { at: number; free: number; credited: number }>();
  /** How many gateways serve this plan now: they share the credit. */
  private readonly fleetSize: () => number;

  constructor(fleetSize: () => number) {
    this.fleetSize = fleetSize;
  }

  /** The database granted the budget a lease, `free` being what it said was still free after it. */
  granted(b: Budget, free: number, subUserLimited: boolean, now: number): void {
    // What a sub-user's limit leaves says nothing of the account's balance, which sizes the
    // outage credit of all its budgets: keep the balance last known.
    this.remember(b.accountId, subUserLimited ? (this.served.get(b.accountId)?.free ?? free) : free, now);
  }

  /** The database said nothing is free for the budget: its account gets no credit in the next outage. */
  denied(b: Budget, subUserLimited: boolean): void {
    const served = this.served.get(b.accountId);
    // A sub-user's limit says nothing about the account's balance.
    if (served && !subUserLimited) served.free = 0;
  }

  /**
   * The budget's lease request failed (the database could not be asked): it is served on credit if
   * its account is known here and has credit left in this outage (policy.failed), else refused
   * with 503 until the database answers. Returns the credit given (0: none).
   */
  unreachable(b: Budget, now: number): number {
    const s = b.state;
    const served = this.served.get(b.accountId);
    const known = s.everGranted || (served !== undefined && now - served.at < SERVED_MEMORY_MS);
    // What one budget of the account was given is not given again to another. A sub-user its
    // limit last denied gets none: the credit would run past the limit it reached.
    const shared = b.subUserId !== undefined || b.group.budgets.size > 1;
    const credit = s.subUserLimited
      ? 0
      : Math.max(
          0,
          policy.outageCredit(served?.free ?? 0, this.fleetSize()) - (shared ? (served?.credited ?? 0) : 0),
        );
    if (!policy.failed(s, known, credit, now)) return 0;
    if (served) served.credited += credit;
    return credit;
  }

  /** A grant: the database is back, the next outage gives credit again. */
  remember(accountId: string, free: number, now: number): void {
    if (this.served.size >= SERVED_LIMIT && !this.served.has(accountId)) {
      const cutoff = now - SERVED_MEMORY_MS;
      for (const [id, entry] of this.served) if (entry.at < cutoff) this.served.delete(id);
      if (this.served.size >= SERVED_LIMIT) this.served.clear();
    }
    this.served.set(accountId, { at: now, free, credited: 0 });
  }
}
