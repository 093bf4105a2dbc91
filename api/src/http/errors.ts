// Every error leaves the API as {"success": false, "error": "<message>"} with the status of its
// code in the closed table (common/src/errors.ts). Unknown errors are logged and become INTERNAL;
// their details never reach the client.
import type { ErrorRequestHandler, Response } from 'express';
import { AppError, type ErrorCode } from '#common/errors.ts';
import { databaseUnavailable } from '#common/db/unavailable.ts';
import type { Logger } from '#common/logger.ts';

export function sendError(res: Response, err: AppError): void {
  res.locals.errorCode = err.code;
  res.status(err.status).json({ success: false, error: err.message });
}

/** body-parser's error types -> our codes (https://github.com/expressjs/body-parser#errors). */
const BODY_PARSER_ERRORS: Record<string, ErrorCode> = {
  'entity.parse.failed': 'MALFORMED_JSON',
  'entity.too.large': 'PAYLOAD_TOO_LARGE',
  'encoding.unsupported': 'UNSUPPORTED_MEDIA_TYPE',
  'charset.unsupported': 'UNSUPPORTED_MEDIA_TYPE',
};

export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err: unknown, req, res, _next) => {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (err instanceof AppError) return sendError(res, err);
    const type = typeof err === 'object' && err !== null && 'type' in err ? String(err.type) : '';
    const mapped = BODY_PARSER_ERRORS[type];
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
