import { describe, expect, test } from '@jest/globals';
import { AllowlistIndex, type AllowEntry } from './allowlist.ts';

const entry = (id: string, cidr: string, product = 'basic'): AllowEntry => ({
  id,
  accountId: `account-${id}`,
  product,
  cidr,
  targeting: null,
});

describe('AllowlistIndex', () => {
  test('longest prefix wins, per product, IPv4 and IPv6, mapped IPv4 as IPv4', () => {
    const index = new AllowlistIndex();
    const wide = entry('wide', '203.0.113.0/24');
    const narrow = entry('narrow', '203.0.113.9/32');
    const v6 = entry('v6', '2001:db8::/48');
    for (const e of [wide, narrow, v6, entry('mobile', '198.51.100.0/24', 'mobile')]) index.add(e);
    expect(index.find('basic', '203.0.113.9')).toBe(narrow);
    expect(index.find('basic', '203.0.113.10')).toBe(wide);
    expect(index.find('basic', '::ffff:203.0.113.9')).toBe(narrow);
    expect(index.find('basic', '2001:db8:0:ffff::1')).toBe(v6);
    expect(index.find('basic', '2001:db8:1::1')).toBeUndefined();
    expect(index.find('basic', '203.0.114.1')).toBeUndefined();
    expect(index.find('basic', '198.51.100.1')).toBeUndefined();
    expect(index.find('mobile', '198.51.100.1')?.id).toBe('mobile');
    index.remove(narrow);
    expect(index.find('basic', '203.0.113.9')).toBe(wide);
    index.remove(wide);
    expect(index.find('basic', '203.0.113.9')).toBeUndefined();
  });
});
