// Every error leaves the API as {"success": false, "error": "<message>"} with the status of its
// code in the closed table (common/src/errors.ts). Unknown errors are logged and become INTERNAL;
// their details never reach the client.
import type { ErrorRequestHandler, Response } from 'express';
import { AppError, type ErrorCode } from '#common/errors.ts';
import { databaseUnavailable } from '#common/db/unavailable.ts';
import type { Logger } from '#common/logger.ts';

export function sendError(res: Response, err: AppError): void {
  res.locals.errorCode = err.code;
  if (err.retryAfter !== undefined) res.setHeader('Retry-After', String(err.retryAfter));
  res.status(err.status).json({ success: false, error: err.message });
}

/** body-parser's error types -> our codes (https://github.com/expressjs/body-parser#errors). */
const BODY_PARSER_ERRORS: Record<string, ErrorCode> = {
  'entity.parse.failed': 'MALFORMED_JSON',
  'entity.too.large': 'PAYLOAD_TOO_LARGE',
  'encoding.unsupported': 'UNSUPPORTED_ENCODING',
  'charset.unsupported': 'UNSUPPORTED_MEDIA_TYPE',
  'parameters.too.many': 'TOO_MANY_FIELDS',
};

/**
 * Malformed input that reaches the handler as an untyped error: a 4xx in the documented format,
 * never a 500, and nothing logged at error level (docs/security.md, "Malformed input").
 */
export function malformedInput(err: unknown): ErrorCode | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const e = err as { type?: unknown; code?: unknown; status?: unknown; statusCode?: unknown };
  if (typeof e.type === 'string' && Object.hasOwn(BODY_PARSER_ERRORS, e.type))
    return BODY_PARSER_ERRORS[e.type];
  // Express's router: a path parameter that is not valid percent-encoding (status 400).
  if (err instanceof URIError) return 'MALFORMED_PATH';
  // A gzip, deflate or br body that does not decompress (body-parser passes zlib's error on).
  if (typeof e.code === 'string' && /^(Z_|ERR__|ERR_BROTLI|ERR_ZLIB|ERR_ZSTD)/.test(e.code))
    return 'MALFORMED_BODY';
  // PostgreSQL refuses NUL in text (22021, 22P05) wherever it slipped past the request's checks.
  if (e.code === '22021' || e.code === '22P05') return 'INVALID_CHARACTERS';
  // Any other client error raised by body-parser or the router (http-errors with a 4xx status).
  const status = Number(e.status ?? e.statusCode);
  if (status >= 400 && status < 500) return 'BAD_REQUEST';
  return undefined;
}

export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err: unknown, req, res, _next) => {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (err instanceof AppError) return sendError(res, err);
    const mapped = malformedInput(err);
    if (mapped) return sendError(res, new AppError(mapped));
    if (databaseUnavailable(err)) {
      logger.warn({ err, reqId: res.locals.reqId as unknown }, 'database unavailable');
      return sendError(res, new AppError('SERVICE_UNAVAILABLE'));
    }
    // Log the error object only: request bodies and headers may carry keys and are never logged.
    logger.error(
      { err, reqId: res.locals.reqId as unknown, method: req.method, route: routeTemplate(req) },
      'request failed',
    );
    sendError(res, new AppError('INTERNAL'));
  };
}

/** The matched route's template (`/api/v1/usage`, `/admin/v1/accounts/:id`), or `unmatched`. */
export function routeTemplate(req: { baseUrl: string; route?: { path?: unknown } }): string {
  const path = req.route?.path;
  return typeof path === 'string' ? req.baseUrl + path : 'unmatched';
}
