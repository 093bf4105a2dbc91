// The change relay's client against a stand-in relay: how often it acks. An API process acks each
// batch at once (admin calls wait for it); a gateway at most once a second, and always ends with
// the version it applied (docs/adr/0105).
import { afterEach, describe, expect, it } from '@jest/globals';
import { fakeRelay, quiet } from '#test/relay.ts';
import { until } from '#test/process.ts';
import { RelayFeed } from './relay-feed.ts';

const BATCHES = 30;

describe('RelayFeed acks', () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
  });

  /** A relay that sends a snapshot, then BATCHES batches 20 ms apart; the acks it received. */
  const run = async (batched: boolean) => {
    const acks: { version: number; at: number }[] = [];
    const relay = await fakeRelay((ws) => {
      ws.on('message', (data: Buffer) => {
        const msg = JSON.parse(data.toString()) as { type: string; version: number };
        if (msg.type === 'ack') acks.push({ version: msg.version, at: Date.now() });
      });
      ws.send('{"type":"snapshot","seq":3,"version":0,"applied":[],"credentials":[]}');
      let id = 0;
      const timer = setInterval(() => {
        id += 1;
        if (ws.readyState !== ws.OPEN || id > BATCHES) return clearInterval(timer);
        const change = { id, kind: 'balance', accountId: 'a', subject: null };
        ws.send(JSON.stringify({ type: 'changes', seq: 3 + id, changes: [change] }));
      }, 20);
    });
    closers.push(() => relay.close());
    const feed = new RelayFeed({
      urls: [relay.url],
      logger: quiet,
      component: batched ? 'gateway' : 'api',
      ack: { instance: 'acks-test', component: batched ? 'gateway' : 'api', batched },
      stallMs: 10_000,
    });
    closers.push(() => feed.close());
    await feed.start();
    await until(() => acks.at(-1)?.version === BATCHES, 'the last version acked', 10_000);
    expect(feed.version).toBe(BATCHES);
    expect(feed.counts.drops).toBe(0);
    return acks;
  };

  it('an API process acks every batch as it applies it', async () => {
    const acks = await run(false);
    expect(acks.map((a) => a.version)).toEqual(Array.from({ length: BATCHES + 1 }, (_, i) => i));
  });

  it('a gateway acks at most once a second, the last version included', async () => {
    const acks = await run(true);
    // The snapshot's at once, then ~0.6 s of batches: one more ack a second later, at the end.
    expect(acks.length).toBeLessThanOrEqual(3);
    for (let i = 1; i < acks.length; i++) expect(acks[i]!.at - acks[i - 1]!.at).toBeGreaterThanOrEqual(950);
    expect(acks[0]!.version).toBe(0);
  });
});
