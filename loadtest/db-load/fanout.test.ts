// The load generator's fan-out timing: from the commit, any change that leaves the new password
// in a pod's cache, each pod once.
import { createHash } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { FanoutTimer } from './fanout.ts';

const hash = (password: string) => createHash('sha256').update(password).digest('hex');

describe('FanoutTimer', () => {
  it('times from the commit, counts a pod once, and only with the new password', () => {
    const t = new FanoutTimer();
    t.requested('a', 3, 1_000);
    // Applied before the admin call resolved: 0 ms from the commit, 50 from the request.
    t.applied('p1', 'a', 1_050, hash('new'));
    // A change of the account before the reset reached it (the old password): not yet.
    t.applied('p2', 'a', 1_060, hash('old'));
    t.committed('a', 'new', 1_100);
    t.applied('p2', 'a', 1_150, hash('new'));
    t.applied('p2', 'a', 1_160, hash('new'));
    expect(t.pending('a')).toBe(true);
    // A pod that re-snapshotted: the snapshot's `account` change carries the new password too.
    t.applied('p3', 'a', 1_400, hash('new'));
    expect(t.pending('a')).toBe(false);
    expect(t.fromCommit.each.all()).toEqual([0, 50, 300]);
    expect(t.fromRequest.each.all()).toEqual([50, 150, 400]);
    expect(t.fromCommit.all.all()).toEqual([300]);
    expect(t.fromRequest.all.all()).toEqual([400]);
  });

  it('forgets a change whose admin call failed', () => {
    const t = new FanoutTimer();
    t.requested('a', 1, 0);
    t.failed('a');
    t.applied('p1', 'a', 10, hash('x'));
    expect(t.pending('a')).toBe(false);
    expect(t.fromCommit.each.all()).toEqual([]);
  });
});
