// A relay stream that goes wrong: garbage, a gap in the numbering, a stall, a connection cut in
// the middle of a message, a relay that says its database is silent, and a pod away for longer
// than the relay keeps changes. Each time the pod must apply nothing wrong, move on (to the next
// URL, or the same again) and end with the database's state.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { resetProxyPassword, setAccountStatus } from '#common/accounts/accounts.ts';
import { changeLogHead, TRUST_SILENCE_MS } from '#common/db/changes.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth, TEST_CREDENTIALS_KEY } from '#test/fixtures.ts';
import { until as untilWithin } from '#test/process.ts';
import { fakeRelay, startPod, startRelay, type TestPod, type TestRelay } from '#test/relay.ts';
import { TcpRelay } from '#test/tcp-relay.ts';

const until = (check: () => boolean | Promise<boolean>, what: string) => untilWithin(check, what, 30_000);

/** One unmasked WebSocket text frame (a server's), written raw so several go in one write. */
const textFrame = (text: string): Buffer => {
  const body = Buffer.from(text);
  const head =
    body.length < 126
      ? Buffer.from([0x81, body.length])
      : Buffer.from([0x81, 126, body.length >> 8, body.length & 0xff]);
  return Buffer.concat([head, body]);
};

describe('change relay stream faults', () => {
  let db: TestDatabase;
  let relay: TestRelay;
  const closers: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    // Keeps 5 changes; resumes re-ask 2 ids below the version.
    relay = await startRelay(db, { keep: 5, catchUpOverlap: 2 });
  });
  afterAll(async () => {
    for (const close of closers.reverse()) await close().catch(() => undefined);
    await relay.close();
    await db.drop();
  });

  const pod = async (urls: string[], stallMs = 1_500): Promise<TestPod> => {
    const p = await startPod(urls, { stallMs, catchUpOverlap: 2 });
    closers.push(() => p.feed.close());
    return p;
  };

  /** The pod holds the database's current row of the account. */
  const current = async (p: TestPod, accountId: string, username: string) => {
    const { rows } = await db.pool.query<{ h: string; status: string }>(
      `SELECT encode(c.password_sha256, 'hex') AS h, a.status FROM proxy_credentials c
         JOIN accounts a ON a.id = c.account_id WHERE c.account_id = $1`,
      [accountId],
    );
    const entry = p.cache.get(username);
    return entry?.passwordSha256.toString('hex') === rows[0]!.h && entry.status === rows[0]!.status;
  };

  it.each([
    ['not JSON', ['garbage{']],
    ['the wrong shape', ['{"type":"changes","seq":1,"changes":[{"id":"x"}]}']],
    // A connection starts at the number of its first message (the relay's, any): the gap is after.
    [
      'a gap in the numbering',
      [
        '{"type":"snapshot","seq":7,"version":0,"applied":[],"credentials":[]}',
        '{"type":"changes","seq":9,"changes":[]}',
      ],
    ],
    [
      'a row that is not one',
      [
        '{"type":"snapshot","seq":1,"version":1,"applied":[],"credentials":[{"account_id":"a","username":1}]}',
      ],
    ],
  ])('drops a stream that sends %s and takes the changes from the next relay', async (_what, messages) => {
    // In one write: the pod reads them all before it applies the first.
    const bad = await fakeRelay((_ws, socket) => socket.write(Buffer.concat(messages.map(textFrame))));
    closers.push(() => bad.close());
    const account = await accountWithBandwidth(db.pool);
    await until(async () => relay.relay.version === (await changeLogHead(db.pool)), 'the relay');
    const p = await pod([bad.url, relay.url]);
    expect(bad.connections()).toBe(1);
    expect(p.feed.counts.drops).toBe(1);
    // Nothing of the bad stream reached the cache; the good one's snapshot did.
    expect(p.seen.every((c) => c.credentials !== undefined && c.credentials?.username !== undefined)).toBe(
      true,
    );
    expect(await current(p, account.id, account.proxyUsername)).toBe(true);
  });

  it('takes the first number of a connection as it comes, then counts on from it', async () => {
    // A relay that sent 41 batches before this pod connected starts it at 41: no gap.
    const messages = [
      '{"type":"snapshot","seq":41,"version":0,"applied":[],"credentials":[]}',
      '{"type":"beat","seq":41,"version":0,"silenceMs":0}',
      '{"type":"changes","seq":42,"changes":[]}',
      '{"type":"beat","seq":42,"version":0,"silenceMs":0}',
    ];
    const fake = await fakeRelay((_ws, socket) => socket.write(Buffer.concat(messages.map(textFrame))));
    closers.push(() => fake.close());
    const p = await pod([fake.url], 10_000);
    await until(() => p.feed.trusted(), 'trust from the beats');
    expect(p.feed.counts.drops).toBe(0);
    expect(fake.connections()).toBe(1);
  });

  it('applies nothing of a message cut in the middle, and reconnects', async () => {
    const cut = await fakeRelay((_ws, socket) => {
      // A text frame announcing 1,000 bytes, 12 of them sent, then the connection ends.
      socket.write(Buffer.concat([Buffer.from([0x81, 126, 0x03, 0xe8]), Buffer.from('{"type":"sna')]));
      socket.destroy();
    });
    closers.push(() => cut.close());
    const p = await pod([cut.url, relay.url]);
    expect(cut.connections()).toBe(1);
    expect(p.feed.counts.drops).toBe(1);
    expect(p.feed.counts.snapshots).toBe(1);
  });

  it('leaves a stalled stream, resumes on another relay, and gets what changed meanwhile', async () => {
    const tcp = new TcpRelay({ host: '127.0.0.1', port: relay.port });
    await tcp.listen();
    closers.push(() => tcp.close());
    const account = await accountWithBandwidth(db.pool);
    const p = await pod([`ws://127.0.0.1:${tcp.port}/changes`, relay.url]);
    await until(() => p.cache.get(account.proxyUsername) !== undefined, 'the account');
    tcp.blackHole();
    await setAccountStatus(db.pool, account.id, 'suspended');
    await until(() => p.revoked.includes(account.id), 'the suspension, past the stall');
    expect(p.feed.counts.drops).toBe(1);
    expect(p.feed.counts.resumes).toBe(1);
    await until(() => p.feed.trusted(), 'trust on the new stream');
  });

  it('stops trusting its caches when the relay has not heard from its database for too long', async () => {
    // The relay's feed last heard from the database 9 s ago, then lost it (null).
    let silenceMs: number | null = TRUST_SILENCE_MS - 1_000;
    const snapshot = '{"type":"snapshot","seq":1,"version":0,"applied":[],"credentials":[]}';
    const fake = await fakeRelay((ws) => {
      ws.send(snapshot);
      const beat = setInterval(
        () => ws.send(JSON.stringify({ type: 'beat', seq: 1, version: 0, silenceMs })),
        100,
      );
      ws.on('close', () => clearInterval(beat));
    });
    closers.push(() => fake.close());
    const p = await pod([fake.url]);
    await until(() => p.feed.trusted(), 'trust');
    silenceMs = null;
    await until(() => !p.feed.trusted(), 'distrust within the second left');
    // The stream itself is fine: beats keep coming; what they say of the database is not.
    expect(p.feed.connected).toBe(true);
    expect(p.feed.counts.drops).toBe(0);
    silenceMs = 0;
    await until(() => p.feed.trusted(), 'trust again');
  });

  it('re-snapshots a pod away for longer than the relay keeps, and revokes what changed', async () => {
    const tcp = new TcpRelay({ host: '127.0.0.1', port: relay.port });
    await tcp.listen();
    closers.push(() => tcp.close());
    const account = await accountWithBandwidth(db.pool);
    const other = await accountWithBandwidth(db.pool);
    const p = await pod([`ws://127.0.0.1:${tcp.port}/changes`]);
    await until(() => p.cache.get(other.proxyUsername) !== undefined, 'the accounts');
    await tcp.cut();
    for (let i = 0; i < 8; i++) await resetProxyPassword(db.pool, other.id, TEST_CREDENTIALS_KEY);
    await setAccountStatus(db.pool, account.id, 'suspended');
    await until(async () => relay.relay.version === (await changeLogHead(db.pool)), 'the relay');
    await tcp.restore();
    await until(() => p.feed.counts.snapshots === 2, 'the second snapshot');
    await until(() => p.revoked.includes(account.id), 'the suspension, from the snapshot');
    expect(await current(p, account.id, account.proxyUsername)).toBe(true);
    expect(await current(p, other.id, other.proxyUsername)).toBe(true);
    expect(p.feed.version).toBe(await changeLogHead(db.pool));
  });
});
