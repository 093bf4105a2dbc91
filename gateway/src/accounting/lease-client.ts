// The lease client: draws bandwidth leases from the database with lease_acquire
// (migrations/0020; raising balances.leased_bytes there also fires the auto-refill check,
// migrations/0060), with a client-side query timeout so a hung connection counts as an outage
// instead of leaving the customer without an answer. Leases go back with the usage batches
// (usage_record's releases, flusher.ts).
import type { Pool } from '#common/db/pool.ts';
import type { Plan } from '../spec.ts';
import { LEASE_TTL_SECONDS, MIN_LEASE_BYTES } from './policy.ts';

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
  | { kind: 'denied'; held: number; stranded: number; subUserLimited?: boolean }
  /** The database could not be asked (unreachable, or no answer in time). */
  | { kind: 'failed'; error: Error };

export class LeaseClient {
  private readonly pool: Pool;
  private readonly gatewayId: string;

  constructor(pool: Pool, gatewayId: string) {
    this.pool = pool;
    this.gatewayId = gatewayId;
  }

  /** `subUserId`: a sub-user's budget, granted no more than its limit leaves (migrations/0085). */
  async acquire(
    accountId: string,
    product: Plan,
    wanted: number,
    now: () => number,
    subUserId?: string,
  ): Promise<LeaseAnswer> {
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
        }>('SELECT * FROM lease_acquire($1, $2, $3, $4, $5, $6, $7)', [
          accountId,
          product,
          this.gatewayId,
          wanted,
          MIN_LEASE_BYTES,
          LEASE_TTL_SECONDS,
          subUserId ?? null,
        ]),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`lease request timed out after ${LEASE_QUERY_TIMEOUT_MS} ms`)),
            LEASE_QUERY_TIMEOUT_MS,
          );
        }),
      ]);
      const row = rows[0];
      if (!row || !row.out_lease_id || row.out_granted <= 0) {
        const held = row?.out_held ?? 0;
        // The sub-user's limit: `held` is its own leases', of which lease_stranded knows nothing.
        if (row?.out_sub_user_limited) return { kind: 'denied', held, stranded: 0, subUserLimited: true };
        return { kind: 'denied', held, stranded: held > 0 ? await this.stranded(accountId, product) : 0 };
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
