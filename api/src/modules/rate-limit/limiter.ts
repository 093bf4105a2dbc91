// A rate limiter shared by every API process without Redis (docs/adr/0011): the bucket lives in
// PostgreSQL (GCRA, one statement), and a process takes tokens from it in small leases that it
// spends locally. The limit holds across processes because tokens a process holds were taken from
// the shared bucket; leased-but-unspent tokens are dropped after LEASE_TTL_MS (lost, never granted
// twice). Lease sizes adapt to the key's rate: they start at 1, double while a lease is used up
// within its lifetime, shrink to what was used otherwise, and never exceed a tenth of the burst.
import { takeTokens } from './repo.ts';
import type { Pool } from '#common/db/pool.ts';

/** Leased tokens not spent within this time are given up (keeps the rate honest). */
export const LEASE_TTL_MS = 1_000;
const LEASE_SHARE_OF_BURST = 0.1;
const MAX_LOCAL_BUCKETS = 100_000;

export interface LimitPolicy {
  /** Name in the RateLimit-Policy header. */
  name: string;
  perMinute: number;
  burst: number;
}

export type Decision =
  | { allowed: true; limit: number; remaining: number; resetSeconds: number }
  | { allowed: false; limit: number; retryAfterSeconds: number };

interface Lease {
  granted: number;
  tokens: number;
  /** Tokens the shared bucket still had when this lease was taken. */
  sharedRemaining: number;
  expiresAt: number;
}

export class RateLimiter {
  readonly policy: LimitPolicy;
  private readonly intervalUs: number;
  private readonly maxLease: number;
  private readonly leases = new Map<string, Lease>();
  /** Buckets known to be empty until a time: refused without a database round trip. */
  private readonly blocked = new Map<string, number>();
  private readonly inflight = new Map<string, Promise<Decision>>();
  private readonly pool: Pool;
  private readonly now: () => number;

  constructor(pool: Pool, policy: LimitPolicy, now: () => number = Date.now) {
    this.pool = pool;
    this.policy = policy;
    this.now = now;
    this.intervalUs = Math.max(1, Math.round(60_000_000 / policy.perMinute));
    this.maxLease = Math.max(1, Math.floor(policy.burst * LEASE_SHARE_OF_BURST));
  }

  /** Seconds for a drained bucket to fill again: the policy's window. */
  get windowSeconds(): number {
    return Math.ceil((this.intervalUs * this.policy.burst) / 1e6);
  }

  /** Seconds left when the bucket is known (locally) to be empty; no round trip. */
  isBlocked(bucket: string): number | undefined {
    const until = this.blocked.get(bucket);
    if (until === undefined) return undefined;
    const left = until - this.now();
    if (left > 0) return Math.ceil(left / 1000);
    this.blocked.delete(bucket);
    return undefined;
  }

  /** Takes one token from `bucket`. */
  async take(bucket: string): Promise<Decision> {
    const blockedFor = this.isBlocked(bucket);
    if (blockedFor !== undefined)
      return { allowed: false, limit: this.policy.burst, retryAfterSeconds: blockedFor };
    const lease = this.leases.get(bucket);
    if (lease && lease.expiresAt > this.now() && lease.tokens > 0) {
      lease.tokens -= 1;
      return this.allowed(lease);
    }
    // Concurrent requests for one bucket share a single refill instead of each asking the database.
    const pending = this.inflight.get(bucket);
    if (pending) {
      await pending;
      return this.take(bucket);
    }
    const refill = this.refill(bucket, lease).finally(() => this.inflight.delete(bucket));
    this.inflight.set(bucket, refill);
    return refill;
  }

  private nextLeaseSize(previous: Lease | undefined): number {
    if (!previous) return 1;
    const usedUp = previous.tokens === 0 && previous.expiresAt > this.now();
    const size = usedUp ? previous.granted * 2 : previous.granted - previous.tokens;
    return Math.min(this.maxLease, Math.max(1, size));
  }

  private async refill(bucket: string, previous: Lease | undefined): Promise<Decision> {
    const result = await takeTokens(
      this.pool,
      bucket,
      this.intervalUs,
      this.policy.burst,
      this.nextLeaseSize(previous),
    );
    const now = this.now();
    this.leases.delete(bucket);
    if (result.granted === 0) {
      this.blocked.set(bucket, now + result.retryAfterMs);
      if (this.blocked.size > MAX_LOCAL_BUCKETS) this.blocked.delete(this.blocked.keys().next().value!);
      return {
        allowed: false,
        limit: this.policy.burst,
        retryAfterSeconds: Math.max(1, Math.ceil(result.retryAfterMs / 1000)),
      };
    }
    const lease = {
      granted: result.granted,
      tokens: result.granted - 1,
      sharedRemaining: result.remaining,
      expiresAt: now + LEASE_TTL_MS,
    };
    this.leases.set(bucket, lease);
    if (this.leases.size > MAX_LOCAL_BUCKETS) this.leases.delete(this.leases.keys().next().value!);
    return this.allowed(lease);
  }

  private allowed(lease: Lease): Decision {
    const remaining = lease.sharedRemaining + lease.tokens;
    // Time for the bucket to fill from `remaining` to full.
    const resetSeconds = Math.ceil(((this.policy.burst - remaining) * this.intervalUs) / 1e6);
    return { allowed: true, limit: this.policy.burst, remaining, resetSeconds };
  }
}
