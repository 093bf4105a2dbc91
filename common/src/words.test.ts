import { expect, test } from '@jest/globals';
import { countOf } from './words.ts';

test('a count with its noun in the right number', () => {
  expect(countOf(1, 'ISP proxy', 'ISP proxies')).toBe('1 ISP proxy');
  expect(countOf(2, 'ISP proxy', 'ISP proxies')).toBe('2 ISP proxies');
  expect(countOf(0, 'entry', 'entries')).toBe('0 entries');
  expect(countOf(1, 'sub-user')).toBe('1 sub-user');
  expect(countOf(1000, 'sub-user')).toBe('1,000 sub-users');
});
