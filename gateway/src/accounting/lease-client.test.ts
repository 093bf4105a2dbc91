// The give-back wait without a database: the one loop of both askers (an admission and a draw
// while connections run) asks again every CONTENDED_POLL_MS while the answer is contended, and
// lets the answer stand after CONTENDED_WAIT_MS. The clock is the test's.
import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { untilGivenBack } from './lease-client.ts';
import { CONTENDED_POLL_MS, CONTENDED_WAIT_MS } from './policy.ts';

beforeEach(() => {
  jest.useFakeTimers({ now: 0 });
});
afterEach(() => {
  jest.useRealTimers();
});

describe('the give-back wait', () => {
  it('asks once when the answer is not contended', async () => {
    let asked = 0;
    const answer = await untilGivenBack(
      async () => ++asked,
      () => false,
    );
    expect([answer, asked]).toEqual([1, 1]);
  });

  it('asks again every poll while contended, until the answer changes', async () => {
    const times: number[] = [];
    const waiting = untilGivenBack(
      async () => times.push(Date.now()),
      (n) => n < 3,
    );
    await jest.advanceTimersByTimeAsync(10 * CONTENDED_POLL_MS);
    expect(await waiting).toBe(3);
    expect(times).toEqual([0, CONTENDED_POLL_MS, 2 * CONTENDED_POLL_MS]);
  });

  it('lets a contended answer stand after the wait', async () => {
    const times: number[] = [];
    const waiting = untilGivenBack(
      async () => times.push(Date.now()),
      () => true,
    );
    await jest.advanceTimersByTimeAsync(2 * CONTENDED_WAIT_MS);
    expect(await waiting).toBe(times.length);
    // The last answer is the first one asked past the wait; none is asked after it.
    expect(times.at(-2)).toBeLessThanOrEqual(CONTENDED_WAIT_MS);
    expect(times.at(-1)).toBe(CONTENDED_WAIT_MS + CONTENDED_POLL_MS);
  });
});
