// One closed table of error codes -> HTTP status and message. Code never matches on message text;
// docs/errors.md is checked against this table by a test.
export const ERRORS = {
  INVALID_API_KEY: { status: 401, message: 'Invalid API key' },
  CONFLICTING_API_KEYS: {
    status: 400,
    message: 'X-API-Key and the bearer token are different keys; send one',
  },
  NO_BANDWIDTH: { status: 403, message: 'No {plan} bandwidth purchased. Buy {plan} bandwidth first.' },
  RATE_LIMITED: { status: 429, message: 'Too many requests, retry after {retryAfter|second}' },
  VALIDATION_FAILED: { status: 400, message: 'Invalid request: {detail}' },
  MALFORMED_JSON: { status: 400, message: 'Request body is not valid JSON' },
  PAYLOAD_TOO_LARGE: { status: 413, message: 'Request body is too large' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: 'Content-Type must be application/json' },
  UNSUPPORTED_ENCODING: { status: 415, message: 'Content-Encoding must be gzip, deflate, br or identity' },
  MALFORMED_BODY: { status: 400, message: 'Request body cannot be decoded' },
  TOO_MANY_FIELDS: { status: 413, message: 'Request has too many form fields' },
  MALFORMED_PATH: { status: 400, message: 'Request path is not valid percent-encoding' },
  INVALID_CHARACTERS: { status: 400, message: 'Request contains a NUL character' },
  BAD_REQUEST: { status: 400, message: 'Bad request' },
  NOT_FOUND: { status: 404, message: 'Not found' },
  METHOD_NOT_ALLOWED: { status: 405, message: 'Method not allowed' },
  INVALID_ADMIN_TOKEN: { status: 401, message: 'Invalid admin token' },
  ACCOUNT_NOT_FOUND: { status: 404, message: 'Account not found' },
  IDEMPOTENCY_KEY_REUSED: { status: 422, message: 'This idempotency key was used for a different purchase' },
  KEY_NOT_FOUND: { status: 404, message: 'API key not found' },
  EMAIL_TAKEN: { status: 409, message: 'An account with this email already exists' },
  NAMED_KEY_LIMIT: { status: 409, message: 'An account can have at most {limit} named API keys' },
  KEY_NAME_TAKEN: { status: 409, message: 'A named API key with this name already exists' },
  PRIMARY_KEY_NOT_REVOCABLE: {
    status: 409,
    message: 'The primary key cannot be revoked; regenerate it instead',
  },
  ISP_PROXY_NOT_FOUND: { status: 404, message: 'ISP proxy not found' },
  ISP_PROXY_EXISTS: { status: 409, message: 'An ISP proxy with this host, port and username already exists' },
  ALLOWLIST_ENTRY_NOT_FOUND: { status: 404, message: 'IP allowlist entry not found' },
  ALLOWLIST_LIMIT: { status: 409, message: 'An account can have at most {limit} IP allowlist entries' },
  ALLOWLIST_ENTRY_EXISTS: { status: 409, message: 'This range is already in the allowlist for this product' },
  ALLOWLIST_OVERLAP: {
    status: 409,
    message: "This range overlaps another account's allowlist for this product",
  },
  CLEAR_CREDENTIALS_REFUSED: {
    status: 409,
    message: 'The {plan} plan refuses credentials sent in clear; use scheme https',
  },
  TARGET_NOT_SERVED: {
    status: 400,
    message: 'No {plan} exit serves {target}; see GET /api/v1/locations?product={plan}',
  },
  TLS_NOT_SERVED: {
    status: 409,
    message: 'No TLS is served for {plan}; use scheme http',
  },
  SUB_USER_NOT_FOUND: { status: 404, message: 'Sub-user not found' },
  SUBSCRIPTION_NOT_FOUND: { status: 404, message: 'Subscription not found' },
  INVOICE_NOT_FOUND: { status: 404, message: 'Invoice not found' },
  INVOICE_SETTLED: { status: 409, message: 'This invoice is already {status}' },
  ACCOUNT_SUSPENDED: { status: 403, message: 'The account is suspended; it cannot buy bandwidth' },
  PURCHASE_DAILY_LIMIT: {
    status: 409,
    message: 'Purchases are limited to {limit} a day; {left} can still be bought today',
  },
  CREDIT_LIMIT_REACHED: {
    status: 409,
    message:
      'This purchase would pass the monthly credit limit of {limit}; available this month: {available}',
  },
  CARD_PAYMENTS_OFF: {
    status: 409,
    message: 'Card payments are not set up on this platform; buy billed by invoice',
  },
  NO_SAVED_CARD: { status: 409, message: 'No card is saved; save one on the Billing page first' },
  PAYMENT_PROVIDER_UNAVAILABLE: {
    status: 503,
    message: 'The card payment could not be made now; retry with the same Idempotency-Key',
  },
  CARD_PAYMENT_REFUSED: {
    status: 402,
    message: 'The card payment was refused ({reason}); nothing was bought',
  },
  SUBSCRIPTION_LIMIT: {
    status: 409,
    message: 'An account can have at most {limit|subscription} active at once',
  },
  ISP_PROXIES_UNAVAILABLE: {
    status: 409,
    message:
      'Too few ISP proxies in {country} to rent: {available} on this account not rented yet, {requested} asked for',
  },
  SUB_USER_LIMIT: { status: 409, message: 'An account can have at most {limit} sub-users' },
  SUB_USER_NAME_TAKEN: { status: 409, message: 'A sub-user with this name already exists' },
  PROXY_USERNAME_TAKEN: { status: 409, message: 'This proxy username is taken; choose another' },
  SERVICE_UNAVAILABLE: { status: 503, message: 'Service temporarily unavailable' },
  INTERNAL: { status: 500, message: 'Internal server error' },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof ERRORS;

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Seconds to wait before retrying, sent as Retry-After (a `retryAfter` parameter). */
  readonly retryAfter: number | undefined;
  constructor(code: ErrorCode, params: Record<string, string | number> = {}) {
    super(formatMessage(ERRORS[code].message, params));
    this.name = 'AppError';
    this.code = code;
    this.status = ERRORS[code].status;
    this.retryAfter = typeof params.retryAfter === 'number' ? params.retryAfter : undefined;
  }
}

/**
 * Fills `{name}` with a parameter, and `{name|unit}` with a count and its unit in the right
 * number ("1 second", "5 seconds"): docs/errors.md, "Message style".
 */
export function formatMessage(template: string, params: Record<string, string | number>): string {
  return template.replace(/\{(\w+)(?:\|(\w+))?\}/g, (whole, key: string, unit: string | undefined) => {
    if (!(key in params)) return whole;
    const value = params[key]!;
    return unit === undefined ? String(value) : `${value} ${unit}${Number(value) === 1 ? '' : 's'}`;
  });
}
