// The throttle's token bucket without sockets or timers: its maths, its bound both ways over any
// sequence of chunks, and each gateway's share of a fleet-wide cap (docs/adr/0035).
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { MIN_THROTTLE_BYTES_PER_SECOND } from '#common/throttle.ts';
import { MIN_BURST_BYTES, newBucket, perPodRate, refill, setRate, take, waitMs } from './bucket.ts';

const KiB = 1024;

describe('token bucket', () => {
  it('starts full with a burst of one second, at least one socket read', () => {
    expect(newBucket(512 * KiB, 0)).toEqual({ rate: 512 * KiB, burst: 512 * KiB, tokens: 512 * KiB, at: 0 });
    expect(newBucket(1000, 0).burst).toBe(MIN_BURST_BYTES);
  });

  it('lets the burst through, then asks to wait for the debt at the rate', () => {
    const b = newBucket(512 * KiB, 0);
    expect(take(b, 512 * KiB, 0)).toBe(0);
    expect(take(b, 64 * KiB, 0)).toBe(125); // 64 KiB at 512 KiB/s
    expect(take(b, 64 * KiB, 0)).toBe(250); // debts add up
    expect(take(b, 0, 250)).toBe(0); // paid
    expect(b.tokens).toBe(0);
  });

  it('refills at the rate, never past the burst', () => {
    const b = newBucket(100 * KiB, 0);
    take(b, 100 * KiB, 0);
    refill(b, 500);
    expect(b.tokens).toBe(50 * KiB);
    refill(b, 60_000);
    expect(b.tokens).toBe(100 * KiB);
    refill(b, 10); // a clock that went back changes nothing
    expect(b.tokens).toBe(100 * KiB);
  });

  it('keeps a debt across a change of rate, and pays it at the new rate', () => {
    const b = newBucket(100 * KiB, 0);
    take(b, 150 * KiB, 0);
    expect(waitMs(b)).toBe(500);
    setRate(b, 200 * KiB, 0);
    expect(waitMs(b)).toBe(250);
    expect(b.burst).toBe(200 * KiB);
    setRate(b, 64 * KiB, 1000); // saved tokens are cut to the new burst
    expect(b.tokens).toBe(64 * KiB);
  });

  it('over any sequence of chunks, a caller that waits as told moves rate x time, within a burst and a chunk', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: MIN_THROTTLE_BYTES_PER_SECOND, max: 100_000_000 }),
        fc.array(fc.record({ bytes: fc.integer({ min: 1, max: 64 * KiB }), gap: fc.nat(50) }), {
          minLength: 1,
          maxLength: 400,
        }),
        (rate, chunks) => {
          const b = newBucket(rate, 0);
          let now = 0;
          let moved = 0;
          let waited = 0;
          for (const { bytes, gap } of chunks) {
            now += gap;
            moved += bytes;
            const wait = take(b, bytes, now);
            now += wait;
            waited += wait;
          }
          // Never more than the burst plus the rate over the time, plus one chunk of debt.
          expect(moved).toBeLessThanOrEqual(b.burst + (rate * now) / 1000 + 1);
          // Never made to wait longer than the rate requires (1 ms rounding per wait).
          expect((rate * (waited - chunks.length)) / 1000).toBeLessThanOrEqual(moved);
        },
      ),
    );
  });
});

describe("a gateway's share of a fleet-wide cap", () => {
  it('is the cap divided by the live gateways of the plan', () => {
    expect(perPodRate(1024 * KiB, 1)).toBe(1024 * KiB);
    expect(perPodRate(1024 * KiB, 2)).toBe(512 * KiB);
    expect(perPodRate(1000 * KiB, 3)).toBe(Math.floor((1000 * KiB) / 3));
  });

  it('counts a fleet size of 0 (no heartbeat yet) as one gateway', () => {
    expect(perPodRate(1024 * KiB, 0)).toBe(1024 * KiB);
  });
});
