// What the request handlers share within one gateway, and the admission steps common to both
// request forms: credentials -> account state -> connection cap -> bandwidth -> exit choice.
import type net from 'node:net';
import type { Logger } from '../../../common/src/logger.ts';
import type { Budget, Ledger, Metered } from '../accounting/ledger.ts';
import type { Authenticator } from '../auth/authenticate.ts';
import type { ParsedCredentials } from '../auth/credentials.ts';
import type { GatewayMetrics, PlanMetrics } from '../metrics.ts';
import type { Plan, ProxyGatewaySpec } from '../spec.ts';
import type { Exit, ExitPool } from './exits.ts';
import type { DestinationGuard } from './guard.ts';
import type { Refusal } from './http-util.ts';
import type { SessionStore } from './sessions.ts';

export interface ProxyContext {
  plan: Plan;
  spec: ProxyGatewaySpec;
  auth: Authenticator;
  ledger: Ledger;
  guard: DestinationGuard;
  exits: ExitPool;
  sessions: SessionStore;
  metrics: GatewayMetrics;
  hot: PlanMetrics;
  logger: Logger;
  meters: WeakMap<net.Socket, Metered>;
  /** Benchmark only: no authentication and no metering ("features off"). */
  bare: boolean;
  draining: boolean;
}

export interface Admitted {
  accountId: string;
  credentials: ParsedCredentials | undefined;
  budget: Budget | undefined;
  conn: Metered | undefined;
}

export function refusal(status: number, error: string, reason: string, details: string, retryAfter?: number): Refusal {
  const r: Refusal = { status, error, reason, details };
  if (retryAfter) r.retryAfter = retryAfter;
  return r;
}

/** Runs the admission steps; the connection is attached to the budget only when admitted. */
export async function admit(ctx: ProxyContext, header: string | undefined, socket: net.Socket): Promise<Admitted | Refusal> {
  if (ctx.bare) return { accountId: '', credentials: undefined, budget: undefined, conn: undefined };
  const auth = ctx.auth.authenticate(header, socket.remoteAddress ?? '');
  if (!auth.ok) {
    ctx.metrics.authFailures.inc({ plan: ctx.plan, reason: auth.reason });
    return refusal(auth.status, 'http_request_denied', auth.reason, auth.details, auth.retryAfter);
  }
  const budget = ctx.ledger.budget(auth.account.accountId);
  let conn = ctx.meters.get(socket);
  const overCap = () =>
    budget.conns.size >= ctx.spec.limits.maxConnectionsPerAccount && !(conn && budget.conns.has(conn));
  const CAP = refusal(429, 'connection_limit_reached', 'connection_limit', 'too many connections for this account', 1);
  if (overCap()) return CAP;
  if (!budget.canAdmit() && !(await ctx.ledger.admit(budget))) {
    return refusal(402, 'http_request_denied', 'no_bandwidth', `no ${ctx.plan} bandwidth left: buy ${ctx.plan} bandwidth`);
  }
  if (socket.destroyed) return refusal(400, 'http_request_error', 'client_gone', 'client went away');
  // Again after the wait for a lease: connections that arrived meanwhile were attached.
  if (overCap()) return CAP;
  if (!conn) {
    conn = ctx.ledger.track(socket);
    ctx.meters.set(socket, conn);
  }
  ctx.ledger.attach(conn, budget);
  return { accountId: auth.account.accountId, credentials: auth.credentials, budget, conn };
}

/** Exits to try, best first; empty when none matches the targeting (503). */
export async function chooseExits(ctx: ProxyContext, a: Admitted): Promise<Exit[]> {
  const creds = a.credentials;
  const targeting = creds?.targeting ?? {};
  if (!creds?.session) return ctx.exits.rotating(targeting);
  const minutes = Math.min(creds.session.minutes ?? ctx.spec.session.defaultMinutes, ctx.spec.session.maxMinutes);
  const seed = await ctx.sessions.seed({ accountId: a.accountId, plan: ctx.plan, sessionId: creds.session.id, targeting }, minutes);
  return ctx.exits.sticky(targeting, seed);
}

export const NO_EXIT = refusal(503, 'proxy_configuration_error', 'no_exit', 'no exit matches the requested location');

export function guardRefusal(reason: string): Refusal {
  switch (reason) {
    case 'port_prohibited':
      return refusal(403, 'destination_ip_prohibited', reason, 'destination port not allowed');
    case 'dns_error':
      return refusal(502, 'dns_error', reason, 'destination name did not resolve');
    case 'bad_destination':
      return refusal(400, 'http_request_error', reason, 'malformed destination');
    default:
      return refusal(403, 'destination_ip_prohibited', 'destination_prohibited', 'destination not allowed');
  }
}

export function statusClass(status: number): string {
  return `${Math.floor(status / 100)}xx`;
}
