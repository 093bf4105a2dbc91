// Fault injection for the change feed: the LISTEN backend is killed, a change is made while the
// feed is disconnected, and the feed must reconnect and deliver that change from change_log.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { setAccountStatus } from '../accounts/accounts.ts';
import { createLogger } from '../logger.ts';
import { ChangeFeed, countCacheAcks, type Change } from './changes.ts';
import { until as untilWithin } from '#test/process.ts';

/** The feed's waits keep their 15 s limit. */
const until = (check: () => boolean | Promise<boolean>, what: string) => untilWithin(check, what, 15_000);

describe('ChangeFeed', () => {
  let db: TestDatabase;
  let feed: ChangeFeed;
  const seen: Change[] = [];
  const registry = new Registry();

  beforeAll(async () => {
    db = await createTestDatabase();
    feed = new ChangeFeed({
      url: db.url,
      logger: createLogger('test', 'silent'),
      registry,
      component: 'test',
      heartbeatMs: 200,
      maxBackoffMs: 200,
      ack: { instance: 'test-pod-1', component: 'gateway' },
    });
    feed.onChanges((changes) => void seen.push(...changes));
    await feed.start();
  });
  afterAll(async () => {
    await feed.close();
    await db.drop();
  });

  it('delivers committed changes and advances its version', async () => {
    const account = await accountWithBandwidth(db.pool);
    await setAccountStatus(db.pool, account.id, 'suspended');
    await until(() => seen.some((c) => c.kind === 'account' && c.accountId === account.id), 'the suspension');
    const { rows } = await db.pool.query<{ head: number }>('SELECT max(id)::bigint AS head FROM change_log');
    await until(() => feed.version === rows[0]!.head, 'version to reach the head');
    await until(async () => (await countCacheAcks(db.pool, 'gateway', feed.version)).synced === 1, 'the ack');
    expect(await registry.getSingleMetricAsString('proxyfleet_test_cache_version')).toContain(
      String(feed.version),
    );
  });

  it('reconnects after its backend is killed and catches up on what it missed', async () => {
    const account = await accountWithBandwidth(db.pool);
    await db.pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'proxyfleet-test-listen'`,
    );
    await until(() => !feed.connected, 'the feed to notice');
    // Changed while the feed is disconnected (it waits at least 200 ms before reconnecting): only
    // the catch-up from change_log can deliver it.
    await setAccountStatus(db.pool, account.id, 'suspended');
    await until(
      () => seen.some((c) => c.kind === 'account' && c.accountId === account.id),
      'the missed suspension',
    );
    await until(() => feed.connected, 'reconnection');
    // And live notifications work again on the new connection.
    await setAccountStatus(db.pool, account.id, 'active');
    await until(
      () => seen.some((c) => c.kind === 'account' && c.accountId === account.id && c.subject === 'active'),
      'the reactivation',
    );
  });

  it('after a reconnect delivers what it missed, and not again what it had applied', async () => {
    const applied = await accountWithBandwidth(db.pool);
    await setAccountStatus(db.pool, applied.id, 'suspended');
    const { rows } = await db.pool.query<{ id: number }>(
      'SELECT max(id)::bigint AS id FROM change_log WHERE account_id = $1',
      [applied.id],
    );
    const appliedId = rows[0]!.id;
    await until(() => feed.version >= appliedId, 'the change to be applied');
    const mark = seen.length;
    await db.pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'proxyfleet-test-listen'`,
    );
    await until(() => !feed.connected, 'the feed to notice');
    const missed = await accountWithBandwidth(db.pool);
    await setAccountStatus(db.pool, missed.id, 'suspended');
    await until(() => seen.slice(mark).some((c) => c.accountId === missed.id), 'the missed change');
    // A replay would make every cache drop and re-read each changed account (the gateway's refuses
    // them meanwhile, fail closed).
    expect(seen.slice(mark).filter((c) => c.id <= appliedId)).toEqual([]);
  });

  it('replays a batch whose handler failed, and reports it applied only after it succeeded', async () => {
    const account = await accountWithBandwidth(db.pool);
    let failuresLeft = 1;
    const applied: Change[] = [];
    const flaky = new ChangeFeed({
      url: db.url,
      logger: createLogger('test', 'silent'),
      component: 'flaky',
      heartbeatMs: 200,
      maxBackoffMs: 200,
      ack: { instance: 'flaky-pod', component: 'api' },
    });
    flaky.onChanges((changes) => {
      if (changes.some((c) => c.accountId === account.id) && failuresLeft-- > 0) {
        throw new Error('refresh query timed out');
      }
      applied.push(...changes);
    });
    await flaky.start();
    try {
      const before = flaky.version;
      await setAccountStatus(db.pool, account.id, 'suspended');
      const { rows } = await db.pool.query<{ id: number }>(
        `SELECT max(id)::bigint AS id FROM change_log WHERE account_id = $1`,
        [account.id],
      );
      const changeId = rows[0]!.id;
      await until(() => applied.some((c) => c.id === changeId), 'the replayed suspension');
      expect(failuresLeft).toBe(-1);
      await until(() => flaky.version >= changeId, 'the version to pass the change');
      expect(before).toBeLessThan(changeId);
      await until(async () => (await countCacheAcks(db.pool, 'api', changeId)).synced === 1, 'the ack');
    } finally {
      await flaky.close();
    }
  });

  it('no longer counts a process once its feed is closed', async () => {
    const other = new ChangeFeed({
      url: db.url,
      logger: createLogger('test', 'silent'),
      component: 'test2',
      ack: { instance: 'test-pod-2', component: 'gateway' },
    });
    await other.start();
    expect((await countCacheAcks(db.pool, 'gateway', 0)).total).toBe(2);
    await other.close();
    expect((await countCacheAcks(db.pool, 'gateway', 0)).total).toBe(1);
  });
  it('with batched acks, writes the version it applied on the heartbeat, not on each change', async () => {
    const ackOf = async (instance: string) =>
      (
        await db.pool.query<{ version: number }>('SELECT version FROM cache_acks WHERE instance = $1', [
          instance,
        ])
      ).rows[0]?.version;
    const quiet = new ChangeFeed({
      url: db.url,
      logger: createLogger('test', 'silent'),
      component: 'test3',
      heartbeatMs: 60_000,
      ack: { instance: 'batched-quiet', component: 'gateway', batched: true },
    });
    const beating = new ChangeFeed({
      url: db.url,
      logger: createLogger('test', 'silent'),
      component: 'test4',
      heartbeatMs: 200,
      ack: { instance: 'batched-beating', component: 'gateway', batched: true },
    });
    await quiet.start();
    await beating.start();
    try {
      const started = await ackOf('batched-quiet');
      const account = await accountWithBandwidth(db.pool);
      await setAccountStatus(db.pool, account.id, 'suspended');
      await setAccountStatus(db.pool, account.id, 'active');
      const { rows } = await db.pool.query<{ head: number }>(
        'SELECT max(id)::bigint AS head FROM change_log',
      );
      const head = rows[0]!.head;
      // The feed applies its batches one after the other, each (unbatched) with its ack: once the
      // last change is applied, an ack per change would have recorded the earlier ones.
      await until(() => quiet.version >= head, 'the quiet feed to apply both changes');
      expect(await ackOf('batched-quiet')).toBe(started);
      // A heartbeat writes what was applied since.
      await until(async () => ((await ackOf('batched-beating')) ?? 0) >= head, 'the heartbeat ack');
    } finally {
      await quiet.close();
      await beating.close();
    }
  });
});
