// The budget policy of one (account, product) on one gateway: when to serve, draw the next lease,
// hold, cut or refuse. What the leases are charged and give back is the lease book's
// (lease-book.ts), the credit of an outage outage-credit.ts's. Plain functions of plain state, the
// time (passed in) and what the database answered: no I/O, no timers, no clock, so every rule is
// unit-tested without sockets or a database (policy.test.ts) and its bound is checked by a
// property test. The budget core (budgets.ts) runs these decisions against real sockets and leases.
//
// The bound (docs/adr/0020, docs/adr/0024): what one gateway serves a budget never passes
//   leases granted + OVERDRAFT_BYTES + open connections x PER_CONNECTION_SLACK_BYTES
//     + (during a database outage) outageCredit(last free balance, fleet size) (outage-credit.ts).
import type { BudgetState } from './budget-state.ts';

/** Smallest lease asked for (the database grants less only when less is left). */
export const MIN_LEASE_BYTES = 256 * 1024;
export const MAX_LEASE_BYTES = 256 * 1024 * 1024;
/** A lease is sized to last about this long at the budget's recent rate. */
export const LEASE_TARGET_SECONDS = 10;
export const LEASE_TTL_SECONDS = 300;
/** Leases are returned this long before they expire, and replaced. */
export const LEASE_RENEW_MARGIN_MS = 30_000;
/** How far a budget may run past its leases while the next grant is on its way (then: cut). */
export const OVERDRAFT_BYTES = 256 * 1024;
/** Past this much overdraft the budget's streams are paused until the grant arrives. */
export const HOLD_AT_BYTES = OVERDRAFT_BYTES / 2;
/**
 * What one open connection can add beyond that (docs/adr/0020): the chunk that crosses the limit
 * in each direction (a socket read is at most 64 KiB), what sits queued in its write buffer when
 * a tick replaces estimates with delivered counts (16 KiB high-water mark plus one chunk), and
 * one header block (16 KiB, Node's maxHeaderSize).
 */
export const PER_CONNECTION_SLACK_BYTES = 2 * 64 * 1024 + (16 + 64) * 1024 + 16 * 1024;
/** After "nothing free", admissions are refused without asking again for this long (or until a purchase). */
export const DENIAL_RECHECK_MS = 2_000;
/**
 * After a lease request failed (the database could not be asked), admissions are refused with 503
 * without asking again for this long only: a failure says nothing about the balance, and a refusal
 * standing DENIAL_RECHECK_MS outlived the database's return. The failover smoke's switchover saw a
 * new customer refused for 1,995 ms after RESUME (docs/adr/0095).
 */
export const UNAVAILABLE_RECHECK_MS = 250;
/**
 * When nothing is free but other gateways hold leases, an admission waits this long for them to
 * come back (idle pods return theirs after the ledger's idle release) before answering 402.
 */
export const CONTENDED_WAIT_MS = 2_000;
/**
 * The give-back wait right after the database was unreachable: the other gateways hear a give-back
 * request through their change feeds, which reconnect after an outage (within a second, jittered:
 * common/src/db/changes.ts), catch up and then shrink their leases on pools that reconnect too.
 * After a promotion that took more than CONTENDED_WAIT_MS in 2 of 10 failover runs, and the
 * admission answered 402 while the balance still had bytes (docs/adr/0095).
 */
export const CONTENDED_WAIT_AFTER_OUTAGE_MS = 5_000;
/** How long after this gateway's last failed lease request the longer give-back wait applies. */
export const OUTAGE_RECOVERY_MS = 10_000;
/**
 * How long a denial while other gateways hold leases waits for them to give back: longer within
 * OUTAGE_RECOVERY_MS of a failed lease request (`lastFailureAt`, 0: none), while the fleet's feeds
 * and pools are coming back. Bounded either way: a customer is answered within 5 s.
 */
export function contendedWaitMs(lastFailureAt: number, now: number): number {
  return lastFailureAt > 0 && now - lastFailureAt < OUTAGE_RECOVERY_MS
    ? CONTENDED_WAIT_AFTER_OUTAGE_MS
    : CONTENDED_WAIT_MS;
}
/** How often a draw denied while other gateways hold leases is asked again meanwhile. */
export const CONTENDED_POLL_MS = 200;
/** A lease spent faster than this makes the next request four times larger. */
export const FAST_SPEND_MS = 2_000;

