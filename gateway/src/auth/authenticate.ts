// Proxy-Authorization -> the account and the targeting it asks for, or a refusal. Only header
// values that authenticated are memoised (bounded by bytes), so junk credentials cost no memory;
// values longer than any valid credential are refused before parsing. The password check is a
// sha256 compared in constant time against the cached digest, redone whenever the credential
// cache changes. Failures are counted per address and per username (backoff.ts). A request that
// sends no credentials at all is looked up in the IP allowlist (docs/adr/0036); one that sends any
// is judged by them alone.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Plan } from '../spec.ts';
import { USERNAME_FAILURES_ALLOWED, type AuthBackoff } from './backoff.ts';
import type { AllowEntry } from './allowlist.ts';
import type { CachedAccount, CredentialCache } from './cache.ts';
import {
  CREDENTIAL_ERROR_TEXT,
  decodeProxyAuthorization,
  MAX_AUTHORIZATION_LENGTH,
  parseCredentials,
  parseTargeting,
  type CredentialError,
  type ParsedCredentials,
} from '#common/credentials.ts';

export type AuthResult =
  | {
      ok: true;
      account: CachedAccount;
      credentials: ParsedCredentials;
      /** The allowlist entry that admitted a request without credentials. */
      entry?: AllowEntry;
    }
  | {
      ok: false;
      status: 407 | 403 | 429;
      reason: AuthRefusal;
      details: string;
      retryAfter?: number;
      /** The account (or sub-user) the username named, when it named one (usage history). */
      named?: CachedAccount;
    };

/** The refusal ids (proxy/refusals.ts) authentication answers with. */
export type AuthRefusal =
  CredentialError | 'unknown_user' | 'wrong_password' | 'account_suspended' | 'auth_backoff';

interface Memo {
  credentials: ParsedCredentials;
  /** The cache entry this header was verified against, and the cache generation. */
  verified: CachedAccount;
  generation: number;
}

/** Bytes of memoised header values (plus a per-entry overhead) before the memo is cleared. */
export const MEMO_BYTES = 8 * 1024 * 1024;
const MEMO_ENTRY_OVERHEAD = 512;

const addrKey = (address: string) => `addr:${address}`;
const userKey = (username: string) => `user:${username}`;

export class Authenticator {
  private readonly memo = new Map<string, Memo>();
  private memoBytes = 0;
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

  /** Memoised header values and their approximate bytes (tests). */
  get memoSize(): { entries: number; bytes: number } {
    return { entries: this.memo.size, bytes: this.memoBytes };
  }

  authenticate(header: string | undefined, address: string): AuthResult {
    const wait = this.backoff.retryAfter(addrKey(address));
    if (wait) return backedOff(wait);
    const memo = header === undefined ? undefined : this.memo.get(header);
    if (
      memo &&
      memo.generation === this.cache.generation &&
      this.cache.get(memo.credentials.username) === memo.verified
    ) {
      return this.status(memo.verified, memo.credentials);
    }
    if (memo) this.forget(header!);
    if (header === undefined || header === '') return this.allowlisted(address);
    if (header !== undefined && header.length > MAX_AUTHORIZATION_LENGTH)
      return this.malformed('malformed_authorization', address);
    const decoded = decodeProxyAuthorization(header);
    if (!decoded.ok)
      return decoded.reason === 'missing'
        ? credentialError('missing')
        : this.malformed(decoded.reason, address);
    const parsed = parseCredentials(this.plan, decoded.username, decoded.password, {
      maxSessionMinutes: this.maxSessionMinutes,
    });
    if (!parsed.ok) return this.malformed(parsed.reason, address);
    const username = parsed.value.username;
    const userWait = this.backoff.retryAfter(userKey(username));
    if (userWait) return backedOff(userWait);
    const account = this.cache.get(username);
    if (!account) {
      this.backoff.fail(addrKey(address));
      return { ok: false, status: 407, reason: 'unknown_user', details: 'wrong username or password' };
    }
    const digest = createHash('sha256').update(parsed.value.password).digest();
    if (!timingSafeEqual(digest, account.passwordSha256)) {
      this.backoff.fail(addrKey(address));
      this.backoff.fail(userKey(username), Date.now(), USERNAME_FAILURES_ALLOWED);
      return {
        ok: false,
        status: 407,
        reason: 'wrong_password',
        details: 'wrong username or password',
        named: account,
      };
    }
    this.backoff.succeed(userKey(username));
    if (header !== undefined)
      this.remember(header, {
        credentials: parsed.value,
        verified: account,
        generation: this.cache.generation,
      });
    return this.status(account, parsed.value);
  }

  private status(account: CachedAccount, credentials: ParsedCredentials, entry?: AllowEntry): AuthResult {
    if (account.status !== 'active')
      return {
        ok: false,
        status: 403,
        reason: 'account_suspended',
        details: 'account suspended',
        named: account,
      };
    return entry ? { ok: true, account, credentials, entry } : { ok: true, account, credentials };
  }

  /** No credentials: the account whose allowlist covers the source, with the entry's targeting. */
  private allowlisted(address: string): AuthResult {
    const hit = this.cache.allowed(this.plan, address);
    if (!hit) return credentialError('missing');
    const { account, entry } = hit;
    let credentials: ParsedCredentials = { username: account.username, password: '', targeting: {} };
    if (entry.targeting !== null) {
      // Checked by the API with the widest session limit; this gateway's own limit may be lower.
      const parsed = parseTargeting(this.plan, entry.targeting, {
        maxSessionMinutes: this.maxSessionMinutes,
      });
      if (!parsed.ok) return credentialError(parsed.reason);
      credentials = { ...parsed.value, username: account.username, password: '' };
    }
    return this.status(account, credentials, entry);
  }

  private malformed(reason: CredentialError, address: string): AuthResult {
    this.backoff.fail(addrKey(address));
    return credentialError(reason);
  }

  private remember(header: string, memo: Memo): void {
    const bytes = header.length * 2 + MEMO_ENTRY_OVERHEAD;
    if (this.memoBytes + bytes > MEMO_BYTES) {
      this.memo.clear();
      this.memoBytes = 0;
    }
    this.memo.set(header, memo);
    this.memoBytes += bytes;
  }

  private forget(header: string): void {
    if (this.memo.delete(header)) this.memoBytes -= header.length * 2 + MEMO_ENTRY_OVERHEAD;
  }
}

function backedOff(retryAfter: number): AuthResult {
  return {
    ok: false,
    status: 429,
    reason: 'auth_backoff',
    details: 'too many failed authentications',
    retryAfter,
  };
}

function credentialError(reason: CredentialError): AuthResult {
  return { ok: false, status: 407, reason, details: CREDENTIAL_ERROR_TEXT[reason] };
}
