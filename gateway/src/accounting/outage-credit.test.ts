// The outage credit through the budget core, without a database: every lease request answered
// as the test says (a failure, as when the database is unreachable, unless told otherwise). The
// budgets of one account share one credit per outage, sized by the account's balance.
import { describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { createLogger } from '#common/logger.ts';
import { createGatewayMetrics, type PlanMetrics } from '../metrics.ts';
import { Budgets } from './budgets.ts';
import { allocate } from './lease-book.ts';
import { Connections } from './connections.ts';
import type { LeaseAnswer } from './lease-client.ts';
import { OutageCredit, outageCredit } from './outage-credit.ts';
import * as policy from './policy.ts';
import { Throttle } from './throttle.ts';

const MiB = 1024 * 1024;
const FAILED: LeaseAnswer = { kind: 'failed', error: new Error('connection refused') };

/** A budget core whose lease requests get `answers` in turn, then failures (or `ask`'s answers). */
function core(answers: LeaseAnswer[] = [], ask?: () => Promise<LeaseAnswer>) {
  const metrics = createGatewayMetrics(new Registry());
  const outage = new OutageCredit(() => 1);
  const budgets = new Budgets({
    plan: 'basic',
    logger: createLogger('test', 'silent'),
    metrics,
    leases: { acquireOrWait: ask ?? (async () => answers.shift() ?? FAILED), shrink: () => undefined },
    connections: new Connections({} as PlanMetrics, { idleMs: 60_000, maxLifetimeMs: 60_000 }),
    outage,
    throttle: new Throttle({ metrics, fleetSize: () => 1, throttle: () => 0, subUserThrottle: () => 0 }),
  });
  return { budgets, outage };
}

describe('outage credit', () => {
  it('is shared: a sub-user is not given again what the account was given', async () => {
    const { budgets, outage } = core();
    outage.remember('a', 10 * MiB, Date.now());
    const own = budgets.get('a');
    const sub = budgets.get('a', 's1');
    expect(await budgets.admit(own)).toBe('ok');
    expect(await budgets.admit(sub)).toBe('unavailable');
    expect([own.state.available, sub.state.available]).toEqual([10 * MiB, 0]);
  });

  it("is sized by the account's balance, not by what a sub-user's limit left", async () => {
    // The sub-user is granted its limit's last 100 KiB: the database says 0 is free for it.
    const limited: LeaseAnswer = {
      kind: 'granted',
      id: 'l',
      granted: 100 * 1024,
      expiresAt: Date.now() + 600_000,
      free: 0,
      held: 100 * 1024,
      subUserLimited: true,
    };
    const { budgets, outage } = core([limited]);
    outage.remember('a', 100 * MiB, Date.now());
    const own = budgets.get('a');
    const sub = budgets.get('a', 's1');
    expect(await budgets.admit(sub)).toBe('ok');
    // Then the database is unreachable: the account's own traffic keeps its whole credit.
    expect(await budgets.admit(own)).toBe('ok');
    expect(own.state.available).toBe(outageCredit(100 * MiB, 1));
  });

  it('is not given to a sub-user its limit last denied', async () => {
    const { budgets, outage } = core();
    outage.remember('a', 10 * MiB, Date.now());
    const sub = budgets.get('a', 's1');
    policy.denied(sub.state, 0, Date.now() - 10_000, 0, true);
    expect(await budgets.admit(sub)).toBe('unavailable');
    expect([sub.state.available, sub.state.unavailable]).toEqual([0, true]);
  });

  it('is not given to an account never served here (503 until the database answers)', async () => {
    const { budgets } = core();
    const b = budgets.get('stranger');
    expect(await budgets.admit(b)).toBe('unavailable');
    expect(b.state.available).toBe(0);
  });

  it('is given once per outage: again only after a grant', async () => {
    const { budgets, outage } = core();
    outage.remember('a', 10 * MiB, Date.now());
    const own = budgets.get('a');
    expect(await budgets.admit(own)).toBe('ok');
    expect(budgets.databaseDown).toBe(true);
    expect(outage.unreachable(own, Date.now())).toBe(0);
    // The database is back: the next outage gives credit again.
    policy.granted(own.state, { id: 'l', granted: MiB, expiresAt: Date.now() + 600_000 }, 0, Date.now());
    outage.granted(own, 10 * MiB, false, Date.now());
    expect(outage.unreachable(own, Date.now())).toBe(10 * MiB);
  });

  it("when none was given, leaves the overdraft to continue across an admission's draw", async () => {
    // The overdraft a failed draw ran past the leases is covered by nothing when the failure gave
    // no credit: an admission asking again (UNAVAILABLE_RECHECK_MS later) continues it, as a
    // redraw does (policy.test.ts). It started a second OVERDRAFT_BYTES for the connections still
    // relaying.
    const answers: ((a: LeaseAnswer) => void)[] = [];
    const { budgets } = core([], () => new Promise((r) => answers.push(r)));
    const b = budgets.get('a');
    const admitted = budgets.admit(b);
    // 1 byte granted, and nothing left free: no credit in the next outage.
    answers.shift()!({
      kind: 'granted',
      id: 'l',
      granted: 1,
      expiresAt: Date.now() + 600_000,
      free: 0,
      held: 1,
    });
    expect(await admitted).toBe('ok');
    b.state.estimate = 2;
    budgets.pressure(b);
    // 193 KiB run past the lease while that draw is pending (a tick's exact counts), then it fails.
    allocate(b.state, 193 * 1024);
    b.state.estimate = 0;
    answers.shift()!(FAILED);
    await b.pending;
    expect([b.state.unavailable, b.state.cutOff]).toEqual([true, false]);
    b.state.deniedAt -= policy.UNAVAILABLE_RECHECK_MS;
    const again = budgets.admit(b);
    b.state.estimate = 64 * 1024;
    budgets.pressure(b);
    expect(b.state.cutOff).toBe(true);
    answers.shift()!(FAILED);
    expect(await again).toBe('unavailable');
  });
});
