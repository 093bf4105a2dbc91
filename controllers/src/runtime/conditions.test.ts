import { expect, test } from '@jest/globals';
import { setConditions, transitions } from './conditions.ts';

const t0 = new Date('2026-01-01T00:00:00.123Z');
const t1 = new Date('2026-01-01T00:05:00Z');

test('lastTransitionTime moves only when the status changes; observedGeneration always follows', () => {
  const first = setConditions(
    undefined,
    [{ type: 'Ready', status: 'False', reason: 'NoReadyPods', message: '0/2' }],
    1,
    t0,
  );
  expect(first).toEqual([
    {
      type: 'Ready',
      status: 'False',
      reason: 'NoReadyPods',
      message: '0/2',
      observedGeneration: 1,
      lastTransitionTime: '2026-01-01T00:00:00Z',
    },
  ]);
  const same = setConditions(
    first,
    [{ type: 'Ready', status: 'False', reason: 'NoReadyPods', message: '0/3' }],
    2,
    t1,
  );
  expect(same[0]).toMatchObject({
    message: '0/3',
    observedGeneration: 2,
    lastTransitionTime: '2026-01-01T00:00:00Z',
  });
  const flipped = setConditions(
    same,
    [{ type: 'Ready', status: 'True', reason: 'PodsReady', message: '3/3' }],
    2,
    t1,
  );
  expect(flipped[0]).toMatchObject({ status: 'True', lastTransitionTime: '2026-01-01T00:05:00Z' });
  expect(transitions(same, flipped).map((c) => c.type)).toEqual(['Ready']);
  expect(transitions(flipped, flipped)).toEqual([]);
});

test('conditions of other types are kept', () => {
  const a = setConditions(undefined, [{ type: 'Synced', status: 'True', reason: 'X', message: '' }], 1, t0);
  const b = setConditions(a, [{ type: 'Ready', status: 'True', reason: 'Y', message: '' }], 1, t0);
  expect(b.map((c) => c.type)).toEqual(['Synced', 'Ready']);
});
