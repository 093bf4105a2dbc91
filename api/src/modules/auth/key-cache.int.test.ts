// The key cache's rules (docs/adr/0010), with a feed the test controls: it caches valid keys, a
// change evicts, a lookup racing a change does not store, and an unhealthy feed means no cache.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { hashApiKey } from '#common/secrets.ts';
import { ChangeFeed, TRUST_SILENCE_MS, type Change, type ChangeHandler } from '#common/db/changes.ts';
import { KeyCache } from './key-cache.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

function fakeFeed() {
  const handlers: ChangeHandler[] = [];
  const state = { connected: true, silence: 0 };
  const feed = {
    onChanges: (h: ChangeHandler) => void handlers.push(h),
    get connected() {
      return state.connected;
    },
    silenceMs: () => state.silence,
    // The real rule, over this fake's state.
    trusted(): boolean {
      return ChangeFeed.prototype.trusted.call(this as unknown as ChangeFeed);
    },
  } as unknown as ChangeFeed;
  const deliver = async (changes: Change[]) => {
    for (const h of handlers) await h(changes);
  };
  return { feed, state, deliver };
}

/** Revokes in the database without the cache hearing of it (the fake feed delivers nothing). */
const revokeSilently = (accountId: string) =>
  db.pool.query('UPDATE api_keys SET revoked_at = now() WHERE account_id = $1', [accountId]);

describe('KeyCache', () => {
  test('serves a cached key until the feed announces its change', async () => {
    const { feed, deliver } = fakeFeed();
    const cache = new KeyCache(db.pool, feed);
    const account = await accountWithBandwidth(db.pool);
    const hash = hashApiKey(account.apiKey);
    expect(await cache.lookup(hash)).toMatchObject({
      accountId: account.id,
      revoked: false,
      status: 'active',
    });
    await revokeSilently(account.id);
    expect((await cache.lookup(hash))?.revoked).toBe(false); // cached: the proof that there is a cache
    await deliver([{ id: 1, kind: 'api_key', accountId: account.id, subject: hash.toString('hex') }]);
    expect((await cache.lookup(hash))?.revoked).toBe(true);
  });

  test('an account change evicts every key of the account', async () => {
    const { feed, deliver } = fakeFeed();
    const cache = new KeyCache(db.pool, feed);
    const account = await accountWithBandwidth(db.pool);
    const hash = hashApiKey(account.apiKey);
    await cache.lookup(hash);
    await db.pool.query(`UPDATE accounts SET status = 'suspended' WHERE id = $1`, [account.id]);
    await deliver([{ id: 2, kind: 'account', accountId: account.id, subject: 'suspended' }]);
    expect((await cache.lookup(hash))?.status).toBe('suspended');
  });

  test.each([
    ['disconnected', { connected: false, silence: 0 }],
    ['silent for too long', { connected: true, silence: TRUST_SILENCE_MS + 1 }],
  ])('a feed that is %s is not trusted: every lookup reads the database', async (_name, health) => {
    const { feed, state } = fakeFeed();
    const cache = new KeyCache(db.pool, feed);
    const account = await accountWithBandwidth(db.pool);
    const hash = hashApiKey(account.apiKey);
    await cache.lookup(hash);
    Object.assign(state, health);
    await revokeSilently(account.id);
    expect((await cache.lookup(hash))?.revoked).toBe(true);
    expect(cache.size).toBe(0);
  });

  test('a lookup that raced a change does not store its answer', async () => {
    const { feed, deliver } = fakeFeed();
    const cache = new KeyCache(db.pool, feed);
    const account = await accountWithBandwidth(db.pool);
    const hash = hashApiKey(account.apiKey);
    const pending = cache.lookup(hash);
    await deliver([{ id: 3, kind: 'api_key', accountId: account.id, subject: 'ff' }]);
    await pending;
    expect(cache.size).toBe(0);
  });

  test('unknown and revoked keys are never cached', async () => {
    const { feed } = fakeFeed();
    const cache = new KeyCache(db.pool, feed);
    expect(await cache.lookup(hashApiKey('svc_live_' + 'f'.repeat(48)))).toBeUndefined();
    const account = await accountWithBandwidth(db.pool);
    await revokeSilently(account.id);
    await cache.lookup(hashApiKey(account.apiKey));
    expect(cache.size).toBe(0);
  });
});
