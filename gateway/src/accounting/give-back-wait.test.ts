// The give-back wait of an admission right after an outage, through the budget core without a
// database (lease answers as the test says; the clock is the test's). After a failover the other
// gateways hear a give-back request only once their feeds and pools are back: an admission that
// waited the usual 2 s from the promotion answered 402 while they still held the balance's bytes
// (docs/adr/0095). Within OUTAGE_RECOVERY_MS of a failed lease request it waits longer.
import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { Registry } from 'prom-client';
import { createLogger } from '#common/logger.ts';
import { createGatewayMetrics, type PlanMetrics } from '../metrics.ts';
import { Budgets } from './budgets.ts';
import { Connections } from './connections.ts';
import type { LeaseAnswer } from './lease-client.ts';
import { OutageCredit } from './outage-credit.ts';
import * as policy from './policy.ts';
import { Throttle } from './throttle.ts';

const FAILED: LeaseAnswer = { kind: 'failed', error: new Error('connection refused') };
/** Nothing free; live gateways' leases hold 8 MiB (they were asked to give back). */
const HELD: LeaseAnswer = { kind: 'denied', held: 8 << 20, stranded: 0, othersHold: true };
const GRANT: LeaseAnswer = {
  kind: 'granted',
  id: 'l1',
  granted: 4 << 20,
  expiresAt: 10_000_000,
  free: 0,
  held: 4 << 20,
};

/** A budget core whose lease requests are answered by `answer(now)`. */
function core(answer: (now: number) => LeaseAnswer) {
  const metrics = createGatewayMetrics(new Registry());
  return new Budgets({
    plan: 'basic',
    logger: createLogger('test', 'silent'),
    metrics,
    leases: { acquireOrWait: async () => answer(Date.now()), shrink: () => undefined },
    connections: new Connections({} as PlanMetrics, { idleMs: 60_000, maxLifetimeMs: 60_000 }),
    outage: new OutageCredit(() => 1),
    throttle: new Throttle({ metrics, fleetSize: () => 1, throttle: () => 0, subUserThrottle: () => 0 }),
  });
}

beforeEach(() => {
  jest.useFakeTimers({ now: 100_000 });
});
afterEach(() => {
  jest.useRealTimers();
});

describe('the give-back wait after an outage', () => {
  it('waits past 2 s for the other gateways when a lease request failed just before', async () => {
    const start = Date.now();
    // The database is away for 5 s; then the others give back 3.5 s after it returned.
    const budgets = core((now) => (now < start + 5_000 ? FAILED : now < start + 8_500 ? HELD : GRANT));
    const b = budgets.get('r');
    expect(await budgets.admit(b)).toBe('unavailable');
    await jest.advanceTimersByTimeAsync(5_000);
    const admitted = budgets.admit(b);
    await jest.advanceTimersByTimeAsync(policy.CONTENDED_WAIT_AFTER_OUTAGE_MS + 1_000);
    // It was 'denied' (402 with bytes still in the balance) with the 2 s wait.
    expect(await admitted).toBe('ok');
    expect(b.state.available).toBe(4 << 20);
  });

  it('answers within the longer wait when nothing comes back (bounded)', async () => {
    const start = Date.now();
    const budgets = core((now) => (now < start + 1_000 ? FAILED : HELD));
    const b = budgets.get('r');
    await budgets.admit(b);
    await jest.advanceTimersByTimeAsync(1_000);
    let answeredAt = 0;
    const admitted = budgets.admit(b).then((v) => ((answeredAt = Date.now()), v));
    await jest.advanceTimersByTimeAsync(3 * policy.CONTENDED_WAIT_AFTER_OUTAGE_MS);
    expect(await admitted).toBe('denied');
    expect(answeredAt - (start + 1_000)).toBeLessThanOrEqual(
      policy.CONTENDED_WAIT_AFTER_OUTAGE_MS + policy.CONTENDED_POLL_MS,
    );
  });

  it('keeps the 2 s wait when the database has answered for a while', async () => {
    const budgets = core(() => HELD);
    const b = budgets.get('r');
    let answeredAt = 0;
    const start = Date.now();
    const admitted = budgets.admit(b).then((v) => ((answeredAt = Date.now()), v));
    await jest.advanceTimersByTimeAsync(3 * policy.CONTENDED_WAIT_AFTER_OUTAGE_MS);
    expect(await admitted).toBe('denied');
    expect(answeredAt - start).toBe(policy.CONTENDED_WAIT_MS + policy.CONTENDED_POLL_MS);
  });

  it('is longer only within OUTAGE_RECOVERY_MS of the failure', () => {
    expect(policy.contendedWaitMs(0, 50_000)).toBe(policy.CONTENDED_WAIT_MS);
    expect(policy.contendedWaitMs(50_000, 50_000 + policy.OUTAGE_RECOVERY_MS - 1)).toBe(
      policy.CONTENDED_WAIT_AFTER_OUTAGE_MS,
    );
    expect(policy.contendedWaitMs(50_000, 50_000 + policy.OUTAGE_RECOVERY_MS)).toBe(policy.CONTENDED_WAIT_MS);
  });
});
