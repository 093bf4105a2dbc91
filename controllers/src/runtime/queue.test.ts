import { afterEach, expect, jest, test } from '@jest/globals';
import { WorkQueue } from './queue.ts';

afterEach(() => {
  jest.useRealTimers();
});

test('a key added many times is queued once', async () => {
  const q = new WorkQueue();
  q.add('a');
  q.add('a');
  q.add('b');
  q.add('a');
  expect(q.length).toBe(2);
  expect(await q.get()).toBe('a');
  expect(await q.get()).toBe('b');
  expect(q.length).toBe(0);
});

test('a key added while it is processed is processed again afterwards, never twice at once', async () => {
  const q = new WorkQueue();
  q.add('a');
  const key = await q.get();
  q.add('a');
  expect(q.length).toBe(0); // held back while processing
  q.done(key!);
  expect(q.length).toBe(1);
  expect(await q.get()).toBe('a');
});

test('get() waits for a key; shutdown releases waiters with undefined', async () => {
  const q = new WorkQueue();
  const waiting = q.get();
  q.add('x');
  expect(await waiting).toBe('x');
  const second = q.get();
  q.shutdown();
  expect(await second).toBeUndefined();
  q.add('y');
  expect(await q.get()).toBeUndefined();
});

test('failures back off exponentially per key, capped, and forget() resets', () => {
  jest.useFakeTimers();
  const q = new WorkQueue({ baseDelayMs: 100, maxDelayMs: 1_000 });
  expect([1, 2, 3, 4, 5, 6].map(() => q.addRateLimited('a'))).toEqual([100, 200, 400, 800, 1_000, 1_000]);
  expect(q.addRateLimited('b')).toBe(100);
  q.forget('a');
  expect(q.addRateLimited('a')).toBe(100);
  q.shutdown();
});

test('addAfter adds the key when the delay passes; an earlier schedule wins', () => {
  jest.useFakeTimers();
  const q = new WorkQueue();
  q.addAfter('a', 500);
  q.addAfter('a', 100);
  jest.advanceTimersByTime(99);
  expect(q.length).toBe(0);
  jest.advanceTimersByTime(1);
  expect(q.length).toBe(1);
  jest.advanceTimersByTime(1_000);
  expect(q.length).toBe(1);
  q.shutdown();
});
