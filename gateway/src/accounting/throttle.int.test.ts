// Bandwidth throttling through a real gateway and PostgreSQL (docs/adr/0035): an account's cap
// holds over parallel plain and CONNECT connections, another account at the same moment is not
// slowed, billing stays exact, a change reaches a live gateway without a restart, and the plan's
// default from the spec applies. Rates are asserted only as lower bounds on time (a busy machine
// makes transfers slower, never faster); that something is not capped, as being faster than the
// cap could ever allow (the same floor), not as a fraction of another transfer's time. The
// measured figures are printed.
import type net from 'node:net';
import { describe, expect, it } from '@jest/globals';
import type { NewAccount } from '#common/accounts/accounts.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { cacheSynced, gatewaySpec, startTestGateway, useTestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, get, openTunnel, rawExchange } from '#test/gateway/client.ts';
import { counterDelta, counterValues, recordedUsage } from '#test/gateway/usage.ts';
import { until } from '#test/process.ts';
import { MIN_BURST_BYTES } from './bucket.ts';

const KiB = 1024;
const MB = 1_000_000;
/** One socket read: what a stream may still deliver after its budget is held. */
const CHUNK = 64 * KiB;

const fx = useTestGateway();

const auth = (a: NewAccount) => basicAuth(a.proxyUsername, a.proxyPassword);

async function setCap(accountId: string, bytesPerSecond: number | null): Promise<void> {
  if (bytesPerSecond === null)
    await fx.db.pool.query('DELETE FROM account_throttles WHERE account_id = $1', [accountId]);
  else
    await fx.db.pool.query(
      `INSERT INTO account_throttles (account_id, product, bytes_per_second) VALUES ($1, 'basic', $2)
       ON CONFLICT (account_id, product) DO UPDATE SET bytes_per_second = EXCLUDED.bytes_per_second`,
      [accountId, bytesPerSecond],
    );
}

interface Moved {
  written: number;
  read: number;
  ok: boolean;
}

/** A plain (absolute-form) download on its own connection: the bytes the client moved. */
async function plain(port: number, a: NewAccount, bytes: number): Promise<Moved> {
  const url = `http://127.0.0.1:${fx.origin.port}/bytes/${bytes}`;
  const r = await rawExchange(port, [get(url, auth(a))]);
  return { written: r.written, read: r.read, ok: r.responses[0]?.body.length === bytes };
}

/**
 * A download through a CONNECT tunnel: the bytes the client moved, CONNECT exchange included.
 * `progress` sees the bytes read through the tunnel so far, at each read.
 */
async function tunnelled(
  port: number,
  a: NewAccount,
  bytes: number,
  progress?: (read: number) => void,
): Promise<Moved> {
  const t = await openTunnel(port, `127.0.0.1:${fx.origin.port}`, auth(a));
  if (t.status !== 200) return { written: 0, read: 0, ok: false };
  const socket: net.Socket = t.socket;
  let body = t.leftover.length;
  await new Promise<void>((resolve) => {
    socket.on('data', (c: Buffer) => {
      body += c.length;
      progress?.(body);
    });
    socket.on('close', () => resolve());
    // The origin closes after the answer; the gateway then closes the tunnel.
    socket.write(`GET /bytes/${bytes} HTTP/1.1\r\nHost: origin\r\nConnection: close\r\n\r\n`);
  });
  return { written: socket.bytesWritten, read: socket.bytesRead, ok: body > bytes };
}

async function timed<T>(work: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const started = performance.now();
  const value = await work();
  return { ms: performance.now() - started, value };
}

/** Usage billed so far, after the gateway closed and flushed the connections' counts. */
async function billed(accountId: string): Promise<number> {
  await new Promise((r) => setTimeout(r, 100));
  await fx.gateway.ledger.flushSettled();
  const u = await recordedUsage(fx.db.pool, accountId);
  return u.up + u.down;
}

/** Least time `bytes` can take at `rate` with a full bucket and one chunk per stream in flight. */
const floorMs = (bytes: number, rate: number, streams: number) =>
  ((bytes - Math.max(MIN_BURST_BYTES, rate) - streams * CHUNK) / rate) * 1000;

const moved = (all: Moved[]) => all.reduce((n, m) => n + m.written + m.read, 0);

/** KiB/s over `ms`, and after the first burst (the steady rate the cap governs), for the printed lines. */
const rates = (bytes: number, ms: number, rate: number) =>
  `${(((bytes / ms) * 1000) / KiB) | 0} KiB/s, ${((((bytes - Math.max(MIN_BURST_BYTES, rate)) / ms) * 1000) / KiB) | 0} KiB/s after the burst`;

/** A MB each over two plain and two CONNECT connections at once, for one account. */
const fourConnections = (account: NewAccount) =>
  Promise.all([
    plain(fx.gateway.port, account, MB),
    plain(fx.gateway.port, account, MB),
    tunnelled(fx.gateway.port, account, MB),
    tunnelled(fx.gateway.port, account, MB),
  ]);