/** Whether a new connection or request may start now without waiting for the database. */
export function canAdmit(s: BudgetState): boolean {
  return !s.cutOff && s.available - s.estimate > 0;
}

/**
 * Recomputes what the leases hold and the trigger: after a denial, all of it (then cut); while a
 * grant is pending, all of it plus HOLD_AT_BYTES (then hold); otherwise down to `drawAt` (then
 * draw the next lease: prefetch, docs/adr/0024).
 */
export function recompute(s: BudgetState): void {
  let available = 0;
  for (const lease of s.leases) available += Math.max(0, lease.granted - lease.spent);
  s.available = available;
  // While a draw is pending, what the budget already ran past its leases in exact counts
  // (`overdraft`) counts with the estimate: a tick replaces the estimate with those counts, so
  // without it a draw pending over several ticks could overdraw OVERDRAFT_BYTES per tick (the
  // property test found it).
  if (s.deniedAt) s.trigger = Math.max(0, available - s.drawAt);
  else if (s.pending) s.trigger = available + (s.grouped ? 0 : HOLD_AT_BYTES) - s.overdraft;
  else s.trigger = Math.max(0, available - s.drawAt);
}

const clampLease = (n: number) => Math.min(MAX_LEASE_BYTES, Math.max(MIN_LEASE_BYTES, n));

/** Adapts the next lease size to about LEASE_TARGET_SECONDS of the recent rate (each tick). */
export function observeRate(s: BudgetState, elapsedMs: number): void {
  if (elapsedMs <= 0) return;
  const perSecond = (s.rateBytes * 1000) / elapsedMs;
  s.rateBytes = 0;
  const target = clampLease(perSecond * LEASE_TARGET_SECONDS);
  // Grow at once, shrink slowly.
  s.wanted = Math.round(target > s.wanted ? target : s.wanted * 0.9 + target * 0.1);
}

export type PressureDecision = 'cut' | 'hold' | 'draw' | 'redraw' | 'none';

/**
 * The estimate crossed the trigger. After a denial, ask again ('redraw': the ledger forgets the
 * denial and draws, reporting what was spent, so a refill may be bought by that draw, docs/adr/0097)
 * at half of what the leases held, and once more when they are spent; past them after that: cut. While a
 * grant is on its way: past the whole overdraft, cut (the hard bound: a held stream still
 * delivers the chunk it had read, and uploads are not held); past half of it, hold the budget's
 * streams until it arrives. Otherwise draw the next lease.
 */
export function pressure(s: BudgetState): PressureDecision {
  const spent = s.pending ? s.estimate + s.overdraft : s.estimate;
  if (s.deniedAt && !s.pending) {
    if (spent > s.available) return s.lastDrawn ? 'cut' : 'redraw';
    return s.drawAt > 0 ? 'redraw' : 'none';
  }
  if (s.deniedAt ? spent > s.available : spent > s.available + OVERDRAFT_BYTES) return 'cut';
  if (s.pending) return spent > s.available + HOLD_AT_BYTES ? 'hold' : 'none';
  return s.deniedAt ? 'none' : 'draw';
}

/**
 * What a budget has run past its leases while its grant is pending (0 otherwise): the part of the
 * overdraft it uses. The budgets of one account on a gateway share OVERDRAFT_BYTES (docs/adr/0037).
 */
export function pendingOverdraft(s: BudgetState): number {
  return s.pending ? Math.max(0, s.estimate + s.overdraft - s.available) : 0;
}

/**
 * The shared overdraft of an account's budgets on this gateway (`sum` of their pendingOverdraft), asked when one of them crossed its
 * trigger while pending (policy `pressure` said neither cut nor draw): past OVERDRAFT_BYTES in all,
 * cut that budget; past HOLD_AT_BYTES, hold it until its grant arrives.
 */
export function groupPressure(sum: number): 'cut' | 'hold' | 'none' {
  return sum > OVERDRAFT_BYTES ? 'cut' : sum > HOLD_AT_BYTES ? 'hold' : 'none';
}

