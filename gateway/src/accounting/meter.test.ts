// A budget's holds: each reason (a lease on its way, the throttle) holds the streams on its own,
// and releasing one never resumes streams another still holds (docs/adr/0035).
import type net from 'node:net';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import { Budget, HOLD_LEASE, HOLD_THROTTLE, Metered } from './meter.ts';

function budgetWithStreams(n: number): { b: Budget; streams: PassThrough[] } {
  const b = new Budget('account', 'basic');
  const streams: PassThrough[] = [];
  for (let i = 0; i < n; i++) {
    const conn = new Metered({} as net.Socket);
    const stream = new PassThrough();
    stream.resume();
    conn.sources = [stream];
    b.conns.add(conn);
    streams.push(stream);
  }
  return { b, streams };
}

const paused = (streams: PassThrough[]) => streams.map((s) => s.isPaused());

describe('budget holds', () => {
  it.each([
    ['lease first', HOLD_LEASE, HOLD_THROTTLE],
    ['throttle first', HOLD_THROTTLE, HOLD_LEASE],
  ])('do not release each other (%s)', (_, first, second) => {
    const { b, streams } = budgetWithStreams(3);
    b.hold(first);
    b.hold(second);
    expect(paused(streams)).toEqual([true, true, true]);
    b.release(first);
    expect(paused(streams)).toEqual([true, true, true]);
    expect(b.holds).toBe(second);
    b.release(second);
    expect(paused(streams)).toEqual([false, false, false]);
    expect(b.holds).toBe(0);
    expect(b.held.size).toBe(0);
  });

  it('a release of a reason that does not stand resumes nothing held for another', () => {
    const { b, streams } = budgetWithStreams(2);
    b.hold(HOLD_THROTTLE);
    b.release(HOLD_LEASE);
    expect(paused(streams)).toEqual([true, true]);
  });

  it('holds streams that start under a standing hold, and nothing when none stands', () => {
    const { b, streams } = budgetWithStreams(1);
    b.hold(0);
    expect(paused(streams)).toEqual([false]);
    b.hold(HOLD_THROTTLE);
    const late = new PassThrough();
    late.resume();
    const conn = new Metered({} as net.Socket);
    conn.sources = [late];
    b.conns.add(conn);
    b.hold(0);
    expect(late.isPaused()).toBe(true);
    b.release(HOLD_THROTTLE);
    expect(late.isPaused()).toBe(false);
  });
});
