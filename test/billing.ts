// Test support for billing: a simulated gateway that speaks the gateways' own SQL (lease_acquire
// with what it relayed on its open leases, usage_record with its lines, spends and releases), so
// the money path is tested against the real database functions without sockets; and the billing
// clock (billing_now) moved for month changes.
import { randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from '#common/db/pool.ts';
import { LEASE_TTL_SECONDS, MIN_LEASE_BYTES } from '../gateway/src/accounting/policy.ts';

type Db = Pool | PoolClient;

export interface SimLease {
  id: string;
  granted: number;
  /** Relayed on it (by this gateway's count). */
  spent: number;
  /** The part of `spent` already in a flushed batch. */
  flushed: number;
}

export interface DrawAnswer {
  granted: number;
  held: number;
  free: number;
}

/** One gateway's budget for one (account, product), as the ledger keeps it, minus the sockets. */
export class SimGateway {
  readonly id: string;
  readonly accountId: string;
  readonly product: string;
  leases: SimLease[] = [];
  /** Bytes relayed and not yet in a flushed batch (the usage line of the next flush). */
  unflushed = 0;
  private readonly db: () => Db;

  constructor(db: Db | (() => Db), id: string, accountId: string, product = 'basic') {
    this.db = typeof db === 'function' ? db : () => db;
    this.id = id;
    this.accountId = accountId;
    this.product = product;
  }

  /** What the leases still hold by this gateway's count. */
  get available(): number {
    return this.leases.reduce((sum, l) => sum + Math.max(0, l.granted - l.spent), 0);
  }

  /**
   * A lease request, reporting what was relayed on each open lease (as the ledger does; `spends`:
   * another report, such as the ledger's `policy.relayed`).
   */
  async draw(
    wanted: number,
    min = MIN_LEASE_BYTES,
    relayed?: [string, number][],
  ): Promise<DrawAnswer & { id?: string }> {
    const spends = relayed
      ? relayed.map(([lease_id, spent]) => ({ lease_id, spent }))
      : this.leases.map((l) => ({ lease_id: l.id, spent: l.spent }));
    const { rows } = await this.db().query<{
      out_lease_id: string | null;
      out_granted: number;
      out_held: number;
      out_free: number;
    }>('SELECT * FROM lease_acquire($1, $2, $3, $4, $5, $6, NULL, $7)', [
      this.accountId,
      this.product,
      this.id,
      wanted,
      min,
      LEASE_TTL_SECONDS,
      JSON.stringify(spends),
    ]);
    const row = rows[0]!;
    if (row.out_lease_id && row.out_granted > 0)
      this.leases.push({ id: row.out_lease_id, granted: row.out_granted, spent: 0, flushed: 0 });
    return {
      granted: row.out_granted,
      held: row.out_held,
      free: row.out_free,
      id: row.out_lease_id ?? undefined,
    };
  }

  /** Relays up to `bytes` within what the leases hold, oldest lease first; returns how many. */
  spend(bytes: number): number {
    let left = bytes;
    for (const l of this.leases) {
      const take = Math.min(left, Math.max(0, l.granted - l.spent));
      l.spent += take;
      left -= take;
    }
    this.unflushed += bytes - left;
    return bytes - left;
  }

  /**
   * Relays `bytes`, drawing leases of `leaseBytes` as they run out; returns how many went through
   * before a draw was denied.
   */
  async relay(bytes: number, leaseBytes = 2 * MIN_LEASE_BYTES): Promise<number> {
    let done = 0;
    while (done < bytes) {
      done += this.spend(bytes - done);
      if (done < bytes && (await this.draw(leaseBytes)).granted === 0) break;
    }
    return done;
  }

  /** One usage batch: the line, the spends per lease, and the spent leases (all with `returnAll`). */
  async flush(returnAll = false): Promise<void> {
    const spends = this.leases
      .filter((l) => l.spent > l.flushed)
      .map((l) => ({ lease_id: l.id, bytes: l.spent - l.flushed }));
    const releases = this.leases
      .filter((l) => returnAll || l.spent >= l.granted)
      .map((l) => ({ lease_id: l.id, spent: l.spent }));
    const lines = this.unflushed
      ? [
          {
            account_id: this.accountId,
            product: this.product,
            bytes_up: 0,
            bytes_down: this.unflushed,
            requests: 1,
          },
        ]
      : [];
    if (!lines.length && !spends.length && !releases.length) return;
    await this.db().query('SELECT usage_record($1, $2, $3, $4, $5)', [
      `sim-${randomUUID()}`,
      this.id,
      JSON.stringify(lines),
      JSON.stringify(spends),
      JSON.stringify(releases),
    ]);
    this.unflushed = 0;
    for (const l of this.leases) l.flushed = l.spent;
    const released = new Set(releases.map((r) => r.lease_id));
    this.leases = this.leases.filter((l) => !released.has(l.id));
  }
}

/**
 * An account for billing tests that never sign in or proxy: the account row, its alert settings
 * (the spec's defaults) and `bytes` of `product` bought (an operator purchase). Cheaper than
 * createAccount (no keys, no sealed proxy password) for tests that make hundreds.
 */
export async function billingAccount(db: Db, bytes: number, product = 'basic'): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    `WITH a AS (INSERT INTO accounts (email) VALUES ('billing-' || gen_random_uuid() || '@example.test') RETURNING id),
          s AS (INSERT INTO alert_settings (account_id) SELECT id FROM a)
     SELECT id FROM a`,
  );
  const id = rows[0]!.id;
  await db.query(`SELECT purchase_record($1, $2, $3, 'admin', NULL)`, [id, product, bytes]);
  return id;
}

/** Folds every unfolded batch (the worker's usage-fold job, run to the end). */
export async function foldAll(db: Db): Promise<void> {
  while (((await db.query<{ n: number }>('SELECT usage_fold(1000) AS n')).rows[0]?.n ?? 0) > 0);
}

/** Moves the billing clock (billing_now) by `offset` from the database's now(); null: back to now(). */
export async function setBillingClock(db: Db, offset: string | null): Promise<void> {
  if (offset === null) await db.query('DELETE FROM billing_clock');
  else
    await db.query(
      `INSERT INTO billing_clock (offset_interval) VALUES ($1::interval)
       ON CONFLICT (id) DO UPDATE SET offset_interval = EXCLUDED.offset_interval`,
      [offset],
    );
}

/** The next calendar month (UTC) by the billing clock: the offset that moves billing_now() there. */
export async function nextMonthOffset(db: Db): Promise<string> {
  const { rows } = await db.query<{ offset: string }>(
    `SELECT ((billing_month_start(billing_now()) + interval '1 month' + interval '1 hour') - now())::text AS offset`,
  );
  return rows[0]!.offset;
}
