import { describe, expect, test } from '@jest/globals';
import { parseCredentials } from '#common/credentials.ts';
import type { Product } from '#common/products.ts';
import { credentialFor, proxyString, type Targeting } from './format.ts';
import { generateRequestSchema } from './schemas.ts';

const base = { username: 'u1234abcd', password: 'Pass9Word' };

describe('credentialFor', () => {
  const cases: [Product, Targeting, string, string][] = [
    ['light', { country: 'us' }, 'u1234abcd', 'Pass9Word_country-us'],
    [
      'light',
      { country: 'us', state: 'newyork', city: 'newyorkcity', session: 'abc123' },
      'u1234abcd',
      'Pass9Word_country-us_state-newyork-city-newyorkcity_session-abc123',
    ],
    [
      'basic',
      { country: 'de', session: 's1', minutes: 30 },
      'u1234abcd',
      'Pass9Word_country-de_session-s1_lifetime-30m',
    ],
    ['basic', { country: 'us', state: 'texas' }, 'u1234abcd', 'Pass9Word_country-us_state-texas'],
    ['advanced', { country: 'gb' }, 'u1234abcd-country-gb', 'Pass9Word'],
    [
      'advanced',
      { country: 'gb', session: 'x9', minutes: 15 },
      'u1234abcd-country-gb-session-x9-sessionduration-15',
      'Pass9Word',
    ],
    [
      'mobile',
      { country: 'us', state: 'ohio', city: 'akron', session: 'z', minutes: 5 },
      'u1234abcd-country-us-state-ohio-city-akron-session-z-sessionduration-5',
      'Pass9Word',
    ],
    [
      'datacenter',
      { country: 'fr', session: 'q', minutes: 60 },
      'u1234abcd',
      'Pass9Word_country-fr_session-q_lifetime-60m',
    ],
  ];
  test.each(cases)('%s %j', (plan, targeting, username, password) => {
    expect(credentialFor(plan, base, targeting)).toEqual({ username, password });
  });

  test.each(cases)('the gateway parses what %s generates for %j', (plan, targeting) => {
    const c = credentialFor(plan, base, targeting);
    const parsed = parseCredentials(plan, c.username, c.password, { maxSessionMinutes: 1440 });
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    expect(parsed.value.username).toBe(base.username);
    expect(parsed.value.password).toBe(base.password);
    expect(parsed.value.targeting.country).toBe(targeting.country);
    expect(parsed.value.session?.id).toBe(targeting.session);
  });

  test('proxy string is host:port:username:password', () => {
    expect(proxyString('basic.example.com', 12321, { username: 'a', password: 'b_country-us' })).toBe(
      'basic.example.com:12321:a:b_country-us',
    );
  });
});

describe('generate request validation', () => {
  const ok = { provider: 'basic', country: 'US', sessionType: 'rotating', count: 1 };
  test('normalises country, state and city', () => {
    const parsed = generateRequestSchema.parse({ ...ok, state: 'North Carolina', city: 'Winston-Salem' });
    expect(parsed).toMatchObject({ country: 'us', state: 'northcarolina', city: 'winstonsalem' });
  });
  const bad: [string, Record<string, unknown>, string][] = [
    ['unknown provider', { provider: 'premium' }, 'provider'],
    ['count 0', { count: 0 }, 'count'],
    ['count above the maximum', { count: 1001 }, 'count'],
    ['fractional count', { count: 1.5 }, 'count'],
    ['three-letter country', { country: 'usa' }, 'country'],
    ['digits in country', { country: 'u1' }, 'country'],
    ['unknown session type', { sessionType: 'sticky-ish' }, 'sessionType'],
    ['state on advanced', { provider: 'advanced', state: 'ohio' }, 'state'],
    ['state on datacenter', { provider: 'datacenter', state: 'ohio' }, 'state'],
    ['city without state', { city: 'akron' }, 'city'],
    ['lifetime on rotating', { lifetime: 10 }, 'lifetime'],
    ['lifetime on advanced', { provider: 'advanced', sessionType: 'sticky', lifetime: 10 }, 'lifetime'],
    ['sessionDuration on basic', { sessionType: 'sticky', sessionDuration: 10 }, 'sessionDuration'],
    ['lifetime above 1440', { sessionType: 'sticky', lifetime: 1441 }, 'lifetime'],
    ['symbols in city', { state: 'missouri', city: 'st@louis' }, 'city'],
    ['another script in city', { state: 'tokyo', city: '東京' }, 'city'],
  ];
  test.each(bad)('%s is refused naming the field', (_name, change, field) => {
    const result = generateRequestSchema.safeParse({ ...ok, ...change });
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((i) => i.path.join('.'))).toContain(field);
  });
});
