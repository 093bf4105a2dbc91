// Back-off for repeated failed authentication, counted per key: the client address and the
// username tried (`addr:` and `user:` keys). After FAILURES_ALLOWED failures within WINDOW_MS the
// key is answered 429 without looking at the credentials, for a period that doubles with each new
// block (capped). A success clears only its own username's record: an attacker who interleaves
// his own valid logins with guesses keeps his address's count growing.
export const FAILURES_ALLOWED = 20;
/**
 * Failures allowed for one username (from any addresses) before it is backed off: higher than per
 * address, so that a customer whose username is being guessed at is not locked out by a handful.
 */
export const USERNAME_FAILURES_ALLOWED = 100;
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

  private readonly addressAllowed: number;

  /** @param addressAllowed failures of one key before it is backed off, unless fail() says otherwise. */
  constructor(addressAllowed = FAILURES_ALLOWED) {
    this.addressAllowed = addressAllowed;
  }

  /** Seconds the key must wait, or 0. */
  retryAfter(key: string, now = Date.now()): number {
    if (this.records.size === 0) return 0;
    const r = this.records.get(key);
    if (!r || r.blockedUntil <= now) return 0;
    return Math.ceil((r.blockedUntil - now) / 1000);
  }

  fail(key: string, now = Date.now(), allowed = this.addressAllowed): void {
    let r = this.records.get(key);
    if (!r) {
      if (this.records.size >= MAX_TRACKED) this.prune(now);
      r = { failures: 0, windowStart: now, blockedUntil: 0, blockMs: 0 };
      this.records.set(key, r);
    }
    if (now - r.windowStart > WINDOW_MS) {
      r.failures = 0;
      r.windowStart = now;
    }
    r.failures++;
    if (r.failures >= allowed) {
      r.blockMs = Math.min(MAX_BLOCK_MS, r.blockMs ? r.blockMs * 2 : FIRST_BLOCK_MS);
      r.blockedUntil = now + r.blockMs;
      r.failures = 0;
      r.windowStart = now;
    }
  }

  /** Clears one key's record (the username that just logged in; never the address). */
  succeed(key: string): void {
    if (this.records.size) this.records.delete(key);
  }

  private prune(now: number): void {
    for (const [key, r] of this.records) {
      if (r.blockedUntil <= now && now - r.windowStart > WINDOW_MS) this.records.delete(key);
    }
    if (this.records.size >= MAX_TRACKED) this.records.clear();
  }
}
