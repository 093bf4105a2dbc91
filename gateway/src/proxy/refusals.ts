// Every refusal the gateway answers, in one closed table: HTTP status, RFC 9209 Proxy-Status
// error type, the reason label (Proxy-Status details prefix of the metrics' `reason` label) and
// the message. Authentication, plain forwarding, tunnels and the HTTP parser all answer from it;
// docs/gateway.md lists it and a test keeps the two equal.
import { CREDENTIAL_ERROR_TEXT, type CredentialError } from '../auth/credentials.ts';
import type { Refusal } from './http-util.ts';

export interface RefusalEntry {
  status: number;
  /** RFC 9209 error type. */
  error: string;
  /** The metrics label and log field (bounded set). */
  reason: string;
  message: string;
}

const credentialRefusals = Object.fromEntries(
  (Object.entries(CREDENTIAL_ERROR_TEXT) as [CredentialError, string][]).map(([reason, message]) => [
    reason,
    { status: 407, error: 'http_request_denied', reason, message },
  ]),
) as Record<CredentialError, RefusalEntry>;

const TABLE = {
  ...credentialRefusals,
  unknown_user: {
    status: 407,
    error: 'http_request_denied',
    reason: 'unknown_user',
    message: 'wrong username or password',
  },
  wrong_password: {
    status: 407,
    error: 'http_request_denied',
    reason: 'wrong_password',
    message: 'wrong username or password',
  },
  account_suspended: {
    status: 403,
    error: 'http_request_denied',
    reason: 'account_suspended',
    message: 'account suspended',
  },
  auth_backoff: {
    status: 429,
    error: 'http_request_denied',
    reason: 'auth_backoff',
    message: 'too many failed authentications',
  },
  connection_limit: {
    status: 429,
    error: 'connection_limit_reached',
    reason: 'connection_limit',
    message: 'too many connections for this account',
  },
  no_bandwidth: {
    status: 402,
    error: 'http_request_denied',
    reason: 'no_bandwidth',
    message: 'no {plan} bandwidth left: buy {plan} bandwidth',
  },
  client_gone: {
    status: 400,
    error: 'http_request_error',
    reason: 'client_gone',
    message: 'client went away',
  },
  not_proxy_request: {
    status: 400,
    error: 'http_request_error',
    reason: 'not_proxy_request',
    message: 'absolute-form http:// URL required',
  },
  https_not_connect: {
    status: 400,
    error: 'http_request_error',
    reason: 'not_proxy_request',
    message: 'use CONNECT for https',
  },
  bad_destination: {
    status: 400,
    error: 'http_request_error',
    reason: 'bad_destination',
    message: 'malformed destination',
  },
  connect_needs_authority: {
    status: 400,
    error: 'http_request_error',
    reason: 'bad_destination',
    message: 'CONNECT needs host:port',
  },
  bad_connection_header: {
    status: 400,
    error: 'http_request_error',
    reason: 'bad_connection_header',
    message: 'Connection must not name Content-Length, Transfer-Encoding or Host',
  },
  malformed_request: {
    status: 400,
    error: 'http_request_error',
    reason: 'malformed_request',
    message: 'malformed HTTP request',
  },
  header_too_large: {
    status: 431,
    error: 'http_request_error',
    reason: 'header_too_large',
    message: 'request header section too large',
  },
  head_timeout: {
    status: 408,
    error: 'http_request_error',
    reason: 'head_timeout',
    message: 'request head not received in time',
  },
  port_prohibited: {
    status: 403,
    error: 'destination_ip_prohibited',
    reason: 'port_prohibited',
    message: 'destination port not allowed',
  },
  destination_prohibited: {
    status: 403,
    error: 'destination_ip_prohibited',
    reason: 'destination_prohibited',
    message: 'destination not allowed',
  },
  dns_error: {
    status: 502,
    error: 'dns_error',
    reason: 'dns_error',
    message: 'destination name did not resolve',
  },
  bandwidth_held: {
    status: 503,
    error: 'proxy_internal_error',
    reason: 'bandwidth_held',
    message: '{plan} bandwidth is held by a gateway that stopped: retry in a few seconds',
  },
  billing_unavailable: {
    status: 503,
    error: 'proxy_internal_error',
    reason: 'billing_unavailable',
    message: 'bandwidth balance cannot be checked right now: retry shortly',
  },
  no_exit: {
    status: 503,
    error: 'proxy_configuration_error',
    reason: 'no_exit',
    message: 'no exit matches the requested location',
  },
  destination_refused: {
    status: 502,
    error: 'connection_refused',
    reason: 'destination_refused',
    message: 'the destination refused or closed the connection',
  },
  destination_connect_timeout: {
    status: 504,
    error: 'connection_timeout',
    reason: 'destination_timeout',
    message: 'connecting to the destination timed out',
  },
  destination_response_timeout: {
    status: 504,
    error: 'http_response_timeout',
    reason: 'destination_timeout',
    message: 'the destination did not answer in time',
  },
  exit_failed: {
    status: 502,
    error: 'connection_refused',
    reason: 'exit_failed',
    message: 'the destination could not be reached',
  },
  exit_connect_timeout: {
    status: 504,
    error: 'connection_timeout',
    reason: 'exit_timeout',
    message: 'connecting to the destination timed out',
  },
  exit_response_timeout: {
    status: 504,
    error: 'http_response_timeout',
    reason: 'exit_timeout',
    message: 'the destination did not answer in time',
  },
} as const satisfies Record<string, RefusalEntry>;

export type RefusalId = keyof typeof TABLE;

/** The table as a list (documentation test, metrics exported at zero). */
export const REFUSALS: readonly (RefusalEntry & { id: RefusalId })[] = (
  Object.entries(TABLE) as [RefusalId, RefusalEntry][]
).map(([id, e]) => ({ id, ...e }));

/** The refusal for an id, ready to send (`{plan}` in the message is replaced by the plan). */
export function refusalFor(
  id: RefusalId,
  options: { retryAfter?: number | undefined; plan?: string } = {},
): Refusal {
  const e: RefusalEntry = TABLE[id];
  const r: Refusal = {
    status: e.status,
    error: e.error,
    reason: e.reason,
    details: e.message.replaceAll('{plan}', options.plan ?? 'this plan'),
  };
  if (options.retryAfter) r.retryAfter = options.retryAfter;
  return r;
}
