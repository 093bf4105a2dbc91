import { describe, expect, it } from '@jest/globals';
import { PRE_STOP, untilQuiet } from './prestop.ts';

// A clock that moves 100 ms each time it is read; `arrivals` are when connections came.
function clock(arrivals: number[]) {
  let t = 0;
  const now = () => (t += 100);
  const lastConnectionAt = () => Math.max(-1, ...arrivals.filter((a) => a <= t));
  return { now, lastConnectionAt };
}
const fast = { ...PRE_STOP, pollMs: 0 };

describe('the gateway preStop (untilQuiet)', () => {
  it('waits the minimum when no connection comes', async () => {
    const c = clock([]);
    const r = await untilQuiet(c.lastConnectionAt, fast, c.now);
    expect(r.ended).toBe('quiet');
    expect(r.waitedMs).toBe(PRE_STOP.minMs);
  });

  it('keeps accepting while connections arrive, and ends quietMs after the last one', async () => {
    // Connections keep coming for 6 s (kube-proxy still sends them), then none.
    const c = clock(Array.from({ length: 60 }, (_, i) => 100 + i * 100));
    const r = await untilQuiet(c.lastConnectionAt, fast, c.now);
    expect(r.ended).toBe('quiet');
    // The wait began at the clock's first reading (100 ms); the last connection came at 6 s.
    expect(r.waitedMs).toBe(6_000 + PRE_STOP.quietMs - 100);
  });

  it('gives up at the bound when connections never stop', async () => {
    const c = clock(Array.from({ length: 300 }, (_, i) => 100 + i * 100));
    const r = await untilQuiet(c.lastConnectionAt, fast, c.now);
    expect(r.ended).toBe('bound');
    expect(r.waitedMs).toBe(PRE_STOP.maxMs);
  });
});
