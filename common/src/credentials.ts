// The credential grammars (spec section 5, method 2; docs/adr/0003 and the lead's decisions for
// mobile and datacenter). One typed parser: it never throws, and anything it does not understand
// is a refusal with a reason (407), never a silently broadened target. Targeting rides either in
// the password (light, basic, datacenter: `_key-value` parts) or in the username (advanced,
// mobile: `-key-value` pairs). Usernames are [a-z0-9]{4,32} and passwords [A-Za-z0-9]+, so the
// separators '-' and '_' never occur inside them and the base is everything before the first one.
import type { Product as Plan } from './products.ts';

export interface Targeting {
  /** Lowercase ISO country code; undefined = no targeting at all (any exit). */
  country?: string;
  state?: string;
  city?: string;
}

export interface SessionRequest {
  id: string;
  /** Minutes asked for with `_lifetime-<N>m` / `-sessionduration-<N>`; undefined = the default. */
  minutes?: number;
}

export interface ParsedCredentials {
  username: string;
  password: string;
  targeting: Targeting;
  session?: SessionRequest;
}

export type CredentialError =
  | 'missing'
  | 'malformed_authorization'
  | 'bad_username'
  | 'bad_password'
  | 'unknown_parameter'
  | 'misplaced_parameter'
  | 'repeated_parameter'
  | 'bad_value'
  | 'country_required'
  | 'lifetime_out_of_range';

export type ParseResult = { ok: true; value: ParsedCredentials } | { ok: false; reason: CredentialError };

/** Longest Proxy-Authorization value looked at; real ones are under 200 characters. */
export const MAX_AUTHORIZATION_LENGTH = 1024;
const USERNAME = /^[a-z0-9]{4,32}$/;
const PASSWORD = /^[A-Za-z0-9]{1,128}$/;
const COUNTRY = /^[a-z]{2}$/;
const PLACE = /^[a-z0-9]{1,64}$/;
const SESSION_ID = /^[A-Za-z0-9]{1,64}$/;
const MINUTES = /^[1-9][0-9]{0,4}$/;
const LIFETIME = /^([1-9][0-9]{0,4})m$/;

type Key = 'country' | 'state' | 'city' | 'session' | 'lifetime' | 'sessionduration';

/** One optional part of a grammar, in the order the grammar writes them. */
interface Slot {
  key: Key;
  /** The character in front of `key` ('_' between password parts, '-' inside one part). */
  sep: '_' | '-';
  /** The slot that must be present for this one to be. */
  after?: Key;
}

interface Grammar {
  /** Where the targeting rides. */
  side: 'password' | 'username';
  slots: readonly Slot[];
}

// The parts, as they are written in the password ('_' between parts, city attached to state with
// '-') and in the username ('-' everywhere).
const IN_PASSWORD = {
  country: { key: 'country', sep: '_' },
  state: { key: 'state', sep: '_', after: 'country' },
  city: { key: 'city', sep: '-', after: 'state' },
  session: { key: 'session', sep: '_', after: 'country' },
  lifetime: { key: 'lifetime', sep: '_', after: 'session' },
} as const satisfies Record<string, Slot>;
const IN_USERNAME = {
  country: { key: 'country', sep: '-' },
  state: { key: 'state', sep: '-', after: 'country' },
  city: { key: 'city', sep: '-', after: 'state' },
  session: { key: 'session', sep: '-', after: 'country' },
  sessionduration: { key: 'sessionduration', sep: '-', after: 'session' },
} as const satisfies Record<string, Slot>;

