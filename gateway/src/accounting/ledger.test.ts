// The ledger's throttle without a database: the bucket it gives a budget (the cap shared by the
// fleet), the hold when a chunk puts it in debt, the timed release, and a lease hold that neither
// releases nor is released by it (docs/adr/0035). No lease is ever asked for here.
import type net from 'node:net';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { createLogger } from '#common/logger.ts';
import type { Pool } from '#common/db/pool.ts';
import { Registry } from 'prom-client';
import { createGatewayMetrics, type PlanMetrics } from '../metrics.ts';
import { EventEmitter } from 'node:events';
import type { Budgets } from './budgets.ts';
import { allocate } from './lease-book.ts';
import { Ledger, perPodConnections, type LedgerOptions } from './ledger.ts';
import { HOLD_LEASE, HOLD_SUB_THROTTLE, HOLD_THROTTLE, Metered, type Budget } from './meter.ts';
import * as policy from './policy.ts';

const KiB = 1024;
const MiB = 1024 * KiB;

/** A ledger with no database (no lease is ever asked for here), its budgets reached directly. */
function unitLedger(opts: Partial<LedgerOptions> = {}) {
  const l = new Ledger({
    pool: {} as Pool,
    gatewayId: 'unit',
    plan: 'basic',
    logger: createLogger('test', 'silent'),
    metrics: createGatewayMetrics(new Registry()),
    hot: {} as PlanMetrics,
    idleMs: 60_000,
    maxLifetimeMs: 60_000,
    ...opts,
  });
  const core = (l as unknown as { budgets: Budgets }).budgets;
  return { ledger: l, budget: (id: string, sub?: string) => core.get(id, sub) };
}

const ledger = (cap: () => number, fleet: () => number) => unitLedger({ throttle: cap, fleetSize: fleet });

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

/**
 * A source whose resume() relays what it had read before it was paused at once, inside the call,
 * as the raw upstream client's Valve does (resume → flow → parser.proceed → body → Tab.onChunk):
 * `relay(bytes)` is what that relaying costs the budget.
 */
function eagerStream(
  b: Budget,
  relay: (bytes: number) => void,
): { s: PassThrough; stall(bytes: number): void } {
  const s = stream(b);
  let stalled = 0;
  const resume = s.resume.bind(s);
  s.resume = () => {
    resume();
    const bytes = stalled;
    stalled = 0;
    if (bytes) relay(bytes);
    return s;
  };
  return { s, stall: (bytes) => (stalled += bytes) };
}

describe('a release whose resumed stream relays at once (the raw client, docs/adr/0038)', () => {
  // On a fast machine the throttle held nothing: throttle.int.test.ts's capped account moved 4 MB
  // at 10 MiB/s against a 512 KiB/s cap. The release resumed a Valve, its stalled bytes put the
  // bucket in debt again inside the release, the new hold skipped the streams still in the held
  // set, and the release then resumed them and cleared the set: held in name, flowing in fact.
  it('keeps the budget held when the resumed bytes put the bucket in debt again', () => {
    const { ledger: l, budget } = ledger(
      () => 1024 * KiB,
      () => 1,
    );
    const b = budget('a');
    const eager = eagerStream(b, (bytes) => l.throttled(b, bytes));
    const other = stream(b);
    l.throttled(b, 1024 * KiB + 128 * KiB); // the burst and 125 ms of debt
    eager.stall(128 * KiB); // read before the pause: relayed on resume, 125 ms more
    jest.advanceTimersByTime(130);
    expect([eager.s.isPaused(), other.isPaused(), b.holds, b.held.size]).toEqual([
      true,
      true,
      HOLD_THROTTLE,
      2,
    ]);
    jest.advanceTimersByTime(130);
    expect([eager.s.isPaused(), other.isPaused(), b.holds, b.held.size]).toEqual([false, false, 0, 0]);
  });

  it("keeps the account's other budgets held when the first one released goes back into debt", () => {
    const { ledger: l, budget } = ledger(
      () => 1024 * KiB,
      () => 1,
    );
    const own = budget('a');
    const sub = budget('a', 's1');
    const eager = eagerStream(own, (bytes) => l.throttled(own, bytes));
    const subStream = stream(sub);
    l.throttled(sub, 1024 * KiB + 128 * KiB);
    eager.stall(128 * KiB);
    jest.advanceTimersByTime(130);
    expect([eager.s.isPaused(), subStream.isPaused()]).toEqual([true, true]);
    expect([own.holds, sub.holds]).toEqual([HOLD_THROTTLE, HOLD_THROTTLE]);
    jest.advanceTimersByTime(130);
    expect([eager.s.isPaused(), subStream.isPaused()]).toEqual([false, false]);
  });

  it('keeps a lease hold that the resumed bytes ask for', () => {
    const { budget } = ledger(
      () => 0,
      () => 1,
    );
    const b = budget('a');
    const eager = eagerStream(b, () => b.hold(HOLD_LEASE));
    const other = stream(b);
    b.hold(HOLD_LEASE);
    eager.stall(64 * KiB);
    b.release(HOLD_LEASE);
    expect([eager.s.isPaused(), other.isPaused(), b.holds, b.held.size]).toEqual([true, true, HOLD_LEASE, 2]);
  });
});

