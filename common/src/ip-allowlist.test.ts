import { describe, expect, test } from '@jest/globals';
import { parseTargeting } from './credentials.ts';
import { addressBytes, parseAllowlistCidr } from './ip-allowlist.ts';

describe('parseAllowlistCidr', () => {
  test.each([
    ['203.0.113.7', '203.0.113.7/32'],
    ['203.0.113.0/24', '203.0.113.0/24'],
    ['2001:0db8:0000::/48', '2001:db8::/48'],
    ['2001:db8::1', '2001:db8::1/128'],
  ])('%s is stored as %s', (text, canonical) => {
    expect(parseAllowlistCidr(text, false)).toMatchObject({ ok: true, text: canonical });
  });

  test.each([
    ['203.0.113.0/23', 'must be no wider than /24 for IPv4'],
    ['2001:db8::/47', 'must be no wider than /48 for IPv6'],
    ['203.0.113.5/24', 'must not have host bits set (the range is 203.0.113.0/24)'],
    ['203.0.113.5/33', 'must have a prefix length from 0 to 32'],
    ['203.0.113.5/024', 'must have a prefix length from 0 to 32'],
    ['::ffff:203.0.113.5', 'must write an IPv4 address as IPv4 (203.0.113.5)'],
    ['fe80::1%eth0', 'must be an IPv4 or IPv6 address, or a range such as 203.0.113.0/24'],
    ['203.0.113', 'must be an IPv4 or IPv6 address, or a range such as 203.0.113.0/24'],
    ['127.0.0.1', 'must be a public address (private, loopback and reserved ranges are refused)'],
    ['192.168.1.0/24', 'must be a public address (private, loopback and reserved ranges are refused)'],
    ['100.64.0.0/24', 'must be a public address (private, loopback and reserved ranges are refused)'],
    ['fd00:1::/48', 'must be a public address (private, loopback and reserved ranges are refused)'],
    ['::1', 'must be a public address (private, loopback and reserved ranges are refused)'],
  ])('%s: %s', (text, problem) => {
    expect(parseAllowlistCidr(text, false)).toEqual({ ok: false, problem });
  });

  test('private and loopback ranges only when allowed (dev and tests)', () => {
    expect(parseAllowlistCidr('127.30.1.0/24', true)).toMatchObject({ ok: true, text: '127.30.1.0/24' });
    expect(parseAllowlistCidr('10.0.0.0/16', true)).toMatchObject({ ok: false });
  });

  test('an IPv4-mapped source is the IPv4 address it maps', () => {
    expect(addressBytes('::ffff:127.0.0.5')).toEqual(Buffer.of(127, 0, 0, 5));
    expect(addressBytes('2001:db8::1:2')?.length).toBe(16);
    expect(addressBytes('not an address')).toBeUndefined();
  });
});

describe('parseTargeting', () => {
  const limits = { maxSessionMinutes: 1440 };
  test("reads the plan's suffix with the credential parser", () => {
    expect(parseTargeting('basic', 'country-us_session-abc_lifetime-30m', limits)).toMatchObject({
      ok: true,
      value: { targeting: { country: 'us' }, session: { id: 'abc', minutes: 30 } },
    });
    expect(parseTargeting('advanced', 'country-de-session-x1-sessionduration-5', limits)).toMatchObject({
      ok: true,
      value: { targeting: { country: 'de' }, session: { id: 'x1', minutes: 5 } },
    });
    expect(parseTargeting('advanced', 'country-us_session-abc', limits)).toEqual({
      ok: false,
      reason: 'misplaced_parameter',
    });
    expect(parseTargeting('datacenter', 'country-us_state-texas', limits)).toMatchObject({ ok: false });
    expect(parseTargeting('basic', '', limits)).toEqual({ ok: false, reason: 'bad_value' });
    expect(parseTargeting('basic', 'country-us_lifetime-10m', limits)).toMatchObject({ ok: false });
  });
});
