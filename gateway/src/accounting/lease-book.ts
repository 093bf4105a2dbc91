// The lease book of one budget: the bytes charged to its leases (oldest first, the overdraft on
// the last), what each flush reports spent and returns, and what is given back when another
// gateway needs it (docs/adr/0073). Plain functions of the budget's state, as policy.ts: the
// invariant is that a lease's `spent` only grows, and after every change the derived fields
// (available, trigger) are recomputed (policy.recompute) before anyone reads them.
import {
  LEASE_RENEW_MARGIN_MS,
  LEASE_TARGET_SECONDS,
  MIN_LEASE_BYTES,
  recompute,
  settleDrawAt,
} from './policy.ts';
import type { BudgetState, LeaseState } from './budget-state.ts';

/** Exact bytes (from socket counters) charged to the leases, oldest first. */
export function allocate(s: BudgetState, n: number): void {
  s.rateBytes += n;
  s.allocated += n;
  let left = n;
  for (const lease of s.leases) {
    if (left === 0) break;
    const room = lease.granted - lease.spent;
    if (room <= 0) continue;
    const take = Math.min(room, left);
    lease.spent += take;
    left -= take;
  }
  // Past every lease (overdraft, or no lease left): charged to the last lease so the database
  // folds it as used; bytes with no lease at all are still billed through the usage lines. Either
  // way they count against the one overdraft until a grant or credit covers them: a flush hands a
  // spent lease back, and what it was overrun by must not go with it.
  const last = s.leases.at(-1);
  if (left > 0 && last) last.spent += left;
  s.overdraft += left;
  recompute(s);
}

/** What a budget keeps of its leases when another gateway needs bytes: about 2 s at its rate. */
export const GIVE_BACK_KEEP_SECONDS = 2;

/**
 * Another gateway was refused what this budget's leases hold (docs/adr/0073): lower the newest
 * leases' grants so that what they still hold beyond the estimate is about GIVE_BACK_KEEP_SECONDS
 * of the budget's rate (at least a minimum lease). Returns the leases lowered, with their new grant,
 * for the database (lease_shrink); outage credit is not given back.
 */
export function giveBack(s: BudgetState): [string, number][] {
  const keep = Math.max(
    MIN_LEASE_BYTES,
    Math.round((s.wanted * GIVE_BACK_KEEP_SECONDS) / LEASE_TARGET_SECONDS),
  );
  let surplus = s.available - s.estimate - keep;
  const cuts: [string, number][] = [];
  for (let i = s.leases.length - 1; i >= 0 && surplus > 0; i--) {
    const lease = s.leases[i]!;
    const cut = Math.min(surplus, lease.granted - lease.spent);
    if (!lease.id || cut <= 0) continue;
    lease.granted -= cut;
    surplus -= cut;
    cuts.push([lease.id, lease.granted]);
  }
  if (cuts.length) settleDrawAt(s);
  recompute(s);
  return cuts;
}

export interface LeaseSettlement {
  /** Bytes spent per database lease since the last flush. */
  spends: [string, number][];
  /** Leases returned, with everything spent on them. */
  releases: [string, number][];
}

/**
 * At each flush: what was spent on each lease since the last one, and which leases go back. The
 * last lease, once spent, stays to absorb the overdraft while its successor is asked for; it goes
 * back when nothing more was granted or it is about to expire. Everything goes back when the
 * budget is idle or the gateway stops.
 */
export function settleLeases(s: BudgetState, now: number, returnAll: boolean): LeaseSettlement {
  const out: LeaseSettlement = { spends: [], releases: [] };
  const keep: LeaseState[] = [];
  for (const [i, lease] of s.leases.entries()) {
    const delta = lease.spent - lease.flushed;
    if (lease.id && delta > 0) out.spends.push([lease.id, delta]);
    lease.flushed = lease.spent;
    const last = i === s.leases.length - 1;
    const exhausted = lease.spent >= lease.granted;
    const release =
      returnAll ||
      (exhausted && (!last || s.deniedAt !== 0 || lease.expiresAt - now < LEASE_RENEW_MARGIN_MS));
    if (release) {
      if (lease.id) out.releases.push([lease.id, lease.spent]);
    } else {
      keep.push(lease);
    }
  }
  s.leases = keep;
  recompute(s);
  return out;
}
