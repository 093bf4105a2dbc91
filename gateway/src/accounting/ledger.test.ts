// The ledger's throttle without a database: the bucket it gives a budget (the cap shared by the
// fleet), the hold when a chunk puts it in debt, the timed release, and a lease hold that neither
// releases nor is released by it (docs/adr/0035). No lease is ever asked for here.
import type net from 'node:net';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { createLogger } from '../../../common/src/logger.ts';
import type { Pool } from '../../../common/src/db/pool.ts';
import type { GatewayMetrics, PlanMetrics } from '../metrics.ts';
import { Ledger } from './ledger.ts';
import { HOLD_LEASE, HOLD_THROTTLE, Metered, type Budget } from './meter.ts';

const KiB = 1024;

function ledger(cap: () => number, fleet: () => number): { ledger: Ledger; budget: (id: string) => Budget } {
  const l = new Ledger({
    pool: {} as Pool,
    gatewayId: 'unit',
    plan: 'basic',
    logger: createLogger('test', 'silent'),
    metrics: {} as GatewayMetrics,
    hot: {} as PlanMetrics,
    idleMs: 60_000,
    maxLifetimeMs: 60_000,
    fleetSize: fleet,
    throttle: cap,
  });
  const inner = l as unknown as { budget(id: string): Budget; tick(): void };
  return { ledger: l, budget: (id) => inner.budget(id) };
}

function stream(b: Budget): PassThrough {
  const s = new PassThrough();
  s.resume();
  const conn = new Metered({ bytesRead: 0, bytesWritten: 0, writableLength: 0 } as net.Socket);
  conn.sources = [s];
  b.conns.add(conn);
  return s;
}

beforeEach(() => {
  jest.useFakeTimers();
});
afterEach(() => {
  jest.useRealTimers();
});

describe('the ledger throttle', () => {
  it('gives each gateway cap / fleet size, follows the fleet and the cap on the tick', () => {
    let cap = 1024 * KiB;
    let fleet = 2;
    const { ledger: l, budget } = ledger(
      () => cap,
      () => fleet,
    );
    const b = budget('a');
    expect(b.bucket?.rate).toBe(512 * KiB);
    fleet = 1;
    (l as unknown as { tick(): void }).tick();
    expect(b.bucket?.rate).toBe(1024 * KiB);
    cap = 0;
    (l as unknown as { tick(): void }).tick();
    expect(b.bucket).toBeUndefined();
  });

  it('costs an unthrottled budget nothing: no bucket', () => {
    const { budget } = ledger(
      () => 0,
      () => 1,
    );
    expect(budget('a').bucket).toBeUndefined();
  });

  it('holds the budget when a chunk puts the bucket in debt and releases it when paid', () => {
    const { ledger: l, budget } = ledger(
      () => 1024 * KiB,
      () => 1,
    );
    const b = budget('a');
    const [s1, s2] = [stream(b), stream(b)];
    l.throttled(b, 1024 * KiB); // the burst
    expect(s1.isPaused()).toBe(false);
    l.throttled(b, 128 * KiB); // 125 ms of debt
    expect([s1.isPaused(), s2.isPaused(), b.holds]).toEqual([true, true, HOLD_THROTTLE]);
    jest.advanceTimersByTime(100);
    expect(s1.isPaused()).toBe(true);
    jest.advanceTimersByTime(30);
    expect([s1.isPaused(), s2.isPaused(), b.holds]).toEqual([false, false, 0]);
  });

  it('waits again for chunks that arrived while holding', () => {
    const { ledger: l, budget } = ledger(
      () => 1024 * KiB,
      () => 1,
    );
    const b = budget('a');
    const s = stream(b);
    l.throttled(b, 1024 * KiB + 64 * KiB); // 62.5 ms
    l.throttled(b, 64 * KiB); // an in-flight chunk: 125 ms in all
    jest.advanceTimersByTime(70);
    expect(s.isPaused()).toBe(true);
    jest.advanceTimersByTime(60);
    expect(s.isPaused()).toBe(false);
  });

  it('a throttle release leaves a lease hold standing, and a lease release a throttle hold', () => {
    const { ledger: l, budget } = ledger(
      () => 1024 * KiB,
      () => 1,
    );
    const b = budget('a');
    const s = stream(b);
    b.hold(HOLD_LEASE);
    l.throttled(b, 1024 * KiB + 128 * KiB);
    jest.advanceTimersByTime(200);
    expect([s.isPaused(), b.holds]).toEqual([true, HOLD_LEASE]);
    b.release(HOLD_LEASE);
    expect(s.isPaused()).toBe(false);

    l.throttled(b, 128 * KiB);
    b.release(HOLD_LEASE);
    expect([s.isPaused(), b.holds]).toEqual([true, HOLD_THROTTLE]);
    jest.advanceTimersByTime(200);
    expect(s.isPaused()).toBe(false);
  });
});
