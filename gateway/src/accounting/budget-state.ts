// The state of one budget's policy (policy.ts), kept on its Budget (meter.ts): its leases and what
// is derived from them, the estimate the proxy feeds between two exact counts, and what the
// database last answered. Plain data: the policy and the lease book (lease-book.ts) change it, and
// recompute (policy.ts) keeps the derived fields (available, trigger) true after each change.

/** The size of a budget's first lease request (then sized from its rate, policy.leaseRequestSize). */
export const INITIAL_LEASE_BYTES = 4 * 1024 * 1024;

export interface LeaseState {
  /** null: outage credit, not backed by a database lease. */
  id: string | null;
  granted: number;
  spent: number;
  flushed: number;
  expiresAt: number;
}

export interface BudgetState {
  leases: LeaseState[];
  /** Σ unspent granted bytes of the leases, as of the last allocation. */
  available: number;
  /** Bytes relayed since the last tick (the proxy's chunk counts, replaced by exact counts each tick). */
  estimate: number;
  /** When estimate passes this, the ledger asks `pressure` what to do. */
  trigger: number;
  /** A lease request is on its way. */
  pending: boolean;
  /**
   * Exact bytes relayed past every lease, with or without one held, not yet covered by a grant
   * (policy.ts granted: 0) or an outage credit (outage-credit.ts failed: less the credit): the one
   * overdraft, counted across ticks, draws, denials, failures and the spent leases a flush hands
   * back (lease-book.ts allocate adds). Derived from the leases, it was lost with them.
   */
  overdraft: number;
  /** When the database last said nothing is free (0: not denied). */
  deniedAt: number;
  creditUsed: boolean;
  /**
   * The budget's connections were cut past its leases: nothing is admitted again before a grant
   * (or outage credit). Without this, what a cut left unspent (bytes read but never delivered)
   * admitted request after request, each cut a moment later instead of answered 503 or 402.
   */
  cutOff: boolean;
  everGranted: boolean;
  /** The last lease request failed (database unreachable): refuse with 503, never 402. */
  unavailable: boolean;
  /** The last denial came while other gateways held leases (they may come back). */
  contended: boolean;
  /** The last denial came while gateways that stopped heartbeating held leases (back within 30 s). */
  stranded: boolean;
  /** The last denial was the sub-user's limit, not the account's balance (docs/adr/0037). */
  subUserLimited: boolean;
  /**
   * Other budgets of the account are live on this gateway: they share the overdraft, so while a
   * grant is pending the ledger is asked as soon as the estimate passes the leases (groupOverdraft).
   */
  grouped: boolean;
  lastGrantAt: number;
  /** Size of the next lease request. */
  wanted: number;
  /** Bytes allocated since the last rate observation. */
  rateBytes: number;
  /** Prefetch: the next lease is drawn when what the leases hold falls to this (half of it at the last grant). */
  drawAt: number;
  /** Bytes allocated (exact counts) in the budget's life; with `estimate`, what it has spent so far. */
  allocated: number;
  /** allocated + estimate at the last grant: the prefetch measures the rate from there. */
  spentAtGrant: number;
  /**
   * The last draw before a cut was made since the last denial: past the leases it cuts (docs/adr/0097).
   * After a denial the budget draws again at half of what its leases still hold, then once more when
   * they are spent, so that a refill bought by that draw (or by the worker meanwhile) comes first.
   */
  lastDrawn: boolean;
}

export function newBudgetState(): BudgetState {
  return {
    leases: [],
    available: 0,
    estimate: 0,
    trigger: 0,
    pending: false,
    overdraft: 0,
    deniedAt: 0,
    creditUsed: false,
    cutOff: false,
    everGranted: false,
    unavailable: false,
    contended: false,
    stranded: false,
    subUserLimited: false,
    grouped: false,
    lastGrantAt: 0,
    wanted: INITIAL_LEASE_BYTES,
    rateBytes: 0,
    drawAt: 0,
    allocated: 0,
    spentAtGrant: 0,
    lastDrawn: false,
  };
}
