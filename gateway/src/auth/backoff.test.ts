import { describe, expect, it } from '@jest/globals';
import { AuthBackoff, FAILURES_ALLOWED } from './backoff.ts';

describe('AuthBackoff', () => {
  it('backs a key off after the allowed failures, the default or the configured number', () => {
    const t = 1_000_000;
    const standard = new AuthBackoff();
    for (let i = 1; i < FAILURES_ALLOWED; i++) standard.fail('addr:a', t);
    expect(standard.retryAfter('addr:a', t)).toBe(0);
    standard.fail('addr:a', t);
    expect(standard.retryAfter('addr:a', t)).toBeGreaterThan(0);

    // PROXYFLEET_GATEWAY_AUTH_FAILURES_PER_MINUTE: an address many customers share.
    const shared = new AuthBackoff(FAILURES_ALLOWED * 10);
    for (let i = 0; i < FAILURES_ALLOWED * 5; i++) shared.fail('addr:a', t);
    expect(shared.retryAfter('addr:a', t)).toBe(0);
    // An explicit allowance (per username) still wins.
    for (let i = 0; i < 3; i++) shared.fail('user:u', t, 3);
    expect(shared.retryAfter('user:u', t)).toBeGreaterThan(0);
  });
});
