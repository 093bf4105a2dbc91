// The lease client: draws bandwidth leases from the database with lease_acquire
// (migrations/functions/lease_acquire.sql), reporting what the budget relayed on each of its open
// leases, which is billing's usage before the fold (docs/adr/0073: auto-refill is bought before
// traffic stops), with a client-side query timeout so a hung connection counts as an outage
// instead of leaving the customer without an answer. A denial while other gateways' leases hold
// the bytes is asked again while they give them back (untilGivenBack, the one wait of an admission
// and of a running budget's draw). Leases go back with the usage batches (usage_record's releases,
// flusher.ts), or in part when other gateways need them (shrink).
import type { Pool } from '#common/db/pool.ts';
import type { Plan } from '../spec.ts';
import { CONTENDED_POLL_MS, CONTENDED_WAIT_MS, LEASE_TTL_SECONDS, MIN_LEASE_BYTES } from './policy.ts';
import type { BudgetState } from './budget-state.ts';

/** Whose lease: an account's own budget, or one of its sub-users'. */
type BudgetKey = { accountId: string; product: Plan; subUserId?: string | undefined };

/**
 * A lease request that has not answered in this long counts as a database failure (a query on a
 * connection that hangs would otherwise leave the customer with no answer at all).
 */
export const LEASE_QUERY_TIMEOUT_MS = 3_000;

export type LeaseAnswer =
  /** `free`: what the database still had free after this grant; `held`: what leases hold in all. */
  /** `subUserLimited`: the sub-user's limit sized it (`free`: what the limit leaves, not the balance). */
  | {
      kind: 'granted';
      id: string;
      granted: number;
      expiresAt: number;
      free: number;
      held: number;
      subUserLimited?: boolean;
    }
  /**
   * Nothing free; `held`: what other gateways' leases still hold (they may come back);
   * `stranded`: the part held by gateways that stopped heartbeating (back within 30 s);
   * `subUserLimited`: the sub-user's limit decided it (`held`: what the sub-user's leases hold).
   */
  | { kind: 'denied'; held: number; stranded: number; subUserLimited?: boolean; othersHold?: boolean }
  /** The database could not be asked (unreachable, or no answer in time). */
  | { kind: 'failed'; error: Error };

/**
 * What the budget relayed on each database lease it holds (reported with the next draw), at the
 * moment of asking: the exact counts of the last tick and the estimate since, charged as
 * `allocate` would (lease-book.ts) (oldest first, the rest on the last lease; the database caps each at its grant). Without the
 * estimate a fast budget reported a figure up to a tick old and billing saw too much left to refill.
 */
export function relayed(s: BudgetState): [string, number][] {
  let left = s.estimate;
  const spends = s.leases.map((l) => {
    const take = Math.min(Math.max(0, l.granted - l.spent), left);
    left -= take;
    return l.spent + take;
  });
  if (left > 0 && spends.length) spends[spends.length - 1]! += left;
  return s.leases.flatMap((l, i): [string, number][] => (l.id ? [[l.id, spends[i]!]] : []));
}

export class LeaseClient {
  private readonly pool: Pool;
  private readonly gatewayId: string;

  constructor(pool: Pool, gatewayId: string) {
    this.pool = pool;
    this.gatewayId = gatewayId;
  }

