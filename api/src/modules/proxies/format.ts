// Proxy strings in each plan's credential grammar (spec section 5 for light, basic and advanced;
// docs/adr/0012 and the lead's decisions for mobile and datacenter). Usernames are [a-z0-9] and
// passwords [A-Za-z0-9], so the separators '-', '_' and ':' never occur inside them.
import type { Product } from '../../../../common/src/products.ts';

export interface Targeting {
  country: string;
  state?: string | undefined;
  city?: string | undefined;
  /** Sticky session id; absent for rotating. */
  session?: string | undefined;
  /** Minutes: `_lifetime-<N>m` (basic, datacenter) or `-sessionduration-<N>` (advanced, mobile). */
  minutes?: number | undefined;
}

export interface Credentials {
  username: string;
  password: string;
}

/** The username and password a client sends for this plan and targeting. */
export function credentialFor(plan: Product, base: Credentials, t: Targeting): Credentials {
  switch (plan) {
    case 'light':
    case 'basic':
    case 'datacenter': {
      let suffix = `_country-${t.country}`;
      if (t.state && plan !== 'datacenter') suffix += `_state-${t.state}` + (t.city ? `-city-${t.city}` : '');
      if (t.session) {
        suffix += `_session-${t.session}`;
        if (t.minutes !== undefined && plan !== 'light') suffix += `_lifetime-${t.minutes}m`;
      }
      return { username: base.username, password: base.password + suffix };
    }
    case 'advanced':
    case 'mobile': {
      let suffix = `-country-${t.country}`;
      if (t.state && plan === 'mobile') suffix += `-state-${t.state}` + (t.city ? `-city-${t.city}` : '');
      if (t.session) {
        suffix += `-session-${t.session}`;
        if (t.minutes !== undefined) suffix += `-sessionduration-${t.minutes}`;
      }
      return { username: base.username + suffix, password: base.password };
    }
  }
}

export const proxyString = (host: string, port: number, c: Credentials) => `${host}:${port}:${c.username}:${c.password}`;
