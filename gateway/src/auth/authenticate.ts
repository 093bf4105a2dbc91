// Proxy-Authorization -> the account and the targeting it asks for, or a refusal. Parsing is pure,
// so results are memoised per header value; the password check is a sha256 compared in constant
// time against the cached digest, redone whenever the credential cache changes.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Plan } from '../spec.ts';
import type { AuthBackoff } from './backoff.ts';
import type { CachedAccount, CredentialCache } from './cache.ts';
import { CREDENTIAL_ERROR_TEXT, decodeProxyAuthorization, parseCredentials, type ParsedCredentials } from './credentials.ts';

export type AuthResult =
  | { ok: true; account: CachedAccount; credentials: ParsedCredentials }
  | { ok: false; status: 407 | 403 | 429; reason: string; details: string; retryAfter?: number };

interface Memo {
  parsed: ReturnType<typeof parseCredentials> | { ok: false; reason: 'malformed' };
  /** The cache entry this header was verified against, and the cache generation. */
  verified?: CachedAccount;
  generation?: number;
}

const MEMO_LIMIT = 50_000;

export class Authenticator {
  private readonly memo = new Map<string, Memo>();
  private readonly plan: Plan;
  private readonly cache: CredentialCache;
  private readonly backoff: AuthBackoff;
  private readonly maxSessionMinutes: number;

  constructor(plan: Plan, cache: CredentialCache, backoff: AuthBackoff, maxSessionMinutes: number) {
    this.plan = plan;
    this.cache = cache;
    this.backoff = backoff;
    this.maxSessionMinutes = maxSessionMinutes;
  }

  authenticate(header: string | undefined, address: string): AuthResult {
    const wait = this.backoff.retryAfter(address);
    if (wait) return { ok: false, status: 429, reason: 'auth_backoff', details: 'too many failed authentications', retryAfter: wait };
    let memo = header === undefined ? undefined : this.memo.get(header);
    if (!memo) {
      const decoded = decodeProxyAuthorization(header);
      memo = {
        parsed: decoded.ok
          ? parseCredentials(this.plan, decoded.username, decoded.password, { maxSessionMinutes: this.maxSessionMinutes })
          : decoded,
      };
      if (header !== undefined) {
        if (this.memo.size >= MEMO_LIMIT) this.memo.clear();
        this.memo.set(header, memo);
      }
    }
    const parsed = memo.parsed;
    if (!parsed.ok) {
      if (parsed.reason !== 'missing') this.backoff.fail(address);
      return { ok: false, status: 407, reason: parsed.reason, details: CREDENTIAL_ERROR_TEXT[parsed.reason as keyof typeof CREDENTIAL_ERROR_TEXT] ?? 'bad credentials' };
    }
    const account = this.cache.get(parsed.value.username);
    if (!account) {
      this.backoff.fail(address);
      return { ok: false, status: 407, reason: 'unknown_user', details: 'wrong username or password' };
    }
    if (memo.verified !== account || memo.generation !== this.cache.generation) {
      const digest = createHash('sha256').update(parsed.value.password).digest();
      if (!timingSafeEqual(digest, account.passwordSha256)) {
        memo.verified = undefined;
        this.backoff.fail(address);
        return { ok: false, status: 407, reason: 'wrong_password', details: 'wrong username or password' };
      }
      memo.verified = account;
      memo.generation = this.cache.generation;
      this.backoff.succeed(address);
    }
    if (account.status !== 'active') return { ok: false, status: 403, reason: 'account_suspended', details: 'account suspended' };
    return { ok: true, account, credentials: parsed.value };
  }
}
