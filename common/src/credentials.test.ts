import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { PRODUCTS as PLANS, type Product as Plan } from './products.ts';
import {
  decodeProxyAuthorization,
  parseCredentials,
  type CredentialError,
  type ParsedCredentials,
} from './credentials.ts';

const limits = { maxSessionMinutes: 1440 };
const U = 'user1234';
const P = 'Secret99';

type Expect = Omit<ParsedCredentials, 'username' | 'password'> | CredentialError;

// plan, username, password, expected
const CASES: [Plan, string, string, Expect][] = [
  // No targeting at all: any exit, rotating.
  ['basic', U, P, { targeting: {} }],
  ['advanced', U, P, { targeting: {} }],
  // light
  ['light', U, `${P}_country-us`, { targeting: { country: 'us' } }],
  [
    'light',
    U,
    `${P}_country-us_state-newyork-city-newyorkcity`,
    { targeting: { country: 'us', state: 'newyork', city: 'newyorkcity' } },
  ],
  ['light', U, `${P}_country-us_session-abc`, { targeting: { country: 'us' }, session: { id: 'abc' } }],
  ['light', U, `${P}_country-us_session-abc_lifetime-5m`, 'unknown_parameter'],
  // basic (spec)
  ['basic', U, `${P}_country-us`, { targeting: { country: 'us' } }],
  ['basic', U, `${P}_country-us_state-california`, { targeting: { country: 'us', state: 'california' } }],
  [
    'basic',
    U,
    `${P}_country-us_state-northcarolina-city-winstonsalem_session-Ab12_lifetime-30m`,
    {
      targeting: { country: 'us', state: 'northcarolina', city: 'winstonsalem' },
      session: { id: 'Ab12', minutes: 30 },
    },
  ],
  ['basic', U, `${P}_country-de_session-xyz`, { targeting: { country: 'de' }, session: { id: 'xyz' } }],
  [
    'basic',
    U,
    `${P}_country-de_session-xyz_lifetime-1440m`,
    { targeting: { country: 'de' }, session: { id: 'xyz', minutes: 1440 } },
  ],
  ['basic', U, `${P}_country-de_session-xyz_lifetime-1441m`, 'lifetime_out_of_range'],
  ['basic', U, `${P}_country-de_session-xyz_lifetime-0m`, 'bad_value'],
  ['basic', U, `${P}_country-de_session-xyz_lifetime-05m`, 'bad_value'],
  ['basic', U, `${P}_country-de_session-xyz_lifetime-5`, 'bad_value'],
  ['basic', U, `${P}_country-de_lifetime-5m`, 'misplaced_parameter'],
  ['basic', U, `${P}_country-US`, 'bad_value'],
  ['basic', U, `${P}_country-usa`, 'bad_value'],
  ['basic', U, `${P}_country-us_country-de`, 'repeated_parameter'],
  ['basic', U, `${P}_session-abc`, 'country_required'],
  ['basic', U, `${P}_state-ny`, 'country_required'],
  ['basic', U, `${P}_country-us_city-austin`, 'misplaced_parameter'],
  ['basic', U, `${P}_country-us-state-texas`, 'misplaced_parameter'],
  ['basic', U, `${P}_country-us_state-texas_city-austin`, 'misplaced_parameter'],
  ['basic', U, `${P}_session-abc_country-us`, 'country_required'],
  ['basic', U, `${P}_country-us_session-abc_state-texas`, 'misplaced_parameter'],
  ['basic', U, `${P}_country-us_zone-x`, 'unknown_parameter'],
  ['basic', U, `${P}_country-us_sessionduration-5`, 'unknown_parameter'],
  ['basic', U, `${P}_country-`, 'bad_value'],
  ['basic', U, `${P}_country`, 'bad_value'],
  ['basic', U, `${P}_`, 'bad_value'],
  ['basic', U, `${P}__country-us`, 'unknown_parameter'],
  ['basic', U, `${P}_country-us_session-${'a'.repeat(65)}`, 'bad_value'],
  ['basic', U, `${P}_country-us_session-a.b`, 'bad_value'],
  ['basic', U, `${P}_country-us_state-new york`, 'bad_value'],
  ['basic', U, `${P}_country-us_state-Texas`, 'bad_value'],
  ['basic', U, `pa:ss_country-us`, 'bad_password'],
  ['basic', U, `_country-us`, 'bad_password'],
  ['basic', 'User1234', `${P}_country-us`, 'bad_username'],
  ['basic', 'abc', P, 'bad_username'],
  ['basic', `${U}-country-us`, P, 'bad_username'],
  // advanced (spec)
  ['advanced', `${U}-country-us`, P, { targeting: { country: 'us' } }],
  ['advanced', `${U}-country-us-session-s1`, P, { targeting: { country: 'us' }, session: { id: 's1' } }],
  [
    'advanced',
    `${U}-country-us-session-s1-sessionduration-15`,
    P,
    { targeting: { country: 'us' }, session: { id: 's1', minutes: 15 } },
  ],
  ['advanced', `${U}-country-us-session-s1-sessionduration-0`, P, 'bad_value'],
  ['advanced', `${U}-country-us-session-s1-sessionduration-99999`, P, 'lifetime_out_of_range'],
  ['advanced', `${U}-country-us-session-s1-sessionduration-15m`, P, 'bad_value'],
  ['advanced', `${U}-country-us-state-texas`, P, 'unknown_parameter'],
  ['advanced', `${U}-country-us-sessionduration-15`, P, 'misplaced_parameter'],
  ['advanced', `${U}-country-us_session-s1`, P, 'misplaced_parameter'],
  ['advanced', `${U}-session-s1`, P, 'country_required'],
  ['advanced', U, `${P}_country-us`, 'bad_password'],
  // mobile (ours)
  [
    'mobile',
    `${U}-country-gb-state-england-city-london-session-x9-sessionduration-60`,
    P,
    {
      targeting: { country: 'gb', state: 'england', city: 'london' },
      session: { id: 'x9', minutes: 60 },
    },
  ],
  ['mobile', `${U}-country-gb-city-london`, P, 'misplaced_parameter'],
  // datacenter (ours)
  [
    'datacenter',
    U,
    `${P}_country-fr_session-q_lifetime-10m`,
    { targeting: { country: 'fr' }, session: { id: 'q', minutes: 10 } },
  ],
  ['datacenter', U, `${P}_country-fr_state-idf`, 'unknown_parameter'],
];

