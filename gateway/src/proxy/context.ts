// What the request handlers share within one gateway, and the admission steps common to both
// request forms: credentials -> account state -> connection cap -> bandwidth -> exit choice.
import type net from 'node:net';
import type { Logger } from '#common/logger.ts';
import type { AdmissionRefusal, Ledger } from '../accounting/ledger.ts';
import type { Tab } from '../accounting/tab.ts';
import type { Authenticator } from '../auth/authenticate.ts';
import type { ParsedCredentials } from '#common/credentials.ts';
import type { GatewayMetrics, PlanMetrics } from '../metrics.ts';
import { isTls } from '../tls/handshake.ts';
import type { AccessLog } from './access-log.ts';
import type { Plan, ProxyGatewaySpec } from '../spec.ts';
import type { Exit, ExitPool } from './exits.ts';
import type { DestinationGuard } from './guard.ts';
import type { Refusal } from './http-util.ts';
import { refusalFor } from './refusals.ts';
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
  /** One line per request, tunnel and refusal (access-log.ts). */
  access: AccessLog;
  /** Benchmark only: no authentication and no metering ("features off"). */
  bare: boolean;
  draining: boolean;
  /**
   * Sockets whose last request was admitted through an IP allowlist entry, and the entry's id: the
   * process cuts them when the entry goes (server.ts). Shared by the process's gateways.
   */
  viaAllowlist: WeakMap<net.Socket, string>;
  /** The socket's first request authenticated (it leaves its source's unauthenticated cap). */
  authenticated(socket: net.Socket): void;
}

export interface Admitted {
  accountId: string;
  /** The sub-user whose credentials admitted it (docs/adr/0037); undefined: the account's own. */
  subUserId?: string | undefined;
  credentials: ParsedCredentials | undefined;
  /** Billing of this request or tunnel (undefined in a bare gateway). */
  tab: Tab | undefined;
}

// Built once, like NO_EXIT (building it for every admitted request was 0.8 % of a CONNECT profile).
const CONNECTION_LIMIT = refusalFor('connection_limit', { retryAfter: 1 });
const SUB_USER_LIMIT = refusalFor('sub_user_limit');
const CREDENTIALS_IN_CLEAR: Refusal = { ...refusalFor('credentials_in_clear'), challenge: false };

/** Runs the admission steps; the connection is attached to the budget only when admitted. */
export async function admit(
  ctx: ProxyContext,
  header: string | undefined,
  socket: net.Socket,
): Promise<Admitted | Refusal> {
  if (ctx.bare) return { accountId: '', credentials: undefined, tab: undefined };
  // A plan that refuses credentials sent in clear (docs/adr/0072) says so before checking them:
  // whoever read them on the way learns nothing about them from the answer.
  const inClear = ctx.spec.tls?.refuseCredentialsInClear === true && !isTls(socket);
  if (header !== undefined && inClear) return CREDENTIALS_IN_CLEAR;
  const auth = ctx.auth.authenticate(header, socket.remoteAddress ?? '');
  if (!auth.ok) {
    ctx.metrics.authFailures.inc({ plan: ctx.plan, reason: auth.reason });
    let refusal = refusalFor(auth.reason, { retryAfter: auth.retryAfter });
    // In clear on such a plan no 407 offers Basic: the credentials it asks for would be refused.
    if (inClear && refusal.status === 407) refusal = { ...refusal, challenge: false };
    return auth.named ? attributed(refusal, auth.named.accountId, auth.named.subUser?.id) : refusal;
  }
  ctx.authenticated(socket);
  const sub = auth.account.subUser;
  const tab = await ctx.ledger.admit(
    auth.account.accountId,
    socket,
    ctx.spec.limits.maxConnectionsPerAccount,
    sub && { id: sub.id, maxConnections: sub.maxConnections },
  );
  if (typeof tab === 'string') return attributed(tabRefusal(tab, ctx.plan), auth.account.accountId, sub?.id);
  if (auth.entry) ctx.viaAllowlist.set(socket, auth.entry.id);
  else ctx.viaAllowlist.delete(socket);
  return { accountId: auth.account.accountId, subUserId: sub?.id, credentials: auth.credentials, tab };
}

function tabRefusal(tab: AdmissionRefusal, plan: Plan): Refusal {
  switch (tab) {
    case 'connection_limit':
      return CONNECTION_LIMIT;
    // 402 only when the database said the balance is gone; it being unreachable is a 503.
    case 'no_bandwidth':
      return refusalFor('no_bandwidth', { plan });
    case 'sub_user_limit':
      return SUB_USER_LIMIT;
    case 'bandwidth_held':
      return refusalFor('bandwidth_held', { retryAfter: 10, plan });
    case 'billing_unavailable':
      return refusalFor('billing_unavailable', { retryAfter: 5 });
    case 'client_gone':
      return refusalFor('client_gone');
  }
}

/** A refusal at admission, named for the account (or sub-user) it belongs to (usage history). */
function attributed(refusal: Refusal, accountId: string, subUserId: string | undefined): Refusal {
  return { ...refusal, account: subUserId === undefined ? accountId : `${accountId}/${subUserId}` };
}

/**
 * Who sent a request, for the access log and sticky sessions: `account`, or `account/sub-user`
 * for a sub-user's request.
 */
export function accessAccount(a: Admitted): string {
  return a.subUserId === undefined ? a.accountId : `${a.accountId}/${a.subUserId}`;
}

/** Exits to try, best first; empty when none matches the targeting (503). */
export async function chooseExits(ctx: ProxyContext, a: Admitted): Promise<Exit[]> {
  const creds = a.credentials;
  const targeting = creds?.targeting ?? {};
  if (!creds?.session) return ctx.exits.rotating(targeting);
  const minutes = Math.min(
    creds.session.minutes ?? ctx.spec.session.defaultMinutes,
    ctx.spec.session.maxMinutes,
  );
  const seed = await ctx.sessions.seed(
    // A sub-user's sessions are its own: the same session id of two sub-users is two sessions.
    { accountId: accessAccount(a), plan: ctx.plan, sessionId: creds.session.id, targeting },
    minutes,
  );
  return ctx.exits.sticky(targeting, seed);
}

export const NO_EXIT = refusalFor('no_exit');

export function guardRefusal(reason: string): Refusal {
  switch (reason) {
    case 'port_prohibited':
    case 'dns_error':
    case 'bad_destination':
      return refusalFor(reason);
    default:
      return refusalFor('destination_prohibited');
  }
}

/**
 * Counts a refusal when it can be sent. A client already gone (it abandoned the request) is
 * counted under its own reason, `client_abandoned` with status class `none`: nothing was sent, so
 * an alert on 5xx refusals does not fire on healthy traffic. Returns whether to send.
 */
export function countRefusal(ctx: ProxyContext, r: Refusal, socket: net.Socket): boolean {
  if (socket.destroyed) {
    ctx.metrics.refusals.inc({ plan: ctx.plan, reason: 'client_abandoned', status_class: 'none' });
    return false;
  }
  ctx.metrics.refusals.inc({ plan: ctx.plan, reason: r.reason, status_class: statusClass(r.status) });
  return true;
}

export function statusClass(status: number): string {
  return `${Math.floor(status / 100)}xx`;
}
