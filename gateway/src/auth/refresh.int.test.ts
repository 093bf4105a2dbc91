import { describe, expect, it } from '@jest/globals';
import { setAccountStatus } from '#common/accounts/accounts.ts';
import type { Pool } from '#common/db/pool.ts';
import { useTestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { CredentialCache } from './cache.ts';

const fx = useTestDatabase();

describe('credential cache refresh', () => {
  it('serves the old entry while a settings change is refreshed, and the new one after', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000 });
    let hold: Promise<void> | undefined;
    const pool = {
      query: async (...args: Parameters<Pool['query']>) => {
        if (hold) await hold;
        return (fx.db.pool.query as (...a: unknown[]) => unknown)(...args);
      },
    } as unknown as Pool;
    const cache = new CredentialCache(pool);
    await cache.loadAll();
    let release = () => {};
    hold = new Promise((r) => (release = r));
    // An alert toggled: an 'account' change whose account stays active.
    const applied = cache.apply([
      { id: 1, kind: 'account' as const, accountId: account.id, subject: 'active' },
    ]);
    await new Promise((r) => setImmediate(r));
    // The refresh is held: the account is still known (it was refused with 407 in this window).
    expect(cache.get(account.proxyUsername)?.status).toBe('active');
    release();
    hold = undefined;
    await expect(applied).resolves.toEqual(new Set());
    expect(cache.get(account.proxyUsername)?.status).toBe('active');
  });

  it('drops the changed accounts when the refresh fails, so that it refuses a suspended account until the batch is replayed', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000 });
    let failNext = false;
    const pool = {
      query: (...args: Parameters<Pool['query']>) => {
        if (failNext) {
          failNext = false;
          return Promise.reject(new Error('connection terminated'));
        }
        return (fx.db.pool.query as (...a: unknown[]) => unknown)(...args);
      },
    } as unknown as Pool;
    const cache = new CredentialCache(pool);
    await cache.loadAll();
    expect(cache.get(account.proxyUsername)?.status).toBe('active');
    const generation = cache.generation;

    await setAccountStatus(fx.db.pool, account.id, 'suspended');
    const batch = [{ id: 1, kind: 'account' as const, accountId: account.id, subject: null }];
    failNext = true;
    await expect(cache.apply(batch)).rejects.toThrow('connection terminated');
    // Not served from the stale entry (which still said active): unknown until the replay.
    expect(cache.get(account.proxyUsername)).toBeUndefined();
    expect(cache.generation).toBeGreaterThan(generation);

    // The change feed replays the batch.
    await cache.apply(batch);
    expect(cache.get(account.proxyUsername)?.status).toBe('suspended');
  });
});
