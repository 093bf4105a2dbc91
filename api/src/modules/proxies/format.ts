// Proxy strings in each plan's credential grammar (spec section 5 for light, basic and advanced;
// docs/adr/0012 and the lead's decisions for mobile and datacenter). Usernames are [a-z0-9] and
// passwords [A-Za-z0-9], so the separators '-', '_' and ':' never occur inside them.
import { PLAN_CAPABILITIES, type Product } from '#common/products.ts';

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

/** The username and password a client sends for this plan and targeting (PLAN_CAPABILITIES). */
export function credentialFor(plan: Product, base: Credentials, t: Targeting): Credentials {
  const can = PLAN_CAPABILITIES[plan];
  // In the password: '_' between parts; in the username: '-'. City is attached to state with '-'.
  const sep = can.side === 'password' ? '_' : '-';
  let suffix = `${sep}country-${t.country}`;
  if (t.state && can.place) suffix += `${sep}state-${t.state}` + (t.city ? `-city-${t.city}` : '');
  if (t.session) {
    suffix += `${sep}session-${t.session}`;
    if (t.minutes !== undefined && can.sessionMinutes === 'lifetime')
      suffix += `${sep}lifetime-${t.minutes}m`;
    if (t.minutes !== undefined && can.sessionMinutes === 'sessionduration')
      suffix += `${sep}sessionduration-${t.minutes}`;
  }
  return can.side === 'password'
    ? { username: base.username, password: base.password + suffix }
    : { username: base.username + suffix, password: base.password };
}

export const proxyString = (host: string, port: number, c: Credentials) =>
  `${host}:${port}:${c.username}:${c.password}`;

/**
 * The schemes a proxy URL may have: `http` (plain), `https` (TLS to the gateway, docs/adr/0071) or
 * `socks5h` (SOCKS5 on the same port, docs/adr/0028; the gateway resolves the name, docs/adr/0087).
 */
export const PROXY_SCHEMES = ['http', 'https', 'socks5h'] as const;
export type ProxyScheme = (typeof PROXY_SCHEMES)[number];

/** The same proxy as a URL, as curl, Python and Node take it: `<scheme>://<username>:<password>@<host>:<port>`. */
export const proxyUrl = (scheme: ProxyScheme, host: string, port: number, c: Credentials) =>
  `${scheme}://${encodeURIComponent(c.username)}:${encodeURIComponent(c.password)}@${host}:${port}`;
