// Outage credit (docs/adr/0021, 0024): while the database cannot be asked, a customer this gateway
// already served (even one whose budget went idle and was dropped) keeps going on its share of the
// fleet's bounded credit; an unknown one is answered 503 until the database is back (never 402:
// its balance is not known). This module keeps what sizes that credit: the accounts this gateway
// was granted leases for, when, and what the database then said was still free.
//
// The invariant: the budgets of one account on this gateway (its own and its sub-users',
// docs/adr/0037) share one credit per outage, at most outageCredit(last free balance, fleet
// size), so the fleet together gives no more than the account had; the memory is bounded
// (SERVED_LIMIT accounts, each remembered SERVED_MEMORY_MS). The credit's rules are plain functions
// of the budget's state (outageCredit, failed), as policy.ts's are.
import type { Budget } from './meter.ts';
import type { BudgetState } from './budget-state.ts';
import { settleDrawAt } from './policy.ts';

/**
 * During a database outage a known customer may spend at most this much on credit, in total over
 * the fleet: each gateway gives its share (outageCredit below).
 */
export const OUTAGE_CREDIT_BYTES = 64 * 1024 * 1024;

/**
 * A gateway's share of the fleet-wide outage credit: the fleet together gives at most
 * min(OUTAGE_CREDIT_BYTES, what the database last said was free) (docs/adr/0021).
 */
export function outageCredit(lastFree: number, fleetSize: number): number {
  const size = Number.isFinite(fleetSize) && fleetSize >= 1 ? Math.floor(fleetSize) : 1;
  return Math.floor(Math.min(OUTAGE_CREDIT_BYTES, Math.max(0, lastFree)) / size);
}

/**
 * The lease request failed (database unreachable). A customer this gateway served before gets its
 * share of the outage credit once per outage; without credit admissions are refused with 503
 * (never 402: the balance is not known). Returns whether credit was given.
 */
export function failed(s: BudgetState, known: boolean, credit: number, now: number): boolean {
  if (known && !s.creditUsed && credit > 0) {
    s.everGranted = true;
    s.unavailable = false;
    s.creditUsed = true;
    s.cutOff = false;
    // The credit covers the overdraft run so far up to its size (docs/adr/0097): a credit smaller
    // than it (a last free balance near 0) let a second OVERDRAFT_BYTES follow the first.
    s.overdraft = Math.max(0, s.overdraft - credit);
    s.leases.push({ id: null, granted: credit, spent: 0, flushed: 0, expiresAt: Number.MAX_SAFE_INTEGER });
    settleDrawAt(s);
    return true;
  }
  s.deniedAt = now;
  s.unavailable = true;
  return false;
}

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
          outageCredit(served?.free ?? 0, this.fleetSize()) - (shared ? (served?.credited ?? 0) : 0),
        );
    if (!failed(s, known, credit, now)) return 0;
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