describe('parseCredentials', () => {
  it.each(CASES)('%s %s:%s', (plan, user, pass, expected) => {
    const result = parseCredentials(plan, user, pass, limits);
    if (typeof expected === 'string') {
      expect(result).toEqual({ ok: false, reason: expected });
    } else {
      const base = PLANS_BASE[GRAMMAR_SIDE[plan]](user, pass);
      expect(result).toEqual({ ok: true, value: { ...base, ...expected } });
    }
  });

  it('honours a lower maximum lifetime from spec.session', () => {
    expect(
      parseCredentials('basic', U, `${P}_country-us_session-a_lifetime-61m`, { maxSessionMinutes: 60 }),
    ).toEqual({
      ok: false,
      reason: 'lifetime_out_of_range',
    });
  });

  it('never throws and never broadens: any input either fails or round-trips to the exact targeting', () => {
    const chunk = fc.oneof(
      fc.string({ maxLength: 12 }),
      fc.string({ unit: 'grapheme', maxLength: 8 }),
      fc.constantFrom(
        '_',
        '-',
        ':',
        'country',
        'state',
        'city',
        'session',
        'lifetime',
        'sessionduration',
        'us',
        '5m',
        '15',
        '\u0000',
        '\u00e9',
        '%2d',
      ),
    );
    const text = fc.array(chunk, { maxLength: 14 }).map((parts) => parts.join(''));
    fc.assert(
      fc.property(fc.constantFrom(...PLANS), text, text, (plan, user, pass) => {
        const result = parseCredentials(plan, user, pass, limits);
        if (!result.ok) return;
        const t = result.value.targeting;
        // Whatever was accepted is written back exactly, so nothing was dropped or guessed.
        expect(render(plan, result.value)).toEqual([user, pass]);
        if (t.city) expect(t.state).toBeDefined();
        if (t.state || result.value.session) expect(t.country).toBeDefined();
      }),
      { numRuns: 3000 },
    );
  });

  it('round-trips every well-formed credential', () => {
    const name = fc.stringMatching(/^[a-z0-9]{1,12}$/);
    fc.assert(
      fc.property(
        fc.constantFrom(...PLANS),
        fc.stringMatching(/^[a-z0-9]{4,32}$/),
        fc.stringMatching(/^[A-Za-z0-9]{1,40}$/),
        fc.stringMatching(/^[a-z]{2}$/),
        fc.option(name),
        fc.option(name),
        fc.option(fc.stringMatching(/^[A-Za-z0-9]{1,64}$/)),
        fc.option(fc.integer({ min: 1, max: 1440 })),
        (plan, username, password, country, state, city, session, minutes) => {
          const value: ParsedCredentials = { username, password, targeting: { country } };
          if (plan !== 'advanced' && plan !== 'datacenter' && state) {
            value.targeting.state = state;
            if (city) value.targeting.city = city;
          }
          if (session) {
            value.session = { id: session };
            if (minutes && plan !== 'light') value.session.minutes = minutes;
          }
          const [user, pass] = render(plan, value);
          expect(parseCredentials(plan, user, pass, limits)).toEqual({ ok: true, value });
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('survives huge and repeated inputs', () => {
    const huge = `${P}${'_country-us'.repeat(10_000)}`;
    expect(parseCredentials('basic', U, huge, limits).ok).toBe(false);
    expect(parseCredentials('advanced', 'a'.repeat(100_000), P, limits)).toEqual({
      ok: false,
      reason: 'bad_username',
    });
  });
});

describe('decodeProxyAuthorization', () => {
  const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
  it.each([
    [undefined, { ok: false, reason: 'missing' }],
    ['', { ok: false, reason: 'missing' }],
    ['Bearer abc', { ok: false, reason: 'malformed_authorization' }],
    ['Basic', { ok: false, reason: 'malformed_authorization' }],
    ['Basic !!!', { ok: false, reason: 'malformed_authorization' }],
    [`Basic ${b64('nocolon')}`, { ok: false, reason: 'malformed_authorization' }],
    [`Basic ${b64('u:p')}`, { ok: true, username: 'u', password: 'p' }],
    [`basic ${b64('u:p:q')}`, { ok: true, username: 'u', password: 'p:q' }],
    [`Basic ${b64(':')}`, { ok: true, username: '', password: '' }],
    [`Basic ${'A'.repeat(5000)}`, { ok: false, reason: 'malformed_authorization' }],
  ])('%s', (header, expected) => {
    expect(decodeProxyAuthorization(header)).toEqual(expected);
  });

  it('never throws', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 300 }), (s) => void decodeProxyAuthorization(s)),
    );
  });
});

