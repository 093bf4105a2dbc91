// The one rounding rule for bandwidth shown to customers (docs/api.md, "Remaining bandwidth").
import { describe, expect, test } from '@jest/globals';
import { bandwidthIn, bandwidthText } from './remaining.ts';

describe('bandwidthIn', () => {
  test.each([
    [0, 0],
    [-5, 0],
    [1, 0.000000001],
    [246_388, 0.000246],
    [1_200_000, 0.0012],
    [999_999_999, 0.999],
    [1_750_000_000, 1.75],
    [1_999_999_999, 1.999],
    [1_234_567_890_123, 1234.567],
  ])('%d B is %d GB: rounded down to 3 decimals or 3 significant digits', (bytes, gb) => {
    expect(bandwidthIn('GB', bytes)).toBe(gb);
  });

  test.each([
    [0, 0],
    [1, 0.000001],
    [4_000, 0.004],
    [246_388, 0.246],
    [2_749_999_999, 2749.99],
  ])('%d B is %d MB', (bytes, mb) => {
    expect(bandwidthIn('MB', bytes)).toBe(mb);
  });

  test('never 0 while a byte remains, never more than what remains', () => {
    for (let bytes = 1; bytes < 5e12; bytes = Math.ceil(bytes * 1.37) + 1) {
      const gb = bandwidthIn('GB', bytes);
      expect(gb).toBeGreaterThan(0);
      expect(Math.round(gb * 1e9)).toBeLessThanOrEqual(bytes);
    }
  });
});

test('bandwidthText: the same figure, in GB', () => {
  expect(bandwidthText(246_388)).toBe('0.000246 GB');
  expect(bandwidthText(0)).toBe('0 GB');
  expect(bandwidthText(1_234_567_890_123)).toBe('1,234.567 GB');
  expect(bandwidthText(1_750_000_000)).toBe('1.75 GB');
});
