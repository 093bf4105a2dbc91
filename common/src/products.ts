// The five bandwidth products (plans) and the units the spec defines.
export const PRODUCTS = ['light', 'basic', 'advanced', 'mobile', 'datacenter'] as const;
export type Product = (typeof PRODUCTS)[number];

/** GB = 10^9 bytes, MB = 10^6 bytes (spec, DESIGN.md contracts). */
export const BYTES_PER_GB = 1_000_000_000;
export const BYTES_PER_MB = 1_000_000;

/** Fractional GB to whole bytes; purchases may be fractional (0.5 GB = 500,000,000 bytes). */
export function gbToBytes(gb: number): number {
  const bytes = Math.round(gb * BYTES_PER_GB);
  if (!Number.isSafeInteger(bytes) || bytes <= 0) throw new RangeError(`invalid amount of GB: ${gb}`);
  return bytes;
}
