// GET /api/v1/usage: the account's usage snapshot, shared by every API process through its table,
// recomputed at most every PROXYFLEET_USAGE_REFRESH_SECONDS (spec section 4: 30 s). Each process
// keeps the row it read until the row's age reaches the interval, or a purchase changes the
// account's balances (change feed 'balance').
import type { Pool } from '#common/db/pool.ts';
import type { Change, ChangeSource } from '#common/db/changes.ts';
import { bandwidthIn } from '#common/billing/remaining.ts';
import { BYTES_PER_GB, BYTES_PER_MB, PRODUCTS, type Product } from '#common/products.ts';
import { readFreshSnapshot, recomputeSnapshot, type SnapshotRow } from './repo.ts';
import type { UsageResponse } from './schemas.ts';

export interface Snapshot {
  row: SnapshotRow;
  /** Local time after which the row is older than the refresh interval. */
  expiresAt: number;
}

const MAX_CACHED = 100_000;
const round = (value: number, digits: number) => Number(value.toFixed(digits));
export const gb = (bytes: number) => round(bytes / BYTES_PER_GB, 3);
const mb = (bytes: number) => round(bytes / BYTES_PER_MB, 2);

export class UsageService {
  private readonly cache = new Map<string, Snapshot>();
  private readonly pool: Pool;
  private readonly feed: ChangeSource;
  private readonly refreshSeconds: number;

  constructor(pool: Pool, feed: ChangeSource, refreshSeconds: number) {
    this.pool = pool;
    this.feed = feed;
    this.refreshSeconds = refreshSeconds;
    feed.onChanges((changes) => this.apply(changes));
  }

  private apply(changes: Change[]): void {
    for (const change of changes) if (change.kind === 'balance') this.cache.delete(change.accountId);
  }

  async snapshot(accountId: string): Promise<Snapshot> {
    // Without a healthy feed a purchase might not evict the copy: read the shared row instead.
    const trusted = this.feed.trusted();
    const cached = trusted ? this.cache.get(accountId) : undefined;
    if (cached && cached.expiresAt > Date.now()) return cached;
    const row =
      (await readFreshSnapshot(this.pool, accountId, this.refreshSeconds)) ??
      (await recomputeSnapshot(this.pool, accountId, this.refreshSeconds)) ??
      (await readFreshSnapshot(this.pool, accountId, this.refreshSeconds));
    if (!row) throw new Error('usage snapshot vanished while it was being read');
    const snapshot = { row, expiresAt: Date.now() + this.refreshSeconds * 1000 - row.ageMs };
    if (this.cache.size >= MAX_CACHED) this.cache.clear();
    this.cache.set(accountId, snapshot);
    return snapshot;
  }

  /**
   * The answer of GET /usage and how many whole seconds it stays the answer: until its snapshot is
   * older than the refresh interval (docs/adr/0100). A purchase may show sooner.
   */
  async usageAnswer(accountId: string): Promise<{ body: UsageResponse; freshForSeconds: number }> {
    const { row, expiresAt } = await this.snapshot(accountId);
    const freshForSeconds = Math.min(
      this.refreshSeconds,
      Math.max(0, Math.ceil((expiresAt - Date.now()) / 1000)),
    );
    return { body: toUsageResponse(row), freshForSeconds };
  }
}

export function productBalances(
  row: SnapshotRow,
): Record<Product, { total: number; used: number; remaining: number }> {
  const out = {} as Record<Product, { total: number; used: number; remaining: number }>;
  for (const product of PRODUCTS) {
    const b = row.balances[product];
    const total = b?.total ?? 0;
    const used = b?.used ?? 0;
    out[product] = { total, used, remaining: Math.max(0, total - used) };
  }
  return out;
}

export function toUsageResponse(row: SnapshotRow): UsageResponse {
  const balances = productBalances(row);
  let total = 0;
  let used = 0;
  let remaining = 0;
  const products = {} as UsageResponse['products'];
  for (const product of PRODUCTS) {
    const b = balances[product];
    total += b.total;
    used += b.used;
    remaining += b.remaining;
    // Remaining by the one rule of pages and emails (rounded down, never 0 while bytes remain).
    products[product] = {
      totalGb: gb(b.total),
      usedGb: gb(b.used),
      remainingGb: bandwidthIn('GB', b.remaining),
    };
  }
  return {
    success: true,
    products,
    dataUsedMb: mb(used),
    dataLimitMb: mb(total),
    dataRemainingMb: bandwidthIn('MB', remaining),
    percentUsed: total > 0 ? round((used / total) * 100, 2) : 0,
    requestsCount: row.requestsCount,
    updatedAt: row.computedAt.toISOString(),
  };
}
