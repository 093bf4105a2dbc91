// GET /api/v1/account, served from a per-process cache of the account view: evicted by the change
// feed on any change to the account, its keys, balances or settings (migrations/0010 announces
// settings changes), and refreshed when its usage snapshot ages out. Like the key cache, it is
// trusted only while the change feed is healthy.
import { AppError } from '#common/errors.ts';
import type { Pool } from '#common/db/pool.ts';
import type { Change, ChangeSource } from '#common/db/changes.ts';
import { MAX_NAMED_KEYS } from '#common/accounts/keys.ts';
import { readCredit } from '#common/billing/credit.ts';
import { gb, toUsageResponse, type UsageService } from '#api/modules/usage/service.ts';
import { readAccount } from './repo.ts';
import type { AccountResponse } from './schemas.ts';

const MAX_CACHED = 100_000;

interface Entry {
  view: AccountResponse;
  /** The view serialised once: GET /api/v1/account sends these bytes. */
  json: Buffer;
  expiresAt: number;
}

export class AccountService {
  private readonly cache = new Map<string, Entry>();
  private generation = 0;
  private readonly pool: Pool;
  private readonly feed: ChangeSource;
  private readonly usage: UsageService;

  constructor(pool: Pool, feed: ChangeSource, usage: UsageService) {
    this.pool = pool;
    this.feed = feed;
    this.usage = usage;
    feed.onChanges((changes) => this.apply(changes));
  }

  private apply(changes: Change[]): void {
    for (const change of changes) {
      if (
        change.kind === 'api_key' ||
        change.kind === 'account' ||
        change.kind === 'balance' ||
        change.kind === 'proxy_credentials'
      ) {
        this.generation++;
        this.cache.delete(change.accountId);
      }
    }
  }

  async view(accountId: string): Promise<AccountResponse> {
    return (await this.entry(accountId)).view;
  }

  async viewJson(accountId: string): Promise<Buffer> {
    return (await this.entry(accountId)).json;
  }

  private async entry(accountId: string): Promise<Entry> {
    const trusted = this.feed.trusted();
    const cached = trusted ? this.cache.get(accountId) : undefined;
    if (cached && cached.expiresAt > Date.now()) return cached;
    const generation = this.generation;
    const record = await readAccount(this.pool, accountId);
    if (!record) throw new AppError('ACCOUNT_NOT_FOUND');
    const snapshot = await this.usage.snapshot(accountId);
    const credit = await readCredit(this.pool, accountId);
    const usage = toUsageResponse(snapshot.row);
    const view: AccountResponse = {
      success: true,
      id: record.id,
      email: record.email,
      status: record.status,
      createdAt: record.createdAt.toISOString(),
      proxyUsername: record.proxyUsername,
      products: usage.products,
      usageUpdatedAt: usage.updatedAt,
      alerts: record.alerts,
      autoRefill: record.autoRefill.map((r) => ({
        product: r.product,
        enabled: r.enabled,
        thresholdGb: gb(r.thresholdBytes),
        refillGb: gb(r.refillBytes),
        maxRefillsPerMonth: r.maxRefillsPerMonth,
      })),
      credit,
      throttles: record.throttles,
      apiKeys: record.apiKeys,
      namedKeysLimit: MAX_NAMED_KEYS,
    };
    const entry = { view, json: Buffer.from(JSON.stringify(view)), expiresAt: snapshot.expiresAt };
    if (trusted && generation === this.generation) {
      if (this.cache.size >= MAX_CACHED) this.cache.clear();
      this.cache.set(accountId, entry);
    }
    return entry;
  }
}
