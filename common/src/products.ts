// The five bandwidth products (plans) and the units the spec defines.
export const PRODUCTS = ['light', 'basic', 'advanced', 'mobile', 'datacenter'] as const;
export type Product = (typeof PRODUCTS)[number];
export const isProduct = (value: unknown): value is Product => PRODUCTS.includes(value as Product);

export interface PlanCapabilities {
  /** Where the targeting rides in the proxy credentials. */
  side: 'password' | 'username';
  /** State and city targeting, besides the country. */
  place: boolean;
  /** How a sticky session's length is written: `_lifetime-<N>m`, `-sessionduration-<N>`, or not at all. */
  sessionMinutes: 'lifetime' | 'sessionduration' | undefined;
}

/**
 * What each plan's credentials can target (spec section 5; docs/adr/0003 for mobile and
 * datacenter): stated once, read by the API's validation and proxy strings, and checked against
 * the gateway's credential grammars by test/plans.test.ts.
 */
export const PLAN_CAPABILITIES: Readonly<Record<Product, PlanCapabilities>> = {
  light: { side: 'password', place: true, sessionMinutes: undefined },
  basic: { side: 'password', place: true, sessionMinutes: 'lifetime' },
  advanced: { side: 'username', place: false, sessionMinutes: 'sessionduration' },
  mobile: { side: 'username', place: true, sessionMinutes: 'sessionduration' },
  datacenter: { side: 'password', place: false, sessionMinutes: 'lifetime' },
};

/** GB = 10^9 bytes, MB = 10^6 bytes (spec, docs/design.md contracts). */
export const BYTES_PER_GB = 1_000_000_000;
export const BYTES_PER_MB = 1_000_000;

/** Fractional GB to whole bytes; purchases may be fractional (0.5 GB = 500,000,000 bytes). */
export function gbToBytes(gb: number): number {
  const bytes = Math.round(gb * BYTES_PER_GB);
  if (!Number.isSafeInteger(bytes) || bytes <= 0) throw new RangeError(`invalid amount of GB: ${gb}`);
  return bytes;
}
