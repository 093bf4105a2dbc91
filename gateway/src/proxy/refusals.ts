// Every refusal the gateway answers, in one closed table: HTTP status, RFC 9209 Proxy-Status
// error type, the reason label (Proxy-Status details prefix of the metrics' `reason` label), the
// message and the SOCKS5 reply code (RFC 1928 section 6) a SOCKS client gets instead (docs/adr/0028).
// Authentication, plain forwarding, tunnels, SOCKS5 and the HTTP parser all answer from it;
// docs/gateway.md lists it and a test keeps the two equal.
import { CREDENTIAL_ERROR_TEXT, type CredentialError } from '#common/credentials.ts';
import type { Refusal } from './http-util.ts';

/** SOCKS5 reply codes (RFC 1928 section 6) the gateway sends; 0x00 is success. */
export const SOCKS = {
  GENERAL_FAILURE: 0x01,
  NOT_ALLOWED: 0x02,
  HOST_UNREACHABLE: 0x04,
  CONNECTION_REFUSED: 0x05,
  TTL_EXPIRED: 0x06,
  COMMAND_NOT_SUPPORTED: 0x07,
  ADDRESS_TYPE_NOT_SUPPORTED: 0x08,
} as const;

export interface RefusalEntry {
  status: number;
  /** RFC 9209 error type. */
  error: string;
  /** The metrics label and log field (bounded set). */
  reason: string;
  message: string;
  /**
   * The SOCKS5 reply code sent for it after a SOCKS request. During SOCKS authentication every
   * credential refusal answers RFC 1929 status 0x01 instead (socks5.ts).
   */
  socks: number;
}

const credentialRefusals = Object.fromEntries(
  (Object.entries(CREDENTIAL_ERROR_TEXT) as [CredentialError, string][]).map(([reason, message]) => [
    reason,
    { status: 407, error: 'http_request_denied', reason, message, socks: SOCKS.NOT_ALLOWED },
  ]),
) as Record<CredentialError, RefusalEntry>;