/**
 * What a budget does when its estimate crossed the trigger, among the budgets of its account on
 * this gateway (`group`, itself included, read only when shared: no copy on the hot path): its own
 * pressure, and while it is pending with others
 * (`grouped`), the overdraft they share (docs/adr/0037): the bound stays one OVERDRAFT_BYTES per
 * account and gateway. A redraw is a draw here (drawStarted forgets the denial).
 */
export function budgetPressure(
  s: BudgetState,
  group: Iterable<{ readonly state: BudgetState }>,
): 'cut' | 'hold' | 'draw' | 'none' {
  switch (pressure(s)) {
    case 'cut':
      return 'cut';
    case 'draw':
    case 'redraw':
      return 'draw';
    case 'hold':
      if (!s.grouped) return 'hold';
      break;
    case 'none':
      if (!(s.grouped && s.pending)) return 'none';
      break;
  }
  let overdraft = 0;
  for (const other of group) overdraft += pendingOverdraft(other.state);
  return groupPressure(overdraft);
}

/**
 * Admission without the database: 'ok', 'refuse' (a recent denial stands) or 'ask' (draw a lease).
 * A denial while other gateways held leases does not stand: they are asked to give back what they
 * do not need (docs/adr/0073), so the admission asks again, and waits for it (waitForContended).
 */
export function admission(s: BudgetState, now: number): 'ok' | 'refuse' | 'ask' {
  if (canAdmit(s)) return 'ok';
  const recheck = s.unavailable ? UNAVAILABLE_RECHECK_MS : DENIAL_RECHECK_MS;
  if (s.deniedAt && !s.contended && now - s.deniedAt < recheck) return 'refuse';
  return 'ask';
}

/**
 * The answer to an admission: 402 only when the database said the balance is gone; 'stranded'
 * when what is left sits in the leases of a gateway that stopped (503: back within 30 s).
 */
export function verdict(s: BudgetState): 'ok' | 'denied' | 'unavailable' | 'stranded' {
  if (canAdmit(s)) return 'ok';
  if (s.unavailable) return 'unavailable';
  return s.stranded ? 'stranded' : 'denied';
}

/**
 * After a draw in an admission: ask again (nothing free, but other gateways may return theirs)?
 * For how long is the give-back wait's (give-back.ts, untilGivenBack).
 */
export function waitForContended(s: BudgetState): boolean {
  // Not while the database cannot be asked: the wait would spend itself on failures and end, once
  // it answers, before the others could give back (a 402 right after a failover, docs/adr/0095).
  return !canAdmit(s) && s.contended && !s.unavailable;
}

/**
 * The size of the lease to ask for now, also recorded as `wanted`. A lease spent within
 * FAST_SPEND_MS was too small: four times more. And sized from the rate observed since the last
 * grant (the prefetch draws at half a lease: the next one must cover the time the database takes
 * to answer and LEASE_TARGET_SECONDS more), not only from the last tick's.
 */
export function leaseRequestSize(s: BudgetState, now: number): number {
  if (s.lastGrantAt && now - s.lastGrantAt < FAST_SPEND_MS)
    s.wanted = Math.min(MAX_LEASE_BYTES, s.wanted * 4);
  if (s.lastGrantAt && now > s.lastGrantAt) {
    const spent = s.allocated + s.estimate - s.spentAtGrant;
    const perSecond = (spent * 1000) / (now - s.lastGrantAt);
    s.wanted = Math.max(s.wanted, clampLease(Math.round(perSecond * LEASE_TARGET_SECONDS)));
  }
  return s.wanted;
}

/**
 * A lease request is sent. A draw after a denial ('redraw') forgets the denial for its time (a new
 * denial settles it again); the one made when the leases are spent is the last before a cut.
 */
export function drawStarted(s: BudgetState): void {
  if (s.deniedAt && s.estimate >= s.available) s.lastDrawn = true;
  // A draw does not restart the overdraft (`overdraft`): after a denial (docs/adr/0097) or a
  // failure that gave no outage credit, what the last draw ran past the leases was neither granted
  // nor covered by credit and still counts; only a grant or credit covers it.
  s.deniedAt = 0;
  s.pending = true;
  recompute(s);
}

