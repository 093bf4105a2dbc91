// RateLimit header fields of draft-ietf-httpapi-ratelimit-headers (draft 09+): the policy
// (quota q over window w seconds) and the current state (r remaining, t seconds to reset), plus
// Retry-After (RFC 9110 section 10.2.3) in seconds on 429.
import type { Response } from 'express';
import type { Decision, RateLimiter } from './limiter.ts';

export function setRateLimitHeaders(res: Response, limiter: RateLimiter, decision: Decision): void {
  const name = limiter.policy.name;
  res.setHeader('RateLimit-Policy', `"${name}";q=${limiter.policy.burst};w=${limiter.windowSeconds}`);
  if (decision.allowed) {
    res.setHeader('RateLimit', `"${name}";r=${decision.remaining};t=${decision.resetSeconds}`);
  } else {
    res.setHeader('RateLimit', `"${name}";r=0;t=${decision.retryAfterSeconds}`);
    res.setHeader('Retry-After', String(decision.retryAfterSeconds));
  }
}
