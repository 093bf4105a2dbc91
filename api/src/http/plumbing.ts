// Per-request plumbing every route shares: request id, security headers, metrics and the access
// log line (which never contains headers, bodies or query strings: keys travel in headers).
import { randomUUID } from 'node:crypto';
import type { Duplex } from 'node:stream';
import type { Request, RequestHandler, Response } from 'express';
import { AppError } from '#common/errors.ts';
import type { Logger } from '#common/logger.ts';
import { routeTemplate, sendError } from './errors.ts';
import type { ApiMetrics } from './metrics.ts';
import type { RouteGroup } from './openapi.ts';

const SAFE_REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

const SECURITY_HEADERS: Record<string, string> = {
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Content-Security-Policy': "default-src 'none'; frame-ancestors 'none'",
  'Referrer-Policy': 'no-referrer',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'Cache-Control': 'no-store',
};

/**
 * HSTS only on a response that goes over HTTPS: req.secure, which is a TLS socket or, behind
 * PROXYFLEET_API_TRUST_PROXY_HOPS trusted proxies, their X-Forwarded-Proto (docs/security.md, "Headers").
 */
const HSTS = 'max-age=31536000; includeSubDomains';

export function requestPlumbing(logger: Logger, metrics: ApiMetrics): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    const incoming = req.headers['x-request-id'];
    const reqId = typeof incoming === 'string' && SAFE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.locals.reqId = reqId;
    res.setHeader('X-Request-Id', reqId);
    res.set(SECURITY_HEADERS);
    if (req.secure) res.setHeader('Strict-Transport-Security', HSTS);
    res.on('finish', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route = healthRoute(req) ?? routeTemplate(req);
      const statusClass = `${Math.floor(res.statusCode / 100)}xx`;
      metrics.requestDuration.observe({ route, method: req.method, status_class: statusClass }, seconds);
      if (logger.isLevelEnabled('debug')) {
        logger.debug(
          {
            reqId,
            method: req.method,
            route,
            status: res.statusCode,
            ms: Math.round(seconds * 1e4) / 10,
            code: res.locals.errorCode as unknown,
          },
          'request',
        );
      }
    });
    next();
  };
}

const HEALTH_PATHS = new Set(['/healthz', '/readyz', '/metrics']);
const healthRoute = (req: Request) => (HEALTH_PATHS.has(req.path) ? req.path : undefined);

/** A request with a body must say it is JSON (the spec: Content-Type application/json). */
export const requireJsonBody: RequestHandler = (req, res, next) => {
  const hasBody =
    req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
  if (
    hasBody &&
    (req.method === 'POST' || req.method === 'PUT' || req.method === 'PATCH') &&
    !req.is('application/json')
  ) {
    return sendError(res, new AppError('UNSUPPORTED_MEDIA_TYPE'));
  }
  next();
};

/** 405 with Allow for a known path and another method; 404 for anything else. */
export function notFound(groups: RouteGroup[]): RequestHandler {
  const patterns = groups.flatMap((g) =>
    g.routes.map((r) => ({
      method: r.method.toUpperCase(),
      regex: new RegExp(
        '^' + (g.prefix + r.path).replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:\w+/g, '[^/]+') + '/?$',
      ),
    })),
  );
  return (req: Request, res: Response) => {
    const allowed = patterns.filter((p) => p.regex.test(req.path)).map((p) => p.method);
    if (allowed.length > 0) {
      if (allowed.includes('GET')) allowed.push('HEAD');
      res.setHeader('Allow', [...new Set(allowed)].join(', '));
      return sendError(res, new AppError('METHOD_NOT_ALLOWED'));
    }
    sendError(res, new AppError('NOT_FOUND'));
  };
}

/** Does any string (key or value) in a parsed body hold NUL? */
function holdsNul(value: unknown, depth = 0): boolean {
  if (typeof value === 'string') return value.includes('\u0000');
  if (typeof value !== 'object' || value === null || depth > 64) return false;
  for (const [key, inner] of Object.entries(value)) {
    if (key.includes('\u0000') || holdsNul(inner, depth + 1)) return true;
  }
  return false;
}

/**
 * After the body parser: a NUL anywhere in the body or the query string is refused with 400
 * before a handler sees it (PostgreSQL cannot store it in text; docs/security.md, "Malformed input").
 */
export const rejectNul: RequestHandler = (req, res, next) => {
  if (holdsNul(req.body) || req.originalUrl.includes('%00') || holdsNul(req.query)) {
    return sendError(res, new AppError('INVALID_CHARACTERS'));
  }
  next();
};

/**
 * node's 'clientError': a request its HTTP parser cannot read (a malformed request line or
 * header, a header block above the limit) is answered 400 BAD_REQUEST in the API's JSON format
 * with the usual headers, then the connection closes (docs/security.md, "Malformed input"). A
 * connection already reset, or one that timed out before a request, is only closed.
 */
export function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || err.code === 'ERR_HTTP_REQUEST_TIMEOUT' || !socket.writable) {
    socket.destroy();
    return;
  }
  const error = new AppError('BAD_REQUEST');
  const body = JSON.stringify({ success: false, error: error.message });
  const headers = {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(body)),
    Connection: 'close',
    'X-Request-Id': randomUUID(),
    ...SECURITY_HEADERS,
  };
  const head = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
  socket.end(`HTTP/1.1 ${error.status} Bad Request\r\n${head.join('')}\r\n${body}`);
}
