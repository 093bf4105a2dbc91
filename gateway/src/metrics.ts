// The gateway's metrics. Several gateways share one registry in `npm start`, so the metrics are
// created once per gateway process (GatewayProcess owns them) and every series carries the plan. Labels are bounded: plan,
// direction, kind, reason, status class, the spec's exit names; never accounts or hosts.
import { Counter, Gauge, type Registry } from 'prom-client';
import { PROXY_PROTOCOL_REFUSALS } from './proxy/proxy-protocol.ts';

export interface GatewayMetrics {
  connections: Gauge<'plan'>;
  tunnels: Gauge<'plan'>;
  bytes: Counter<'plan' | 'direction'>;
  requests: Counter<'plan' | 'kind'>;
  authFailures: Counter<'plan' | 'reason'>;
  refusals: Counter<'plan' | 'reason' | 'status_class'>;
  exitFailures: Counter<'plan' | 'reason'>;
  /** 1 while an exit's source address is on no local interface (proxy/exit-addresses.ts), else 0. */
  exitMissing: Gauge<'plan' | 'exit'>;
  flushLag: Gauge<'plan'>;
  flushFailures: Counter<'plan'>;
  leaseGrants: Counter<'plan'>;
  leaseGrantedBytes: Counter<'plan'>;
  leaseDenials: Counter<'plan'>;
  budgetCuts: Counter<'plan'>;
  /** Connections closed at accept: the process cap or the per-source cap on unauthenticated ones. */
  connectionRefusals: Counter<'plan' | 'reason'>;
  /** Live connections cut because the account was suspended or its password changed. */
  revocationCuts: Counter<'plan'>;
  /** Times a bandwidth cap held a budget's streams (docs/adr/0035): the account's, or a sub-user's own. */
  throttleHolds: Counter<'plan' | 'scope'>;
  /** TLS handshakes completed on the plan's port (docs/adr/0071), by whether a ticket resumed them. */
  tlsHandshakes: Counter<'plan' | 'resumed'>;
  /** TLS handshakes that did not complete, by reason (TLS_FAILURE_REASONS). */
  tlsHandshakeFailures: Counter<'plan' | 'reason'>;
  /** PROXY protocol headers read on the plan's port (docs/adr/0102), by version. */
  proxyProtocolHeaders: Counter<'plan' | 'version'>;
  /** Connections closed for their PROXY header, or for the lack of one (PROXY_PROTOCOL_REFUSALS). */
  proxyProtocolRefusals: Counter<'plan' | 'reason'>;
}

/** Why a TLS handshake did not complete (docs/gateway.md, TLS). */
export const TLS_FAILURE_REASONS = [
  'timeout',
  'client_closed',
  'certificate_refused',
  'protocol_error',
] as const;
export type TlsFailureReason = (typeof TLS_FAILURE_REASONS)[number];

/** Creates the gateway metrics in a registry (once per process: a second call would clash). */
export function createGatewayMetrics(registry: Registry): GatewayMetrics {
  const registers = [registry];
  return {
    connections: new Gauge({
      name: 'proxyfleet_gateway_active_connections',
      help: 'Open customer connections',
      labelNames: ['plan'],
      registers,
    }),
    tunnels: new Gauge({
      name: 'proxyfleet_gateway_active_tunnels',
      help: 'Open CONNECT tunnels',
      labelNames: ['plan'],
      registers,
    }),
    bytes: new Counter({
      name: 'proxyfleet_gateway_billed_bytes_total',
      help: 'Bytes billed to customers (between customer and gateway)',
      labelNames: ['plan', 'direction'],
      registers,
    }),
    requests: new Counter({
      name: 'proxyfleet_gateway_requests_total',
      help: 'Admitted plain requests and tunnels',
      labelNames: ['plan', 'kind'],
      registers,
    }),
    authFailures: new Counter({
      name: 'proxyfleet_gateway_auth_failures_total',
      help: 'Failed proxy authentications',
      labelNames: ['plan', 'reason'],
      registers,
    }),
    refusals: new Counter({
      name: 'proxyfleet_gateway_refusals_total',
      help: 'Requests refused by the gateway',
      labelNames: ['plan', 'reason', 'status_class'],
      registers,
    }),
    exitFailures: new Counter({
      name: 'proxyfleet_gateway_exit_failures_total',
      help: 'Failed connections through an exit',
      labelNames: ['plan', 'reason'],
      registers,
    }),
    exitMissing: new Gauge({
      name: 'proxyfleet_gateway_exit_missing',
      help: "1 while the exit's source address is on no local interface (the exit is skipped), else 0",
      labelNames: ['plan', 'exit'],
      registers,
    }),
    flushLag: new Gauge({
      name: 'proxyfleet_gateway_usage_flush_lag_seconds',
      help: 'Age of the oldest usage batch not yet written',
      labelNames: ['plan'],
      registers,
    }),
    flushFailures: new Counter({
      name: 'proxyfleet_gateway_usage_flush_failures_total',
      help: 'Usage flushes that failed (retried)',
      labelNames: ['plan'],
      registers,
    }),
    leaseGrants: new Counter({
      name: 'proxyfleet_gateway_lease_grants_total',
      help: 'Bandwidth leases granted',
      labelNames: ['plan'],
      registers,
    }),
    leaseGrantedBytes: new Counter({
      name: 'proxyfleet_gateway_lease_granted_bytes_total',
      help: 'Bytes granted in leases',
      labelNames: ['plan'],
      registers,
    }),
    leaseDenials: new Counter({
      name: 'proxyfleet_gateway_lease_denials_total',
      help: 'Lease requests refused: no bandwidth left',
      labelNames: ['plan'],
      registers,
    }),
    budgetCuts: new Counter({
      name: 'proxyfleet_gateway_budget_cuts_total',
      help: 'Times live connections were cut because a budget ran out',
      labelNames: ['plan'],
      registers,
    }),
    connectionRefusals: new Counter({
      name: 'proxyfleet_gateway_connection_refusals_total',
      help: 'Connections closed at accept (process cap, per-source cap on unauthenticated connections)',
      labelNames: ['plan', 'reason'],
      registers,
    }),
    revocationCuts: new Counter({
      name: 'proxyfleet_gateway_revocation_cuts_total',
      help: 'Live connections cut because the account was suspended or its credentials changed',
      labelNames: ['plan'],
      registers,
    }),
    throttleHolds: new Counter({
      name: 'proxyfleet_gateway_throttle_holds_total',
      help: "Times a bandwidth cap held a customer's streams until its rate allowed more (scope: account or sub_user)",
      labelNames: ['plan', 'scope'],
      registers,
    }),
    tlsHandshakes: new Counter({
      name: 'proxyfleet_gateway_tls_handshakes_total',
      help: 'TLS handshakes completed on the proxy port (resumed: a session ticket was accepted)',
      labelNames: ['plan', 'resumed'],
      registers,
    }),
    tlsHandshakeFailures: new Counter({
      name: 'proxyfleet_gateway_tls_handshake_failures_total',
      help: 'TLS handshakes on the proxy port that did not complete (timeout, client_closed, certificate_refused, protocol_error)',
      labelNames: ['plan', 'reason'],
      registers,
    }),
    proxyProtocolHeaders: new Counter({
      name: 'proxyfleet_gateway_proxy_protocol_headers_total',
      help: 'PROXY protocol headers read on the proxy port from a trusted balancer (version: 1 or 2)',
      labelNames: ['plan', 'version'],
      registers,
    }),
    proxyProtocolRefusals: new Counter({
      name: 'proxyfleet_gateway_proxy_protocol_refusals_total',
      help: 'Connections closed for their PROXY protocol header (untrusted_source, missing, malformed, too_long, family_mismatch, second_header, timeout)',
      labelNames: ['plan', 'reason'],
      registers,
    }),
  };
}

