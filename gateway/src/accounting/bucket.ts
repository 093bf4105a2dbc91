// The throttle's token bucket (docs/adr/0035): one per capped budget on one gateway. Plain
// functions of plain state and the time (passed in), like policy.ts; the throttle (throttle.ts)
// holds the budget's streams while the bucket is below zero and releases them when it has refilled.

/** The bucket holds this long at the rate (a burst after a pause) ... */
export const BURST_SECONDS = 1;
/** ... but at least one socket read, so a slow cap still moves whole chunks. */
export const MIN_BURST_BYTES = 64 * 1024;

export interface Bucket {
  /** Bytes per second this gateway lets the budget move. */
  rate: number;
  burst: number;
  /** Bytes that may still pass without waiting; negative: a debt paid back at `rate`. */
  tokens: number;
  /** When `tokens` was last brought up to date (ms, any monotonic clock). */
  at: number;
}

/**
 * This gateway's share of a fleet-wide cap: each of `fleetSize` gateways enforces rate / fleetSize
 * (docs/adr/0035: a customer spread unevenly gets less than the cap, never more).
 */
export function perPodRate(bytesPerSecond: number, fleetSize: number): number {
  return Math.max(1, Math.floor(bytesPerSecond / Math.max(1, fleetSize)));
}

/** A full bucket for `rate` bytes per second. */
export function newBucket(rate: number, now: number): Bucket {
  const burst = Math.max(MIN_BURST_BYTES, Math.floor(rate * BURST_SECONDS));
  return { rate, burst, tokens: burst, at: now };
}

/** A new rate keeps the debt (or the saved tokens, up to the new burst). */
export function setRate(b: Bucket, rate: number, now: number): void {
  refill(b, now);
  b.rate = rate;
  b.burst = Math.max(MIN_BURST_BYTES, Math.floor(rate * BURST_SECONDS));
  b.tokens = Math.min(b.tokens, b.burst);
}

export function refill(b: Bucket, now: number): void {
  const elapsed = now - b.at;
  if (elapsed <= 0) return;
  b.at = now;
  b.tokens = Math.min(b.burst, b.tokens + (elapsed * b.rate) / 1000);
}

/**
 * Takes `bytes` that have already moved. Returns 0 when the bucket is not in debt, else the ms
 * until it is back at zero (the budget's streams wait that long).
 */
export function take(b: Bucket, bytes: number, now: number): number {
  refill(b, now);
  b.tokens -= bytes;
  return waitMs(b);
}

/** Milliseconds until the bucket's debt is paid (0: none). */
export function waitMs(b: Bucket): number {
  return b.tokens >= 0 ? 0 : Math.ceil((-b.tokens * 1000) / b.rate);
}
