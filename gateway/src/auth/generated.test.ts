import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { credentialFor } from '#api/modules/proxies/format.ts';
import { newProxyPassword, newProxyUsername } from '#common/secrets.ts';
import { PLANS } from '../spec.ts';
import { parseCredentials } from '#common/credentials.ts';

// The API's proxy generator and the gateway's parser implement the same grammars (docs/adr/0003):
// whatever /api/v1/proxies/generate hands out, the gateway accepts with exactly that targeting.
describe('generated proxy strings', () => {
  it('parse back to the targeting they were generated for, on every plan', () => {
    const name = fc.stringMatching(/^[a-z0-9]{1,16}$/);
    fc.assert(
      fc.property(
        fc.constantFrom(...PLANS),
        fc.stringMatching(/^[a-z]{2}$/),
        fc.option(name, { nil: undefined }),
        fc.option(name, { nil: undefined }),
        fc.option(fc.stringMatching(/^[a-z0-9]{1,20}$/), { nil: undefined }),
        fc.option(fc.integer({ min: 1, max: 1440 }), { nil: undefined }),
        (plan, country, state, city, session, minutes) => {
          const base = { username: newProxyUsername(), password: newProxyPassword() };
          const c = credentialFor(plan, base, {
            country,
            state,
            city: state ? city : undefined,
            session,
            minutes,
          });
          const parsed = parseCredentials(plan, c.username, c.password, { maxSessionMinutes: 1440 });
          expect(parsed.ok).toBe(true);
          if (!parsed.ok) return;
          expect(parsed.value.username).toBe(base.username);
          expect(parsed.value.password).toBe(base.password);
          expect(parsed.value.targeting.country).toBe(country);
          const statesAllowed = plan === 'light' || plan === 'basic' || plan === 'mobile';
          expect(parsed.value.targeting.state).toBe(statesAllowed ? state : undefined);
          expect(parsed.value.session?.id).toBe(session);
          if (session && plan !== 'light') expect(parsed.value.session?.minutes).toBe(minutes);
        },
      ),
      { numRuns: 1000 },
    );
  });
});