const GRAMMAR_SIDE: Record<Plan, 'password' | 'username'> = {
  light: 'password',
  basic: 'password',
  datacenter: 'password',
  advanced: 'username',
  mobile: 'username',
};

const PLANS_BASE = {
  password: (user: string, pass: string) => ({ username: user, password: pass.split('_')[0]! }),
  username: (user: string, pass: string) => ({ username: user.split('-')[0]!, password: pass }),
};

/** Writes credentials back in the plan's grammar (what the API's generator does). */
function render(plan: Plan, v: ParsedCredentials): [string, string] {
  const t = v.targeting;
  if (GRAMMAR_SIDE[plan] === 'password') {
    let s = v.password;
    if (t.country) s += `_country-${t.country}`;
    if (t.state) s += `_state-${t.state}`;
    if (t.city) s += `-city-${t.city}`;
    if (v.session) s += `_session-${v.session.id}`;
    if (v.session?.minutes) s += `_lifetime-${v.session.minutes}m`;
    return [v.username, s];
  }
  let s = v.username;
  if (t.country) s += `-country-${t.country}`;
  if (t.state) s += `-state-${t.state}`;
  if (t.city) s += `-city-${t.city}`;
  if (v.session) s += `-session-${v.session.id}`;
  if (v.session?.minutes) s += `-sessionduration-${v.session.minutes}`;
  return [s, v.password];
}