export interface Grant {
  id: string;
  granted: number;
  expiresAt: number;
}

/** The database granted a lease. */
export function granted(s: BudgetState, lease: Grant, held: number, now: number): void {
  s.unavailable = false;
  s.subUserLimited = false;
  s.contended = held > 0;
  s.stranded = false;
  s.leases.push({ id: lease.id, granted: lease.granted, spent: 0, flushed: 0, expiresAt: lease.expiresAt });
  s.everGranted = true;
  s.creditUsed = false;
  s.cutOff = false;
  s.lastDrawn = false;
  s.lastGrantAt = now;
  s.spentAtGrant = s.allocated + s.estimate;
  // A grant covers what the budget ran past its leases (the bound is one OVERDRAFT_BYTES per grant
  // on its way, docs/adr/0020; those bytes are billed as used): the next overdraft starts at 0.
  s.overdraft = 0;
  settleDrawAt(s);
}

/** The next lease is drawn when what the leases still hold (after this estimate) is half spent. */
export function settleDrawAt(s: BudgetState): void {
  let holds = 0;
  for (const lease of s.leases) holds += Math.max(0, lease.granted - lease.spent);
  s.drawAt = Math.floor(Math.max(0, holds - s.estimate) / 2);
}

/**
 * The database said nothing is free (`held`: what other leases still hold; `stranded`: the part
 * held by gateways that stopped heartbeating).
 */
export function denied(
  s: BudgetState,
  held: number,
  now: number,
  stranded = 0,
  subUserLimited = false,
): void {
  s.unavailable = false;
  s.subUserLimited = subUserLimited;
  s.contended = held > 0;
  s.stranded = stranded > 0;
  s.deniedAt = now;
  // Ask again when half of what the leases still hold is spent (nothing below a minimum lease's
  // quarter: then only the last draw, when they are spent).
  settleDrawAt(s);
  if (s.drawAt < MIN_LEASE_BYTES / 4) s.drawAt = 0;
}

/**
 * The documented bound (docs/gateway.md "The bound"): at most this many bytes beyond what was
 * bought, for `gateways` gateways with `connectionsPerGateway` open connections each, plus the
 * fleet's outage credit together (`outageCreditBytes`, 0 while the database is up). Tests and the
 * load test judge against this, so the figure exists once.
 */
export function overspendBound(
  gateways: number,
  connectionsPerGateway: number,
  outageCreditBytes = 0,
): number {
  return (
    gateways * (OVERDRAFT_BYTES + connectionsPerGateway * PER_CONNECTION_SLACK_BYTES) + outageCreditBytes
  );
}

/** The budget's connections were cut: admissions wait for the next grant (see `cutOff`). */
export function cutOff(s: BudgetState): void {
  s.cutOff = true;
}

/** The lease request settled (any answer): cut now if a denial leaves the estimate past the leases. */
export function drawSettled(s: BudgetState): 'cut' | 'none' {
  s.pending = false;
  recompute(s);
  return s.deniedAt && s.estimate > s.available ? 'cut' : 'none';
}

/** A purchase: forget a denial so the next admission asks again. */
export function balanceChanged(s: BudgetState): void {
  if (s.deniedAt) {
    s.deniedAt = 0;
    s.lastDrawn = false;
    recompute(s);
  }
}

/**
 * Each tick, after the exact counts were allocated: the estimate restarts, the rate is observed,
 * leases near expiry stop being spent (their unspent part goes back with the next flush). Returns
 * whether to draw the next lease now (less than half a lease left while connections are open).
 */
export function tick(s: BudgetState, elapsedMs: number, now: number, hasConnections: boolean): boolean {
  s.estimate = 0;
  observeRate(s, elapsedMs);
  for (const lease of s.leases)
    if (lease.expiresAt - now < LEASE_RENEW_MARGIN_MS) lease.granted = Math.min(lease.granted, lease.spent);
  recompute(s);
  return (
    (s.available < s.wanted / 2 || s.available <= s.drawAt) && hasConnections && !s.pending && !s.deniedAt
  );
}
