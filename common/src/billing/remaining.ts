// The one rounding rule for an amount of bandwidth shown to a customer (docs/api.md, "Remaining
// bandwidth"): GET /api/v1/usage's numbers, the dashboard's figures and the emails' all come from
// here, so the three never disagree and none shows "0 GB" while bytes remain.
import { BYTES_PER_GB, BYTES_PER_MB } from '../products.ts';

const UNITS = {
  GB: { bytes: BYTES_PER_GB, digits: 9, minDecimals: 3 },
  MB: { bytes: BYTES_PER_MB, digits: 6, minDecimals: 2 },
} as const;

/**
 * `bytes` in GB (or MB), rounded down (a figure never overstates what is left) to 3 decimals (MB:
 * 2), or to more where that keeps 3 significant digits, down to the byte: 1,750,000,000 B is
 * 1.75 GB, 246,388 B is 0.000246 GB, 1 B is 0.000000001 GB; 0 only for no bytes at all.
 * Negative amounts are 0 (a gateway may overspend by a bounded amount).
 */
export function bandwidthIn(unit: keyof typeof UNITS, bytes: number): number {
  const b = Math.max(0, Math.floor(bytes));
  if (b === 0) return 0;
  const u = UNITS[unit];
  // 3 significant digits need (digits of the unit) - (digits of b) + 3 decimals.
  const decimals = Math.min(u.digits, Math.max(u.minDecimals, u.digits - String(b).length + 3));
  const step = 10 ** (u.digits - decimals);
  // Integer arithmetic, then one division: the double nearest the decimal, printed as written.
  return Math.floor(b / step) / 10 ** decimals;
}

/** The same figure as text, for pages and emails: "1,234.5 GB", "0.000246 GB", "0 GB". */
export function bandwidthText(bytes: number): string {
  return `${bandwidthIn('GB', bytes).toLocaleString('en-US', { maximumFractionDigits: 9 })} GB`;
}