const TABLE = {
  ...credentialRefusals,
  unknown_user: {
    status: 407,
    error: 'http_request_denied',
    reason: 'unknown_user',
    message: 'wrong username or password',
    socks: SOCKS.NOT_ALLOWED,
  },
  wrong_password: {
    status: 407,
    error: 'http_request_denied',
    reason: 'wrong_password',
    message: 'wrong username or password',
    socks: SOCKS.NOT_ALLOWED,
  },
  // The plan refuses credentials that crossed the network in clear (spec.tls, docs/adr/0072).
  credentials_in_clear: {
    status: 407,
    error: 'http_request_denied',
    reason: 'credentials_in_clear',
    message: 'credentials sent in clear are refused: use the https:// proxy (TLS) on this port',
    socks: SOCKS.NOT_ALLOWED,
  },
  account_suspended: {
    status: 403,
    error: 'http_request_denied',
    reason: 'account_suspended',
    message: 'account suspended',
    socks: SOCKS.NOT_ALLOWED,
  },
  auth_backoff: {
    status: 429,
    error: 'http_request_denied',
    reason: 'auth_backoff',
    message: 'too many failed authentications',
    socks: SOCKS.NOT_ALLOWED,
  },
  connection_limit: {
    status: 429,
    error: 'connection_limit_reached',
    reason: 'connection_limit',
    message: 'too many connections for this account',
    socks: SOCKS.NOT_ALLOWED,
  },
  no_bandwidth: {
    status: 402,
    error: 'http_request_denied',
    reason: 'no_bandwidth',
    message: 'no {plan} bandwidth left: buy {plan} bandwidth',
    socks: SOCKS.NOT_ALLOWED,
  },
  sub_user_limit: {
    status: 402,
    error: 'http_request_denied',
    reason: 'sub_user_limit',
    message: "the sub-user's traffic limit for this product is reached",
    socks: SOCKS.NOT_ALLOWED,
  },
  client_gone: {
    status: 400,
    error: 'http_request_error',
    reason: 'client_gone',
    message: 'client went away',
    socks: SOCKS.GENERAL_FAILURE,
  },
  not_proxy_request: {
    status: 400,
    error: 'http_request_error',
    reason: 'not_proxy_request',
    message: 'absolute-form http:// URL required',
    socks: SOCKS.GENERAL_FAILURE,
  },
  https_not_connect: {
    status: 400,
    error: 'http_request_error',
    reason: 'not_proxy_request',
    message: 'use CONNECT for https',
    socks: SOCKS.GENERAL_FAILURE,
  },
  bad_destination: {
    status: 400,
    error: 'http_request_error',
    reason: 'bad_destination',
    message: 'malformed destination',
    socks: SOCKS.HOST_UNREACHABLE,
  },
  connect_needs_authority: {
    status: 400,
    error: 'http_request_error',
    reason: 'bad_destination',
    message: 'CONNECT needs host:port',
    socks: SOCKS.HOST_UNREACHABLE,
  },
  bad_connection_header: {
    status: 400,
    error: 'http_request_error',
    reason: 'bad_connection_header',
    message: 'Connection must not name Content-Length, Transfer-Encoding or Host',
    socks: SOCKS.GENERAL_FAILURE,
  },
  bad_upgrade: {
    status: 400,
    error: 'http_request_error',
    reason: 'bad_upgrade',
    message: 'Upgrade must be a list of protocol tokens of at most 256 bytes',
    socks: SOCKS.GENERAL_FAILURE,
  },
  upgrade_with_body: {
    status: 400,
    error: 'http_request_error',
    reason: 'bad_upgrade',
    message: 'an Upgrade request must not have a body',
    socks: SOCKS.GENERAL_FAILURE,
  },
  upgrade_needs_http11: {
    status: 400,
    error: 'http_request_error',
    reason: 'bad_upgrade',
    message: 'Upgrade needs HTTP/1.1',
    socks: SOCKS.GENERAL_FAILURE,
  },
  malformed_request: {
    status: 400,
    error: 'http_request_error',
    reason: 'malformed_request',
    message: 'malformed HTTP request',
    socks: SOCKS.GENERAL_FAILURE,
  },
  header_too_large: {
    status: 431,
    error: 'http_request_error',
    reason: 'header_too_large',
    message: 'request header section too large',
    socks: SOCKS.GENERAL_FAILURE,
  },
  head_timeout: {
    status: 408,
    error: 'http_request_error',
    reason: 'head_timeout',
    message: 'request head not received in time',
    socks: SOCKS.TTL_EXPIRED,
  },
  port_prohibited: {
    status: 403,
    error: 'destination_ip_prohibited',
    reason: 'port_prohibited',
    message: 'destination port not allowed',
    socks: SOCKS.NOT_ALLOWED,
  },
  destination_prohibited: {
    status: 403,
    error: 'destination_ip_prohibited',
    reason: 'destination_prohibited',
    message: 'destination not allowed',
    socks: SOCKS.NOT_ALLOWED,
  },
  dns_error: {
    status: 502,
    error: 'dns_error',
    reason: 'dns_error',
    message: 'destination name did not resolve',
    socks: SOCKS.HOST_UNREACHABLE,
  },
  bandwidth_held: {
    status: 503,
    error: 'proxy_internal_error',
    reason: 'bandwidth_held',
    message: '{plan} bandwidth is held by a gateway that stopped: retry in a few seconds',
    socks: SOCKS.GENERAL_FAILURE,
  },
  billing_unavailable: {
    status: 503,
    error: 'proxy_internal_error',
    reason: 'billing_unavailable',
    message: 'bandwidth balance cannot be checked right now: retry shortly',
    socks: SOCKS.GENERAL_FAILURE,
  },
  no_exit: {
    status: 503,
    error: 'proxy_configuration_error',
    reason: 'no_exit',
    message: 'no exit matches the requested location',
    socks: SOCKS.GENERAL_FAILURE,
  },
  destination_refused: {
    status: 502,
    error: 'connection_refused',
    reason: 'destination_refused',
    message: 'the destination refused or closed the connection',
    socks: SOCKS.CONNECTION_REFUSED,
  },
  destination_connect_timeout: {
    status: 504,
    error: 'connection_timeout',
    reason: 'destination_timeout',
    message: 'connecting to the destination timed out',
    socks: SOCKS.TTL_EXPIRED,
  },
  destination_response_timeout: {
    status: 504,
    error: 'http_response_timeout',
    reason: 'destination_timeout',
    message: 'the destination did not answer in time',
    socks: SOCKS.TTL_EXPIRED,
  },
  socks_command_not_supported: {
    status: 400,
    error: 'http_request_error',
    reason: 'socks_command_not_supported',
    message: 'SOCKS5: only CONNECT is supported',
    socks: SOCKS.COMMAND_NOT_SUPPORTED,
  },
  socks_address_type_not_supported: {
    status: 400,
    error: 'http_request_error',
    reason: 'socks_address_type_not_supported',
    message: 'SOCKS5: address type not supported',
    socks: SOCKS.ADDRESS_TYPE_NOT_SUPPORTED,
  },
  exit_failed: {
    status: 502,
    error: 'connection_refused',
    reason: 'exit_failed',
    message: 'the destination could not be reached',
    socks: SOCKS.GENERAL_FAILURE,
  },
  exit_connect_timeout: {
    status: 504,
    error: 'connection_timeout',
    reason: 'exit_timeout',
    message: 'connecting to the destination timed out',
    socks: SOCKS.TTL_EXPIRED,
  },
  exit_response_timeout: {
    status: 504,
    error: 'http_response_timeout',
    reason: 'exit_timeout',
    message: 'the destination did not answer in time',
    socks: SOCKS.TTL_EXPIRED,
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
    socks: e.socks,
  };
  if (options.retryAfter) r.retryAfter = options.retryAfter;
  return r;
}