describe('the budgets of one account (sub-users, docs/adr/0037)', () => {
  const groupLedger = (fleet = 1) => unitLedger({ fleetSize: () => fleet });

  /** A budget whose one lease is spent, with a grant pending, and one open connection. */
  function pendingAtItsLeases(b: Budget): { destroyed: () => boolean } {
    let destroyed = false;
    const socket = { bytesRead: 0, bytesWritten: 0, writableLength: 0, destroy: () => (destroyed = true) };
    const conn = new Metered(socket as unknown as net.Socket);
    b.conns.add(conn);
    policy.granted(b.state, { id: 'l', granted: MiB, expiresAt: Date.now() + 600_000 }, 0, Date.now());
    allocate(b.state, MiB);
    policy.drawStarted(b.state);
    return { destroyed: () => destroyed };
  }

  /** What Tab.onChunk does with a relayed chunk. */
  function chunk(l: Ledger, b: Budget, bytes: number): void {
    b.state.estimate += bytes;
    if (b.state.estimate > b.state.trigger) l.pressure(b);
  }

  it('share one overdraft while grants are pending: the sum is cut, not each budget alone', () => {
    const { ledger: l, budget } = groupLedger();
    const budgets = [budget('a'), budget('a', 's1'), budget('a', 's2'), budget('a', 's3')];
    const conns = budgets.map(pendingAtItsLeases);
    // Two run 90 KiB past their leases: alone, each is under HOLD_AT_BYTES and OVERDRAFT_BYTES;
    // together they are past the hold (the second one is held).
    for (const b of budgets.slice(0, 2)) for (let n = 0; n < 9; n++) chunk(l, b, 10 * KiB);
    expect(budgets.map((b) => policy.pendingOverdraft(b.state))).toEqual([90 * KiB, 90 * KiB, 0, 0]);
    expect(budgets.map((b) => b.holds)).toEqual([0, HOLD_LEASE, 0, 0]);
    // The third is cut as soon as the three together pass OVERDRAFT_BYTES (256 KiB): at 260 KiB.
    for (let n = 0; n < 7; n++) chunk(l, budgets[2]!, 10 * KiB);
    expect(conns.map((c) => c.destroyed())).toEqual([false, false, false, false]);
    chunk(l, budgets[2]!, 10 * KiB);
    expect(conns.map((c) => c.destroyed())).toEqual([false, false, true, false]);
    // What was relayed stays counted until the next tick: the fourth has nothing left to overdraw.
    chunk(l, budgets[3]!, 10 * KiB);
    expect(conns[3]!.destroyed()).toBe(true);
  });

  it('a budget alone keeps its own overdraft (no group, no change)', () => {
    const { ledger: l, budget } = groupLedger();
    const b = budget('solo', 's1');
    const conn = pendingAtItsLeases(b);
    for (let n = 0; n < 20; n++) chunk(l, b, 10 * KiB);
    expect([b.holds, conn.destroyed()]).toEqual([HOLD_LEASE, false]);
    for (let n = 0; n < 6; n++) chunk(l, b, 10 * KiB);
    expect(conn.destroyed()).toBe(true);
  });

  /** A fake customer socket the ledger can track. */
  function socket(): net.Socket {
    return Object.assign(new EventEmitter(), {
      bytesRead: 0,
      bytesWritten: 0,
      writableLength: 0,
      destroyed: false,
      destroy() {},
    }) as unknown as net.Socket;
  }

  function funded(b: Budget): void {
    policy.granted(b.state, { id: 'l', granted: 100 * MiB, expiresAt: Date.now() + 600_000 }, 0, Date.now());
    policy.recompute(b.state);
  }

  it("count all of an account's connections against the plan's cap, and a sub-user's against its share", async () => {
    const { ledger: l, budget } = groupLedger(2);
    for (const sub of [undefined, 's1', 's2']) funded(budget('a', sub));
    const s1 = { id: 's1', maxConnections: null };
    const s2 = { id: 's2', maxConnections: 3 }; // 2 per gateway of a fleet of 2
    expect(await l.admit('a', socket(), 3)).not.toBe('connection_limit');
    expect(await l.admit('a', socket(), 3, s1)).not.toBe('connection_limit');
    expect(await l.admit('a', socket(), 3, s2)).not.toBe('connection_limit');
    expect(await l.admit('a', socket(), 3, s1)).toBe('connection_limit');
    expect(await l.admit('a', socket(), 3)).toBe('connection_limit');
    // Under a higher plan cap, the sub-user's own share: ceil(3 / 2) = 2.
    expect(await l.admit('a', socket(), 100, s2)).not.toBe('connection_limit');
    expect(await l.admit('a', socket(), 100, s2)).toBe('connection_limit');
    expect(perPodConnections(3, 2)).toBe(2);
    expect(perPodConnections(1, 5)).toBe(1);
  });

  it("bills the next request's head on a keep-alive connection to whoever sends it, a tick before its admission included", async () => {
    const counter = { inc() {} };
    const { ledger: l, budget } = unitLedger({
      hot: { bytesUp: counter, bytesDown: counter } as unknown as PlanMetrics,
    });
    for (const sub of [undefined, 's1']) funded(budget('a', sub));
    const s = socket() as unknown as { bytesRead: number; bytesWritten: number } & net.Socket;
    // The account's request: its head in, its answer out, done.
    s.bytesRead = 100;
    const own = await l.admit('a', s, 10);
    if (typeof own === 'string') throw new Error(own);
    own.relaying();
    s.bytesWritten = 200;
    own.done();
    // The sub-user's head is read; its admission waits (a lease draw) while a tick runs.
    s.bytesRead = 244;
    (l as unknown as { tick(): void }).tick();
    const mine = await l.admit('a', s, 10, { id: 's1', maxConnections: null });
    if (typeof mine === 'string') throw new Error(mine);
    mine.relaying();
    s.bytesWritten = 330;
    mine.done();
    s.emit('close');
    const line = (b: Budget) => [b.bytesUp, b.bytesDown];
    expect([line(budget('a')), line(budget('a', 's1'))]).toEqual([
      [100, 200],
      [144, 130],
    ]);
  });
});

