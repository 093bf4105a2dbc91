// Authentication of /api/v1 (X-API-Key or Authorization: Bearer) and /admin/v1 (the admin token),
// then the per-key rate limit. Failed authentications are counted and limited per source address:
// once an address has used up its failures, its failures get 429 (and a malformed or missing key
// costs no lookup), but a valid key or the admin token from that address keeps working, so one
// client guessing behind a shared address (an office NAT) does not lock out everyone else there
// (docs/adr/0008-auth-failure-throttling.md). The answer to every failure is the same 401 whatever
// the reason (missing, malformed, unknown, revoked key or suspended account); the reason only goes
// to a metric.
import type { Request, RequestHandler, Response } from 'express';
import { AppError } from '#common/errors.ts';
import { API_KEY_PATTERN, constantTimeEqualStrings, hashApiKey } from '#common/secrets.ts';
import type { ApiMetrics, AuthFailureReason } from '#api/http/metrics.ts';
import { sendError } from '#api/http/errors.ts';
import type { RateLimiter } from '#api/modules/rate-limit/limiter.ts';
import { setRateLimitHeaders } from '#api/modules/rate-limit/headers.ts';
import type { KeyCache } from './key-cache.ts';
import type { KeyUsageRecorder } from './key-usage.ts';

export interface Principal {
  accountId: string;
  keyId: string;
}

export function principal(res: Response): Principal {
  const p = res.locals.principal as Principal | undefined;
  if (!p) throw new Error('route declared auth apiKey but no principal was set');
  return p;
}

export interface AuthDeps {
  keys: KeyCache;
  keyLimiter: RateLimiter;
  failureLimiter: RateLimiter;
  usage: KeyUsageRecorder;
  metrics: ApiMetrics;
  adminToken: string;
}

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/** The presented key: X-API-Key first, else Authorization: Bearer. */
export function presentedKey(req: Request): string | undefined {
  const header = req.headers['x-api-key'];
  if (typeof header === 'string' && header !== '') return header.trim();
  return bearerToken(req);
}

const bearerToken = (req: Request) => {
  const authorization = req.headers.authorization;
  return authorization ? BEARER.exec(authorization)?.[1] : undefined;
};

/**
 * X-API-Key and Authorization: Bearer naming two different keys: which account is meant cannot be
 * known, so neither is looked up (docs/api.md, "Authentication"). The same key in both is one key.
 */
function conflictingKeys(req: Request): boolean {
  const bearer = bearerToken(req);
  return bearer !== undefined && presentedKey(req) !== bearer;
}

const clientAddress = (req: Request) => req.ip ?? req.socket.remoteAddress ?? 'unknown';

/** The address's failed-authentication bucket, and for how long it is blocked (undefined: not). */
function failureBucket(deps: AuthDeps, req: Request): { bucket: string; blockedFor: number | undefined } {
  const bucket = `authfail:${clientAddress(req)}`;
  return { bucket, blockedFor: deps.failureLimiter.isBlocked(bucket) };
}

function sendBlocked(deps: AuthDeps, res: Response, blockedFor: number): void {
  deps.metrics.rateLimited.inc({ limiter: 'auth_failure' });
  setRateLimitHeaders(res, deps.failureLimiter, { allowed: false, limit: 0, retryAfterSeconds: blockedFor });
  sendError(res, new AppError('RATE_LIMITED', { retryAfter: blockedFor }));
}

export function apiKeyAuth(deps: AuthDeps): RequestHandler {
  return async (req, res, next) => {
    if (conflictingKeys(req)) return sendError(res, new AppError('CONFLICTING_API_KEYS'));
    const failures = failureBucket(deps, req);
    const key = presentedKey(req);
    let reason: AuthFailureReason | undefined;
    let found: Principal | undefined;
    if (!key) reason = 'missing';
    else if (!API_KEY_PATTERN.test(key)) reason = 'malformed';
    else {
      const row = await deps.keys.lookup(hashApiKey(key));
      if (!row) reason = 'unknown';
      else if (row.revoked) reason = 'revoked';
      else if (row.status !== 'active') reason = 'suspended';
      else found = { accountId: row.accountId, keyId: row.keyId };
    }
    if (!found) return refuse(deps, res, failures, reason ?? 'unknown', 'INVALID_API_KEY');
    const decision = await deps.keyLimiter.take(`key:${found.keyId}`);
    setRateLimitHeaders(res, deps.keyLimiter, decision);
    if (!decision.allowed) {
      deps.metrics.rateLimited.inc({ limiter: 'key' });
      return sendError(res, new AppError('RATE_LIMITED', { retryAfter: decision.retryAfterSeconds }));
    }
    deps.usage.used(found.keyId);
    res.locals.principal = found;
    next();
  };
}

/** Admin token in Authorization: Bearer, compared in constant time. A customer key never matches. */
export function adminAuth(deps: AuthDeps): RequestHandler {
  return async (req, res, next) => {
    const failures = failureBucket(deps, req);
    const authorization = req.headers.authorization;
    const token = authorization ? BEARER.exec(authorization)?.[1] : undefined;
    // API keys are refused before comparing, even if an operator configured one as the token.
    if (token && !API_KEY_PATTERN.test(token) && constantTimeEqualStrings(token, deps.adminToken))
      return next();
    return refuse(deps, res, failures, 'admin_token', 'INVALID_ADMIN_TOKEN');
  };
}

async function refuse(
  deps: AuthDeps,
  res: Response,
  failures: { bucket: string; blockedFor: number | undefined },
  reason: AuthFailureReason,
  code: 'INVALID_API_KEY' | 'INVALID_ADMIN_TOKEN',
): Promise<void> {
  deps.metrics.authFailures.inc({ reason });
  // Known blocked here: answer without another round trip to the shared limiter.
  if (failures.blockedFor !== undefined) return sendBlocked(deps, res, failures.blockedFor);
  const decision = await deps.failureLimiter.take(failures.bucket);
  if (!decision.allowed) {
    deps.metrics.rateLimited.inc({ limiter: 'auth_failure' });
    setRateLimitHeaders(res, deps.failureLimiter, decision);
    return sendError(res, new AppError('RATE_LIMITED', { retryAfter: decision.retryAfterSeconds }));
  }
  sendError(res, new AppError(code));
}
