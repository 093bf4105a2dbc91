// In-process cache of valid API keys (sha256 -> key id, account, account status), so an
// authenticated request costs no database round trip (docs/adr/0010). Correctness rests on three
// rules:
//  1. Every change to keys or accounts reaches this cache through the change feed
//     (LISTEN/NOTIFY + change_log catch-up) and evicts the affected entries; from the change
//     relay (docs/adr/0105) the change carries the key's row, which replaces a cached entry.
//  2. The cache is trusted only while the feed is connected and has heard from the database
//     recently; otherwise every lookup goes to the database (and the cache is emptied).
//  3. Admin changes wait until every API process has acknowledged the change's version
//     (modules/sync) before they answer, so "revoked" is true on every process when the call returns.
// Only valid keys are cached; unknown keys always reach the database (and the failure limiter).
import type { Pool } from '#common/db/pool.ts';
import type { Change, ChangeSource } from '#common/db/changes.ts';
import type { AccountStatus } from '#common/accounts/accounts.ts';
import { findKeyByHash, type KeyRow } from './repo.ts';

const MAX_ENTRIES = 100_000;

export interface CachedKey {
  keyId: string;
  accountId: string;
  status: AccountStatus;
}

export class KeyCache {
  private readonly byHash = new Map<string, CachedKey>();
  private readonly byAccount = new Map<string, Set<string>>();
  /** Bumped by every eviction: a lookup that raced with a change does not store its answer. */
  private generation = 0;
  private readonly pool: Pool;
  private readonly feed: ChangeSource;

  constructor(pool: Pool, feed: ChangeSource) {
    this.pool = pool;
    this.feed = feed;
    feed.onChanges((changes) => this.apply(changes));
  }

  get size(): number {
    return this.byHash.size;
  }

  private trusted(): boolean {
    return this.feed.trusted();
  }

  /** The key's row: from the cache when trusted, else from the database. */
  async lookup(hash: Buffer): Promise<KeyRow | undefined> {
    const hex = hash.toString('hex');
    if (this.trusted()) {
      const hit = this.byHash.get(hex);
      if (hit) return { ...hit, revoked: false };
    } else if (this.byHash.size > 0) {
      this.clear();
    }
    const generation = this.generation;
    const row = await findKeyByHash(this.pool, hash);
    if (row && !row.revoked && generation === this.generation && this.trusted()) this.store(hex, row);
    return row;
  }

  private store(hex: string, row: KeyRow): void {
    if (this.byHash.size >= MAX_ENTRIES) this.evictOldest();
    this.byHash.set(hex, { keyId: row.keyId, accountId: row.accountId, status: row.status });
    let hashes = this.byAccount.get(row.accountId);
    if (!hashes) this.byAccount.set(row.accountId, (hashes = new Set()));
    hashes.add(hex);
  }

  private evictOldest(): void {
    const oldest = this.byHash.keys().next();
    if (!oldest.done) this.evict(oldest.value);
  }

  private evict(hex: string): void {
    const entry = this.byHash.get(hex);
    if (!entry) return;
    this.byHash.delete(hex);
    const hashes = this.byAccount.get(entry.accountId);
    hashes?.delete(hex);
    if (hashes?.size === 0) this.byAccount.delete(entry.accountId);
  }

  clear(): void {
    this.generation++;
    this.byHash.clear();
    this.byAccount.clear();
  }

  apply(changes: Change[]): void {
    for (const change of changes) {
      if (change.kind === 'api_key') {
        this.generation++;
        if (!change.subject) continue;
        const cached = this.byHash.has(change.subject);
        this.evict(change.subject);
        // The row as the lookup would read it: a cached key stays cached, with its new facts.
        const row = change.apiKey;
        if (cached && row && !row.revoked) this.store(change.subject, row);
      } else if (change.kind === 'account') {
        this.generation++;
        for (const hex of [...(this.byAccount.get(change.accountId) ?? [])]) this.evict(hex);
      }
    }
  }
}