describe('a cut', () => {
  it('closes the connections relaying, and leaves one between two requests open for its next admission', async () => {
    const counter = { inc() {} };
    const { ledger: l, budget } = unitLedger({
      hot: { bytesUp: counter, bytesDown: counter } as unknown as PlanMetrics,
      metrics: createGatewayMetrics(new Registry()),
    });
    const b = budget('a');
    policy.granted(b.state, { id: 'l', granted: MiB, expiresAt: Date.now() + 600_000 }, 0, Date.now());
    policy.recompute(b.state);
    const sockets = [0, 1].map(
      () =>
        Object.assign(new EventEmitter(), {
          bytesRead: 0,
          bytesWritten: 0,
          writableLength: 0,
          destroyed: false,
          destroy(this: EventEmitter & { destroyed: boolean }) {
            this.destroyed = true;
            this.emit('close');
          },
        }) as unknown as net.Socket & { bytesRead: number; bytesWritten: number },
    );
    const [busy, idle] = sockets as [(typeof sockets)[0], (typeof sockets)[0]];
    for (const s of sockets) {
      s.bytesRead = 100;
      const tab = await l.admit('a', s, 10);
      if (typeof tab === 'string') throw new Error(tab);
      tab.relaying();
      s.bytesWritten = 1000;
      if (s === idle) tab.done();
    }
    idle.bytesRead = 150; // the next request's head, not admitted yet
    (l as unknown as { budgets: { cut(b: Budget): void } }).budgets.cut(b);
    expect([busy.destroyed, idle.destroyed]).toEqual([true, false]);
    expect([b.bytesUp, b.bytesDown, b.conns.size]).toEqual([200, 2000, 0]);
    // Its next request is admitted afresh and billed from the end of the last one.
    policy.granted(b.state, { id: 'm', granted: MiB, expiresAt: Date.now() + 600_000 }, 0, Date.now());
    policy.recompute(b.state);
    const next = await l.admit('a', idle, 10);
    if (typeof next === 'string') throw new Error(next);
    idle.emit('close');
    expect([b.bytesUp, b.bytesDown]).toEqual([250, 2000]);
  });
});

