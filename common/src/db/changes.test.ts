// The change feed's reconnect schedule (changes.ts): after a failover, every process must hear
// the changes it missed soon after the database is back.
import { describe, expect, it } from '@jest/globals';
import { reconnectDelayMs } from './changes.ts';

describe('the change feed reconnect schedule', () => {
  it('retries within a second of the database return however long the outage was', () => {
    for (let failures = 1; failures <= 50; failures++)
      for (const r of [0, 0.5, 0.999])
        expect(reconnectDelayMs(failures, undefined, () => r)).toBeLessThanOrEqual(1_000);
  });

  it('doubles from 200 ms, jittered down to half so a fleet does not reconnect in one wave', () => {
    expect([1, 2, 3].map((f) => reconnectDelayMs(f, 1_000, () => 1))).toEqual([200, 400, 800]);
    expect([1, 2, 3].map((f) => reconnectDelayMs(f, 1_000, () => 0))).toEqual([100, 200, 400]);
  });
});