// The grammars as data, one per plan (docs/gateway.md shows them to customers).
export const GRAMMARS: Readonly<Record<Plan, Grammar>> = {
  // <USERNAME>:<PASSWORD>_country-<cc>[_state-<STATE>[-city-<CITY>]][_session-<ID>]
  light: {
    side: 'password',
    slots: [IN_PASSWORD.country, IN_PASSWORD.state, IN_PASSWORD.city, IN_PASSWORD.session],
  },
  // <USERNAME>:<PASSWORD>_country-<cc>[_state-<STATE>[-city-<CITY>]][_session-<ID>[_lifetime-<N>m]]
  basic: {
    side: 'password',
    slots: [
      IN_PASSWORD.country,
      IN_PASSWORD.state,
      IN_PASSWORD.city,
      IN_PASSWORD.session,
      IN_PASSWORD.lifetime,
    ],
  },
  // <USERNAME>-country-<cc>[-session-<ID>[-sessionduration-<MINUTES>]]:<PASSWORD>
  advanced: {
    side: 'username',
    slots: [IN_USERNAME.country, IN_USERNAME.session, IN_USERNAME.sessionduration],
  },
  // <USERNAME>-country-<cc>[-state-<STATE>[-city-<CITY>]][-session-<ID>[-sessionduration-<MINUTES>]]:<PASSWORD>
  mobile: {
    side: 'username',
    slots: [
      IN_USERNAME.country,
      IN_USERNAME.state,
      IN_USERNAME.city,
      IN_USERNAME.session,
      IN_USERNAME.sessionduration,
    ],
  },
  // <USERNAME>:<PASSWORD>_country-<cc>[_session-<ID>[_lifetime-<N>m]]
  datacenter: { side: 'password', slots: [IN_PASSWORD.country, IN_PASSWORD.session, IN_PASSWORD.lifetime] },
};

const KNOWN_KEYS: ReadonlySet<string> = new Set<Key>([
  'country',
  'state',
  'city',
  'session',
  'lifetime',
  'sessionduration',
]);

/**
 * Decodes `Proxy-Authorization: Basic <base64(user:pass)>` and splits at the FIRST colon
 * (RFC 7617 section 2: the user-id cannot contain a colon, the password can).
 */
