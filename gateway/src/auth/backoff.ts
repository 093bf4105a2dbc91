// Back-off for repeated failed authentication from one address: after FAILURES_ALLOWED failures
// within WINDOW_MS, the address is answered 429 without looking at its credentials, for a period
// that doubles with each new block (capped). A success clears the record.
export const FAILURES_ALLOWED = 20;
const WINDOW_MS = 60_000;
const FIRST_BLOCK_MS = 10_000;
const MAX_BLOCK_MS = 10 * 60_000;
/** Bound on tracked addresses, so a spray of sources cannot grow memory without limit. */
const MAX_TRACKED = 100_000;

interface Record {
  failures: number;
  windowStart: number;
  blockedUntil: number;
  blockMs: number;
}

export class AuthBackoff {
  private readonly records = new Map<string, Record>();

  /** Seconds the address must wait, or 0. */
  retryAfter(address: string, now = Date.now()): number {
    const r = this.records.get(address);
    if (!r || r.blockedUntil <= now) return 0;
    return Math.ceil((r.blockedUntil - now) / 1000);
  }

  fail(address: string, now = Date.now()): void {
    let r = this.records.get(address);
    if (!r) {
      if (this.records.size >= MAX_TRACKED) this.prune(now);
      r = { failures: 0, windowStart: now, blockedUntil: 0, blockMs: 0 };
      this.records.set(address, r);
    }
    if (now - r.windowStart > WINDOW_MS) {
      r.failures = 0;
      r.windowStart = now;
    }
    r.failures++;
    if (r.failures >= FAILURES_ALLOWED) {
      r.blockMs = Math.min(MAX_BLOCK_MS, r.blockMs ? r.blockMs * 2 : FIRST_BLOCK_MS);
      r.blockedUntil = now + r.blockMs;
      r.failures = 0;
      r.windowStart = now;
    }
  }

  succeed(address: string): void {
    if (this.records.size) this.records.delete(address);
  }

  private prune(now: number): void {
    for (const [address, r] of this.records) {
      if (r.blockedUntil <= now && now - r.windowStart > WINDOW_MS) this.records.delete(address);
    }
    if (this.records.size >= MAX_TRACKED) this.records.clear();
  }
}
