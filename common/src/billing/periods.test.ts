import { describe, expect, it } from '@jest/globals';
import { periodAt, periodStart } from './periods.ts';

const d = (iso: string) => new Date(iso);
const starts = (started: string, count: number) =>
  Array.from({ length: count }, (_, n) => periodStart(d(started), n).toISOString().slice(0, 10));

describe('subscription periods', () => {
  it('keep the anchor day across shorter months (31 Jan -> 28 Feb -> 31 Mar)', () => {
    expect(starts('2027-01-31T00:00:00Z', 4)).toEqual([
      '2027-01-31',
      '2027-02-28',
      '2027-03-31',
      '2027-04-30',
    ]);
  });

  it('land on 29 February in a leap year and 28 in the next', () => {
    expect(starts('2028-01-31T00:00:00Z', 2)).toEqual(['2028-01-31', '2028-02-29']);
    expect(starts('2028-02-29T00:00:00Z', 13)[12]).toBe('2029-02-28');
    expect(starts('2028-02-29T00:00:00Z', 2)[1]).toBe('2028-03-29');
  });

  it('cross the year and keep the time of day in UTC', () => {
    expect(periodStart(d('2026-12-15T23:59:59.500Z'), 1).toISOString()).toBe('2027-01-15T23:59:59.500Z');
    expect(periodStart(d('2026-11-30T00:00:00Z'), 3).toISOString()).toBe('2027-02-28T00:00:00.000Z');
  });

  it('refuse a negative or fractional period', () => {
    expect(() => periodStart(d('2027-01-01T00:00:00Z'), -1)).toThrow(RangeError);
    expect(() => periodStart(d('2027-01-01T00:00:00Z'), 1.5)).toThrow(RangeError);
  });

  it('find the period of an instant, the boundary belonging to the new period (UTC midnight)', () => {
    const started = d('2027-01-31T00:00:00Z');
    expect(periodAt(started, d('2027-01-30T23:59:59Z'))).toBe(-1);
    expect(periodAt(started, started)).toBe(0);
    expect(periodAt(started, d('2027-02-27T23:59:59.999Z'))).toBe(0);
    expect(periodAt(started, d('2027-02-28T00:00:00Z'))).toBe(1);
    expect(periodAt(started, d('2027-03-30T23:59:59Z'))).toBe(1);
    expect(periodAt(started, d('2027-03-31T00:00:00Z'))).toBe(2);
    expect(periodAt(started, d('2029-02-01T00:00:00Z'))).toBe(24);
  });
});