export function decodeProxyAuthorization(
  header: string | undefined,
): { ok: true; username: string; password: string } | { ok: false; reason: CredentialError } {
  if (header === undefined || header === '') return { ok: false, reason: 'missing' };
  if (header.length > MAX_AUTHORIZATION_LENGTH) return { ok: false, reason: 'malformed_authorization' };
  const space = header.indexOf(' ');
  if (space < 0 || header.slice(0, space).toLowerCase() !== 'basic')
    return { ok: false, reason: 'malformed_authorization' };
  const encoded = header.slice(space + 1).trim();
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) return { ok: false, reason: 'malformed_authorization' };
  const decoded = Buffer.from(encoded, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return { ok: false, reason: 'malformed_authorization' };
  return { ok: true, username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

export interface GrammarLimits {
  /** The largest lifetime / sessionduration accepted (spec.session.maxMinutes). */
  maxSessionMinutes: number;
}

/** Parses user and password under `plan`'s grammar. Never throws. */
export function parseCredentials(plan: Plan, user: string, pass: string, limits: GrammarLimits): ParseResult {
  const grammar = GRAMMARS[plan];
  const carrier = grammar.side === 'password' ? pass : user;
  const firstSep = grammar.side === 'password' ? carrier.indexOf('_') : carrier.indexOf('-');
  const base = firstSep < 0 ? carrier : carrier.slice(0, firstSep);
  const username = grammar.side === 'password' ? user : base;
  const password = grammar.side === 'password' ? base : pass;
  if (!USERNAME.test(username)) return fail('bad_username');
  if (!PASSWORD.test(password)) return fail('bad_password');
  const value: ParsedCredentials = { username, password, targeting: {} };
  if (firstSep < 0) return { ok: true, value };

  const tokens = tokenize(carrier.slice(firstSep));
  if (!tokens) return fail('bad_value');
  const seen = new Set<Key>();
  let slot = 0;
  for (const token of tokens) {
    if (!KNOWN_KEYS.has(token.key)) return fail('unknown_parameter');
    const key = token.key as Key;
    if (seen.has(key)) return fail('repeated_parameter');
    // Slots only move forward: a key out of the grammar's order, or with the wrong separator in
    // front of it, is refused rather than guessed at.
    let found = -1;
    for (let i = slot; i < grammar.slots.length; i++) {
      if (grammar.slots[i]!.key === key) {
        found = i;
        break;
      }
    }
    if (found < 0)
      return fail(grammar.slots.some((s) => s.key === key) ? 'misplaced_parameter' : 'unknown_parameter');
    const spec = grammar.slots[found]!;
    if (spec.sep !== token.sep) return fail('misplaced_parameter');
    if (spec.after && !seen.has(spec.after))
      return fail(spec.after === 'country' ? 'country_required' : 'misplaced_parameter');
    seen.add(key);
    slot = found + 1;
    const problem = assign(value, key, token.value, limits);
    if (problem) return fail(problem);
  }
  if (!value.targeting.country) return fail('country_required');
  return { ok: true, value };
}

interface Token {
  sep: '_' | '-';
  key: string;
  value: string;
}

/** `_k-v_k-v-k-v` or `-k-v-k-v` into tokens; undefined when the shape itself is wrong. */
function tokenize(text: string): Token[] | undefined {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const sep = text[i];
    if (sep !== '_' && sep !== '-') return undefined;
    const keyEnd = text.indexOf('-', i + 1);
    if (keyEnd < 0) return undefined;
    const key = text.slice(i + 1, keyEnd);
    let valueEnd = keyEnd + 1;
    while (valueEnd < text.length && text[valueEnd] !== '_' && text[valueEnd] !== '-') valueEnd++;
    const value = text.slice(keyEnd + 1, valueEnd);
    if (key === '' || value === '' || tokens.length >= 8) return undefined;
    tokens.push({ sep, key, value });
    i = valueEnd;
  }
  return tokens;
}

function assign(
  into: ParsedCredentials,
  key: Key,
  raw: string,
  limits: GrammarLimits,
): CredentialError | undefined {
  switch (key) {
    case 'country':
      if (!COUNTRY.test(raw)) return 'bad_value';
      into.targeting.country = raw;
      return undefined;
    case 'state':
      if (!PLACE.test(raw)) return 'bad_value';
      into.targeting.state = raw;
      return undefined;
    case 'city':
      if (!PLACE.test(raw)) return 'bad_value';
      into.targeting.city = raw;
      return undefined;
    case 'session':
      if (!SESSION_ID.test(raw)) return 'bad_value';
      into.session = { id: raw };
      return undefined;
    case 'lifetime':
    case 'sessionduration': {
      const match = key === 'lifetime' ? LIFETIME.exec(raw) : MINUTES.exec(raw);
      if (!match) return 'bad_value';
      const minutes = Number(key === 'lifetime' ? match[1] : match[0]);
      if (minutes < 1 || minutes > limits.maxSessionMinutes) return 'lifetime_out_of_range';
      into.session!.minutes = minutes;
      return undefined;
    }
  }
}

function fail(reason: CredentialError): ParseResult {
  return { ok: false, reason };
}

/** Human text for each refusal reason, sent in Proxy-Status details and listed in docs/gateway.md. */
export const CREDENTIAL_ERROR_TEXT: Readonly<Record<CredentialError, string>> = {
  missing: 'proxy credentials required',
  malformed_authorization: 'Proxy-Authorization must be Basic base64(username:password)',
  bad_username: 'malformed username',
  bad_password: 'malformed password',
  unknown_parameter: 'unknown targeting parameter',
  misplaced_parameter: 'targeting parameter out of place for this plan',
  repeated_parameter: 'repeated targeting parameter',
  bad_value: 'malformed targeting value',
  country_required: 'targeting must start with country',
  lifetime_out_of_range: 'session lifetime out of range',
};

/** Stand-ins for the base of a credential, so that a bare targeting suffix parses like one. */
const STANDIN_USERNAME = 'allowlist';
const STANDIN_PASSWORD = 'x';

/**
 * Parses the targeting an IP allowlist entry stands for (docs/adr/0036): the suffix a customer
 * would write after the password (light, basic, datacenter: `country-us_session-abc`) or after the
 * username (advanced, mobile: `country-us-session-abc`) on `plan`, through the same parser, so the
 * two can never disagree. The result's username and password are stand-ins.
 */
export function parseTargeting(plan: Plan, text: string, limits: GrammarLimits): ParseResult {
  if (text === '') return fail('bad_value');
  return GRAMMARS[plan].side === 'password'
    ? parseCredentials(plan, STANDIN_USERNAME, `${STANDIN_PASSWORD}_${text}`, limits)
    : parseCredentials(plan, `${STANDIN_USERNAME}-${text}`, STANDIN_PASSWORD, limits);
}