describe("the throttle of an account's sub-users (docs/adr/0037)", () => {
  const subLedger = (accountCap: number, subCap: number) =>
    unitLedger({ throttle: () => accountCap, subUserThrottle: () => subCap });

  it('costs budgets without any cap nothing', () => {
    const { budget } = subLedger(0, 0);
    expect([budget('a').throttled, budget('a', 's1').throttled]).toEqual([false, false]);
  });

  it("holds only the sub-user on its own cap's debt", () => {
    const { ledger: l, budget } = subLedger(0, 1024 * KiB);
    const own = budget('a');
    const sub = budget('a', 's1');
    const [so, ss] = [stream(own), stream(sub)];
    expect([own.throttled, sub.throttled]).toEqual([false, true]);
    l.throttled(sub, 1024 * KiB + 128 * KiB);
    expect([so.isPaused(), ss.isPaused(), sub.holds]).toEqual([false, true, HOLD_SUB_THROTTLE]);
    jest.advanceTimersByTime(130);
    expect(ss.isPaused()).toBe(false);
  });

  it("holds every budget of the account when its cap's bucket, fed by a sub-user, is in debt", () => {
    const { ledger: l, budget } = subLedger(1024 * KiB, 0);
    const own = budget('a');
    const [s1, s2] = [budget('a', 's1'), budget('a', 's2')];
    const streams = [own, s1, s2].map(stream);
    l.throttled(s1, 1024 * KiB);
    l.throttled(s2, 128 * KiB); // the account's bucket: 125 ms of debt
    expect(streams.map((s) => s.isPaused())).toEqual([true, true, true]);
    expect([own.holds, s1.holds, s2.holds]).toEqual([HOLD_THROTTLE, HOLD_THROTTLE, HOLD_THROTTLE]);
    jest.advanceTimersByTime(130);
    expect(streams.map((s) => s.isPaused())).toEqual([false, false, false]);
  });

  it("takes a sub-user's chunk from its own bucket and the account's", () => {
    const { ledger: l, budget } = subLedger(4096 * KiB, 1024 * KiB);
    const own = budget('a');
    const sub = budget('a', 's1');
    l.throttled(sub, 512 * KiB);
    expect(Math.round(sub.bucket!.tokens)).toBe(512 * KiB);
    expect(Math.round(own.bucket!.tokens)).toBe(3584 * KiB);
  });
});