/**
 * Exports every counter of a plan at zero from the start, so that rate() and alerts have a series
 * before the first event (a counter that appears only on its first increment hides that increment).
 */
export function zeroPlanSeries(
  m: GatewayMetrics,
  plan: string,
  refusalReasons: readonly { reason: string; status: number }[],
): void {
  for (const c of [
    m.flushFailures,
    m.leaseGrants,
    m.leaseGrantedBytes,
    m.leaseDenials,
    m.budgetCuts,
    m.revocationCuts,
  ])
    c.labels({ plan }).inc(0);
  for (const direction of ['up', 'down']) m.bytes.labels({ plan, direction }).inc(0);
  for (const kind of ['http', 'connect', 'socks5', 'upgrade']) m.requests.labels({ plan, kind }).inc(0);
  for (const reason of ['timeout', 'refused']) m.exitFailures.labels({ plan, reason }).inc(0);
  for (const reason of ['process_cap', 'source_cap']) m.connectionRefusals.labels({ plan, reason }).inc(0);
  for (const scope of ['account', 'sub_user']) m.throttleHolds.labels({ plan, scope }).inc(0);
  for (const resumed of ['true', 'false']) m.tlsHandshakes.labels({ plan, resumed }).inc(0);
  for (const reason of TLS_FAILURE_REASONS) m.tlsHandshakeFailures.labels({ plan, reason }).inc(0);
  for (const version of ['1', '2']) m.proxyProtocolHeaders.labels({ plan, version }).inc(0);
  for (const reason of PROXY_PROTOCOL_REFUSALS) m.proxyProtocolRefusals.labels({ plan, reason }).inc(0);
  for (const reason of [
    'malformed',
    'missing',
    'unknown_user',
    'wrong_password',
    'account_suspended',
    'auth_backoff',
  ])
    m.authFailures.labels({ plan, reason }).inc(0);
  m.refusals.labels({ plan, reason: 'client_abandoned', status_class: 'none' }).inc(0);
  for (const r of refusalReasons)
    m.refusals.labels({ plan, reason: r.reason, status_class: `${Math.floor(r.status / 100)}xx` }).inc(0);
  m.flushLag.labels({ plan }).set(0);
  m.connections.labels({ plan }).set(0);
  m.tunnels.labels({ plan }).set(0);
}

/** Children bound to one plan for the per-request counters (no label hashing on the hot path). */
export interface PlanMetrics {
  connections: { inc(): void; dec(): void };
  tunnels: { inc(): void; dec(): void };
  httpRequests: { inc(): void };
  connectRequests: { inc(): void };
  socksRequests: { inc(): void };
  upgradeRequests: { inc(): void };
  bytesUp: { inc(n: number): void };
  bytesDown: { inc(n: number): void };
}

export function planMetrics(m: GatewayMetrics, plan: string): PlanMetrics {
  return {
    connections: m.connections.labels({ plan }),
    tunnels: m.tunnels.labels({ plan }),
    httpRequests: m.requests.labels({ plan, kind: 'http' }),
    connectRequests: m.requests.labels({ plan, kind: 'connect' }),
    socksRequests: m.requests.labels({ plan, kind: 'socks5' }),
    upgradeRequests: m.requests.labels({ plan, kind: 'upgrade' }),
    bytesUp: m.bytes.labels({ plan, direction: 'up' }),
    bytesDown: m.bytes.labels({ plan, direction: 'down' }),
  };
}
