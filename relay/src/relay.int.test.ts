// The change relay end to end on a real database: pods start from its snapshot and apply the rows
// it pushes without a query of their own (their pool refuses every query), the API's acks are
// written at once, the relay's own database session is lost and caught up, two relays run at
// once and one dies, and a burst of 10,000 change rows reaches every pod once.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { resetProxyPassword, setAccountStatus } from '#common/accounts/accounts.ts';
import { createNamedKey, revokeKey } from '#common/accounts/keys.ts';
import { changeLogHead, countCacheAcks, type Change } from '#common/db/changes.ts';
import { RelayFeed } from '#common/db/relay-feed.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth, TEST_CREDENTIALS_KEY } from '#test/fixtures.ts';
import { until as untilWithin } from '#test/process.ts';
import { quiet, sha256Hex, startPod, startRelay, type TestPod, type TestRelay } from '#test/relay.ts';

const until = (check: () => boolean | Promise<boolean>, what: string) => untilWithin(check, what, 30_000);

describe('change relay', () => {
  let db: TestDatabase;
  let a: TestRelay;
  const pods: TestPod[] = [];
  const feeds: RelayFeed[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    a = await startRelay(db);
  });
  afterAll(async () => {
    for (const p of pods) await p.feed.close();
    for (const f of feeds) await f.close();
    await a.close();
    await db.drop();
  });

  const pod = async (urls = [a.url]) => {
    const p = await startPod(urls);
    pods.push(p);
    return p;
  };

  it('starts a pod from its snapshot and pushes each change with its rows', async () => {
    const before = await accountWithBandwidth(db.pool);
    await until(async () => a.relay.version === (await changeLogHead(db.pool)), 'the relay to have it');
    const p = await pod();
    expect(p.feed.counts.snapshots).toBe(1);
    expect(p.cache.get(before.proxyUsername)?.status).toBe('active');
    await until(() => p.feed.trusted(), 'trust from the first beat');
    const created = await accountWithBandwidth(db.pool);
    await until(() => p.cache.get(created.proxyUsername) !== undefined, 'the new account');
    await setAccountStatus(db.pool, before.id, 'suspended');
    await until(() => p.revoked.includes(before.id), 'the suspension to revoke');
    expect(p.cache.get(before.proxyUsername)?.status).toBe('suspended');
    const old = p.cache.get(created.proxyUsername)!.passwordSha256;
    await resetProxyPassword(db.pool, created.id, TEST_CREDENTIALS_KEY);
    await until(() => !p.cache.get(created.proxyUsername)!.passwordSha256.equals(old), 'the new password');
    await until(async () => p.feed.version === (await changeLogHead(db.pool)), 'the version');
  });

  it('carries API key rows and writes an API process ack at once', async () => {
    const feed = new RelayFeed({
      urls: [a.url],
      logger: quiet,
      component: 'api',
      ack: { instance: 'api-relay-test', component: 'api' },
    });
    feeds.push(feed);
    const keys: Change[] = [];
    feed.onChanges((changes) => void keys.push(...changes.filter((c) => c.kind === 'api_key')));
    await feed.start();
    const account = await accountWithBandwidth(db.pool);
    const key = await createNamedKey(db.pool, account.id, 'relay');
    await revokeKey(db.pool, account.id, key.id);
    const hash = sha256Hex(key.apiKey);
    await until(() => keys.some((c) => c.subject === hash && c.apiKey?.revoked === true), 'the revocation');
    expect(keys.find((c) => c.subject === hash)?.apiKey).toMatchObject({
      keyId: key.id,
      accountId: account.id,
    });
    // What an admin call waits for (api/src/modules/sync/wait.ts): this process's ack of the head.
    const head = await changeLogHead(db.pool);
    await until(async () => (await countCacheAcks(db.pool, 'api', head)).synced === 1, 'the API ack');
    await feed.close();
    await until(async () => (await countCacheAcks(db.pool, 'api', 0)).total === 0, 'the ack row to go');
  });

  it("catches up from change_log after the relay's own database session is lost", async () => {
    const p = await pod();
    const account = await accountWithBandwidth(db.pool);
    await until(() => p.cache.get(account.proxyUsername) !== undefined, 'the account');
    await db.pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'proxyfleet-relay-listen'`,
    );
    await until(() => !a.relay.databaseConnected, 'the relay to notice');
    // Changed while the relay is disconnected: only its catch-up from change_log can deliver it.
    await setAccountStatus(db.pool, account.id, 'suspended');
    await until(() => p.cache.get(account.proxyUsername)?.status === 'suspended', 'the suspension missed');
    expect(p.ids.filter((id) => p.ids.indexOf(id) !== p.ids.lastIndexOf(id))).toEqual([]);
  });

  it('runs two relays at once; when one dies its pods resume on the other, nothing missed or doubled', async () => {
    const b = await startRelay(db);
    try {
      const onA = await pod([a.url, b.url]);
      const onB = await pod([b.url, a.url]);
      const account = await accountWithBandwidth(db.pool);
      const from = await changeLogHead(db.pool);
      await until(
        () => [onA, onB].every((p) => p.cache.get(account.proxyUsername) !== undefined),
        'the account on both',
      );
      // Changes while B goes: its pods move to A, naming what they have.
      const changing = (async () => {
        for (let i = 0; i < 20; i++) {
          await resetProxyPassword(db.pool, account.id, TEST_CREDENTIALS_KEY);
          await new Promise((r) => setTimeout(r, 20));
        }
      })();
      await new Promise((r) => setTimeout(r, 100));
      await b.close();
      await changing;
      const head = await changeLogHead(db.pool);
      const expected = (
        await db.pool.query<{ id: number }>('SELECT id FROM change_log WHERE id > $1 ORDER BY id', [from])
      ).rows.map((r) => Number(r.id));
      for (const p of [onA, onB]) {
        await until(() => p.feed.version === head && p.feed.trusted(), 'every pod at the head');
        const got = p.ids.filter((id) => id > from);
        expect([...got].sort((x, y) => x - y)).toEqual(expected);
      }
      expect(onB.feed.counts.drops).toBeGreaterThan(0);
      // It resumed from A's memory rather than a snapshot: one snapshot, at its start.
      expect(onB.feed.counts.snapshots).toBe(1);
      const password = (
        await db.pool.query<{ h: string }>(
          "SELECT encode(password_sha256, 'hex') AS h FROM proxy_credentials WHERE account_id = $1",
          [account.id],
        )
      ).rows[0]!.h;
      for (const p of [onA, onB])
        expect(p.cache.get(account.proxyUsername)!.passwordSha256.toString('hex')).toBe(password);
    } finally {
      await b.close().catch(() => undefined);
    }
  });

  it('delivers a burst of 10,000 change rows to every pod once', async () => {
    const p1 = await pod();
    const p2 = await pod();
    const account = await accountWithBandwidth(db.pool);
    const from = await changeLogHead(db.pool);
    await db.pool.query(`SELECT change_log_record('account', $1, NULL) FROM generate_series(1, 10000)`, [
      account.id,
    ]);
    const head = await changeLogHead(db.pool);
    expect(head - from).toBe(10_000);
    for (const p of [p1, p2]) {
      await until(() => p.feed.version === head, 'the burst applied');
      const got = p.ids.filter((id) => id > from);
      expect(got.length).toBe(10_000);
      expect(new Set(got).size).toBe(10_000);
    }
  });
});