  /**
   * A lease for a budget: an account's own, or a sub-user's (`subUserId`: granted no more than its
   * limit leaves, migrations/0085). `relayed`: what the budget relayed on each of its open leases.
   */
  async acquire(
    budget: BudgetKey,
    wanted: number,
    now: () => number,
    relayed: [string, number][] = [],
  ): Promise<LeaseAnswer> {
    const { accountId, product, subUserId } = budget;
    let timer: NodeJS.Timeout | undefined;
    try {
      const { rows } = await Promise.race([
        this.pool.query<{
          out_lease_id: string | null;
          out_granted: number;
          out_expires_at: Date | null;
          out_free: number;
          out_held: number;
          out_sub_user_limited: boolean;
          out_others_hold: boolean;
        }>('SELECT * FROM lease_acquire($1, $2, $3, $4, $5, $6, $7, $8)', [
          accountId,
          product,
          this.gatewayId,
          wanted,
          MIN_LEASE_BYTES,
          LEASE_TTL_SECONDS,
          subUserId ?? null,
          JSON.stringify(relayed.map(([id, spent]) => ({ lease_id: id, spent }))),
        ]),
        new Promise<never>((_, reject) => {
          // The answer gets its turn before the verdict: after a stall of the event loop (a
          // loaded machine, a process just started), Node runs due timers before the I/O that
          // delivers a query's result, so an answer that arrived in time lost to this timer and
          // an unknown customer got 503 (a stream refused before any refill). setImmediate runs
          // after that I/O: only an answer that has not arrived is late (docs/gateway.md).
          timer = setTimeout(
            () =>
              setImmediate(() =>
                reject(new Error(`lease request timed out after ${LEASE_QUERY_TIMEOUT_MS} ms`)),
              ),
            LEASE_QUERY_TIMEOUT_MS,
          );
        }),
      ]);
      const row = rows[0];
      if (!row || !row.out_lease_id || row.out_granted <= 0) {
        const held = row?.out_held ?? 0;
        // The sub-user's limit: `held` is its own leases', of which lease_stranded knows nothing.
        if (row?.out_sub_user_limited) return { kind: 'denied', held, stranded: 0, subUserLimited: true };
        const stranded = held > 0 ? await this.stranded(accountId, product) : 0;
        return { kind: 'denied', held, stranded, ...(row?.out_others_hold ? { othersHold: true } : {}) };
      }
      return {
        kind: 'granted',
        id: row.out_lease_id,
        granted: row.out_granted,
        expiresAt: row.out_expires_at?.getTime() ?? now() + LEASE_TTL_SECONDS * 1000,
        free: row.out_free,
        held: row.out_held,
        ...(row.out_sub_user_limited ? { subUserLimited: true } : {}),
      };
    } catch (err) {
      return { kind: 'failed', error: err as Error };
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * A budget's lease, reporting what it relayed on its open leases. While its connections run (held
   * meanwhile by the budget's pending draw), a denial while other gateways' leases hold bytes is
   * asked again until it stands, as an admission waits: those gateways give back what they do not
   * need (untilGivenBack; give-back.ts, docs/adr/0073), for up to `waitMs` (policy.contendedWaitMs).
   */
  acquireOrWait(
    budget: BudgetKey & { state: BudgetState; conns: { size: number } },
    wanted: number,
    now: () => number,
    waitMs: number = CONTENDED_WAIT_MS,
  ): Promise<LeaseAnswer> {
    return untilGivenBack(
      () => this.acquire(budget, wanted, now, relayed(budget.state)),
      // A gateway that stopped heartbeating cannot give back (its leases come back when it is dead).
      (answer) =>
        answer.kind === 'denied' &&
        answer.othersHold === true &&
        answer.stranded === 0 &&
        budget.conns.size > 0,
      now,
      waitMs,
    );
  }

  /**
   * Gives back the unspent part of leases another gateway needs (docs/adr/0073): each lease's grant
   * lowered to the given bytes. Not awaited by the ledger: a failure leaves the bytes in the lease
   * until it goes back, as before.
   */
  shrink(cuts: [string, number][]): void {
    if (cuts.length === 0) return;
    this.pool
      .query('SELECT lease_shrink($1, $2)', [
        this.gatewayId,
        JSON.stringify(cuts.map(([id, granted]) => ({ lease_id: id, granted }))),
      ])
      .catch(() => undefined);
  }

  /** migrations/0081; only after a denial while leases are held. 0 when it cannot be asked. */
  private async stranded(accountId: string, product: Plan): Promise<number> {
    try {
      const { rows } = await this.pool.query<{ stranded: number }>(
        'SELECT lease_stranded($1, $2) AS stranded',
        [accountId, product],
      );
      return Number(rows[0]?.stranded ?? 0);
    } catch {
      return 0;
    }
  }
}

/**
 * Asks until the answer stands: while `contended` says it is "nothing free, but other gateways'
 * leases hold bytes" (they give back what they do not need: give-back.ts, docs/adr/0073), asks
 * again every CONTENDED_POLL_MS, for up to `waitMs` (CONTENDED_WAIT_MS, longer right after an
 * outage: policy.contendedWaitMs). The one wait of both askers: an
 * admission (budgets.ts) and a draw while the budget's connections run (acquireOrWait).
 */
export async function untilGivenBack<T>(
  ask: () => Promise<T>,
  contended: (answer: T) => boolean,
  now: () => number = Date.now,
  waitMs: number = CONTENDED_WAIT_MS,
): Promise<T> {
  const giveUp = now() + waitMs;
  for (;;) {
    const answer = await ask();
    if (!contended(answer) || now() > giveUp) return answer;
    await new Promise((r) => setTimeout(r, CONTENDED_POLL_MS));
  }
}
