// Dashboard sessions and CSRF (docs/adr/0050). The session cookie holds 256 random bits; PostgreSQL
// holds their sha256 with idle and absolute expiry, so every API process shares the sessions and a
// sign-out ends one everywhere. CSRF follows OWASP's "signed double-submit cookie": the token in
// every form is an HMAC of the session token (or, before sign-in, of a random pre-session cookie)
// under a key derived from PROXYFLEET_CREDENTIALS_KEY, so every API process can check it and
// nothing more is stored. A state-changing request without a valid token gets 403. Each session
// also keeps a public id, the address and the User-Agent it started from, for the Security page's
// list (docs/adr/0077); sign-in and sign-out are audited in the session's own transaction.
import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Request, Response } from 'express';
import type { Pool } from '#common/db/pool.ts';
import { sha256 } from '#common/secrets.ts';
import { deleteSession, insertSession, readSession, type Person } from './repo.ts';

/** A session ends after this long without a request... */
export const SESSION_IDLE_SECONDS = 30 * 60;
/** ...and at the latest this long after sign-in. */
export const SESSION_ABSOLUTE_SECONDS = 12 * 3600;
/** The idle clock is written at most this often (not on every request). */
const SESSION_TOUCH_SECONDS = 60;
const PRE_SESSION_SECONDS = 3600;
/** The browser cookie: which browser signs in, for the new-browser email (docs/alerts.md "Security notices"). */
const BROWSER_SECONDS = 400 * 24 * 3600;

export interface CookieNames {
  session: string;
  preSession: string;
  browser: string;
}

export interface SessionConfig {
  pool: Pool;
  /**
   * PROXYFLEET_DASHBOARD_HTTPS: every request counts as HTTPS for the cookies. Otherwise a request
   * does when it is (req.secure: a TLS socket, or X-Forwarded-Proto from a trusted proxy).
   */
  https: boolean;
  csrfKey: Buffer;
}

/**
 * Whether this request's cookies are Secure with the __Host- prefix: it came over HTTPS as the API
 * knows it (req.secure, never a header from an untrusted peer), or the operator says all do. A
 * cookie set over plain HTTP (pf_*) is not read over HTTPS, nor the reverse.
 */
export const overHttps = (req: Request, https: boolean): boolean => https || req.secure;

export const csrfKeyFrom = (credentialsKey: Buffer): Buffer =>
  Buffer.from(hkdfSync('sha256', credentialsKey, Buffer.alloc(0), 'proxyfleet dashboard csrf v1', 32));

export function cookieNames(https: boolean): CookieNames {
  // RFC 6265bis 4.1.3.2: a __Host- cookie must be Secure, Path=/ and have no Domain.
  return https
    ? { session: '__Host-pf_session', preSession: '__Host-pf_pre', browser: '__Host-pf_browser' }
    : { session: 'pf_session', preSession: 'pf_pre', browser: 'pf_browser' };
}

export function readCookie(req: Request, name: string): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) {
      const value = part.slice(eq + 1).trim();
      return /^[A-Za-z0-9_-]{1,100}$/.test(value) ? value : undefined;
    }
  }
  return undefined;
}

/** The sha256 of this request's session cookie (which session is "this session"), if any. */
export function sessionHashOf(req: Request, https: boolean): Buffer | undefined {
  const token = readCookie(req, cookieNames(overHttps(req, https)).session);
  return token ? sha256(token) : undefined;
}

/**
 * The sha256 of this request's pre-session cookie: a sign-in waiting for its second step is kept
 * under it, so the code step works only in the browser that typed the password.
 */
export function preSessionHashOf(req: Request, https: boolean): Buffer | undefined {
  const value = readCookie(req, cookieNames(overHttps(req, https)).preSession);
  return value ? sha256(value) : undefined;
}

export class Sessions {
  private readonly config: SessionConfig;

  constructor(config: SessionConfig) {
    this.config = config;
  }

  private secure(req: Request): boolean {
    return overHttps(req, this.config.https);
  }

  private names(req: Request): CookieNames {
    return cookieNames(this.secure(req));
  }

  private cookieOptions(req: Request, maxAgeSeconds?: number) {
    return {
      httpOnly: true,
      sameSite: 'lax' as const,
      secure: this.secure(req),
      path: '/',
      ...(maxAgeSeconds === undefined ? {} : { maxAge: maxAgeSeconds * 1000 }),
    };
  }

  /** The signed-in person of this request, if its session is live. */
  async current(req: Request): Promise<{ person: Person; token: string } | undefined> {
    const token = readCookie(req, this.names(req).session);
    if (!token) return undefined;
    const person = await readSession(
      this.config.pool,
      sha256(token),
      SESSION_IDLE_SECONDS,
      SESSION_TOUCH_SECONDS,
    );
    return person ? { person, token } : undefined;
  }

  /**
   * Sign-in: a new session for the account, with the address and browser it started from, audited
   * as `session.signed_in` with `details` (how the person signed in).
   */
  async start(
    req: Request,
    res: Response,
    accountId: string,
    details: Record<string, unknown> = {},
  ): Promise<void> {
    const token = randomBytes(32).toString('base64url');
    // The browser keeps one random id for 400 days; a sign-in from one the account has not seen
    // before is emailed to the owner (insertSession).
    const names = this.names(req);
    const browser = readCookie(req, names.browser) ?? randomBytes(24).toString('base64url');
    await insertSession(
      this.config.pool,
      {
        hash: sha256(token),
        accountId,
        absoluteSeconds: SESSION_ABSOLUTE_SECONDS,
        browserHash: sha256(browser),
        origin: {
          ip: req.ip ?? null,
          // Shown on the Security page; no control character (PostgreSQL text refuses NUL) is kept.
          userAgent: req.get('user-agent')?.replace(/\p{Cc}/gu, '') || null,
        },
      },
      details,
    );
    res.cookie(names.session, token, this.cookieOptions(req, SESSION_ABSOLUTE_SECONDS));
    res.cookie(names.browser, browser, this.cookieOptions(req, BROWSER_SECONDS));
    res.clearCookie(names.preSession, this.cookieOptions(req));
  }

  async end(req: Request, res: Response): Promise<void> {
    const name = this.names(req).session;
    const token = readCookie(req, name);
    if (token) await deleteSession(this.config.pool, sha256(token), req.ip ?? null);
    res.clearCookie(name, this.cookieOptions(req));
  }

  /** The pre-session value that binds CSRF tokens of the signed-out forms; set when missing. */
  preSession(req: Request, res: Response): string {
    const name = this.names(req).preSession;
    const existing = readCookie(req, name);
    if (existing) return existing;
    const value = randomBytes(24).toString('base64url');
    res.cookie(name, value, this.cookieOptions(req, PRE_SESSION_SECONDS));
    return value;
  }

  csrfToken(binding: string): string {
    return createHmac('sha256', this.config.csrfKey).update(binding).digest('base64url');
  }

  /** True when the request's `_csrf` field is the token of its session (or pre-session) cookie. */
  csrfValid(req: Request, signedIn: boolean): boolean {
    const names = this.names(req);
    const binding = readCookie(req, signedIn ? names.session : names.preSession);
    const body = req.body as Record<string, unknown> | undefined;
    const sent = body?._csrf;
    if (!binding || typeof sent !== 'string') return false;
    const expected = Buffer.from(this.csrfToken(binding));
    const given = Buffer.from(sent);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }
}