describe('a throttled account', () => {
  it('stays under its cap over parallel plain and CONNECT connections, leaves others alone, and is billed exactly', async () => {
    const slow = await accountWithBandwidth(fx.db.pool, { basic: 100 * MB });
    const fast = await accountWithBandwidth(fx.db.pool, { basic: 100 * MB });
    const rate = 512 * KiB;
    await setCap(slow.id, rate);
    await cacheSynced(fx.db.pool, [fx.gateway]);
    const holds = await counterValues(fx.gateway, 'proxyfleet_gateway_throttle_holds_total');

    const throttled = timed(() => fourConnections(slow));
    const free = timed(() => fourConnections(fast));
    const [s, f] = await Promise.all([throttled, free]);
    const sBytes = moved(s.value);
    console.log(
      `throttle: capped account moved ${sBytes} B over 4 connections in ${s.ms.toFixed(0)} ms ` +
        `= ${rates(sBytes, s.ms, rate)} (cap ${rate / KiB} KiB/s, burst ${rate / KiB} KiB); ` +
        `uncapped account at the same time: ${moved(f.value)} B in ${f.ms.toFixed(0)} ms`,
    );
    expect(s.value.map((m) => m.ok)).toEqual([true, true, true, true]);
    expect(f.value.map((m) => m.ok)).toEqual([true, true, true, true]);
    // 4 MB at 512 KiB/s: at least ~6.1 s even with the burst and a chunk per stream.
    expect(s.ms).toBeGreaterThan(floorMs(sBytes, rate, 4));
    // The other account is not held with it: its 4 MB came faster than the cap could ever allow.
    expect(f.ms).toBeLessThan(floorMs(moved(f.value), rate, 4));

    expect(await billed(slow.id)).toBe(sBytes);
    expect(await billed(fast.id)).toBe(moved(f.value));
    // Every wait for the bucket is counted (one per debt: 4 MB past a 512 KiB burst takes many).
    const held = counterDelta(
      await counterValues(fx.gateway, 'proxyfleet_gateway_throttle_holds_total'),
      holds,
    );
    expect(Object.keys(held)).toEqual(['account']);
    expect(held.account).toBeGreaterThan(3);
  }, 60_000);

  it('follows a change of its cap on a live gateway, within a live transfer, without a restart', async () => {
    const a = await accountWithBandwidth(fx.db.pool, { basic: 100 * MB });
    await cacheSynced(fx.db.pool, [fx.gateway]);
    const before = await timed(() => plain(fx.gateway.port, a, MB));

    const rate = 256 * KiB;
    await setCap(a.id, rate);
    await cacheSynced(fx.db.pool, [fx.gateway]);
    const capped = await timed(() => plain(fx.gateway.port, a, MB));
    expect(capped.value.ok).toBe(true);
    expect(capped.ms).toBeGreaterThan(floorMs(MB, rate, 1));

    // 4 MB at 256 KiB/s would take 15 s; raised once the transfer is past its burst (held by the
    // cap, about a second in), it ends sooner than the old cap could ever allow.
    let read = 0;
    const live = timed(() => tunnelled(fx.gateway.port, a, 4 * MB, (n) => (read = n)));
    await until(() => read >= 2 * rate, 'the live transfer to be past its burst');
    await setCap(a.id, 100 * MB);
    await cacheSynced(fx.db.pool, [fx.gateway]);
    const raised = await live;
    expect(raised.value.ok).toBe(true);
    expect(raised.ms).toBeLessThan(floorMs(4 * MB, rate, 1));

    await setCap(a.id, null);
    await cacheSynced(fx.db.pool, [fx.gateway]);
    const after = await timed(() => plain(fx.gateway.port, a, MB));
    console.log(
      `throttle: 1 MB uncapped ${before.ms.toFixed(0)} ms; at ${rate / KiB} KiB/s ${capped.ms.toFixed(0)} ms ` +
        `(${rates(MB, capped.ms, rate)}); 4 MB raised after 1 s: ${raised.ms.toFixed(0)} ms; ` +
        `cap removed: ${after.ms.toFixed(0)} ms`,
    );
    // Uncapped again: faster than the cap could ever allow.
    expect(after.ms).toBeLessThan(floorMs(MB, rate, 1));
  }, 60_000);
});

describe("the plan's default from the spec", () => {
  it('caps an account without an override; an override wins', async () => {
    const rate = 256 * KiB;
    const planned = await startTestGateway(
      fx.db.pool,
      fx.db.url,
      gatewaySpec('basic', undefined, { throttle: { bytesPerSecond: rate } }),
    );
    try {
      const a = await accountWithBandwidth(fx.db.pool, { basic: 100 * MB });
      const b = await accountWithBandwidth(fx.db.pool, { basic: 100 * MB });
      await setCap(b.id, 100 * MB);
      await cacheSynced(fx.db.pool, [planned, fx.gateway]);
      const [byDefault, overridden] = await Promise.all([
        timed(() => plain(planned.port, a, MB)),
        timed(() => plain(planned.port, b, MB)),
      ]);
      console.log(
        `throttle: plan default ${rate / KiB} KiB/s: 1 MB in ${byDefault.ms.toFixed(0)} ms ` +
          `(${rates(MB, byDefault.ms, rate)}); overridden to 100 MB/s: ${overridden.ms.toFixed(0)} ms`,
      );
      expect(byDefault.value.ok && overridden.value.ok).toBe(true);
      expect(byDefault.ms).toBeGreaterThan(floorMs(MB, rate, 1));
      // The override is not held at the plan's rate: faster than that could ever allow.
      expect(overridden.ms).toBeLessThan(floorMs(MB, rate, 1));
    } finally {
      await planned.close();
    }
  }, 60_000);
});
