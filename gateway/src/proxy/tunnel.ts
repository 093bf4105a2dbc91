// Tunnels, for HTTP CONNECT, SOCKS5 CONNECT and absolute-form Upgrade requests alike: admit, check
// the destination, open it through an exit (failing over to the next matching exit when one
// fails), answer success, then splice bytes both ways. Only the answers differ (TunnelAnswer: an
// HTTP status line, a SOCKS5 reply, or, for an Upgrade, the request head sent on to the origin
// whose own answer is relayed: upgrade.ts). Billing reads the customer socket's counters; the
// 'data' listeners only feed the budget's enforcement estimate.
import type net from 'node:net';
import type { Tab } from '../accounting/tab.ts';
import type { AccessKind } from './access-log.ts';
import {
  accessAccount,
  admit,
  chooseExits,
  countRefusal,
  guardRefusal,
  NO_EXIT,
  type ProxyContext,
} from './context.ts';
import { refusalFor } from './refusals.ts';
import { ExitError, openThroughExit } from './connect-exit.ts';
import { parseAuthority } from './guard.ts';
import type { Exit } from './exits.ts';
import { refuseSocket, type Refusal } from './http-util.ts';

const ESTABLISHED = 'HTTP/1.1 200 Connection Established\r\n\r\n';
/** At most this many exits are tried for one tunnel. */
export const MAX_EXIT_ATTEMPTS = 3;

/** How a tunnel answers its client: the protocol it was asked in. */
export interface TunnelAnswer {
  /** The access log's `kind` and the requests_total label. */
  kind: Extract<AccessKind, 'connect' | 'socks5' | 'upgrade'>;
  /** The access log's method (default CONNECT). */
  method?: string;
  /** A refusal decided from the request alone, before admission (a malformed Upgrade request). */
  invalid?: Refusal | undefined;
  /**
   * The tunnel to `upstream` is open: tell the client (its bytes are billed, as the 200 is), or
   * send the upstream what must come first (an Upgrade's request head).
   */
  established(socket: net.Socket, upstream: net.Socket): void;
  /** Refuse and close the connection (a refused tunnel never stays open). */
  refuse(socket: net.Socket, r: Refusal): void;
  /** Sees each chunk from the upstream before it is relayed (an Upgrade reads its answer's status). */
  fromUpstream?: (chunk: Buffer) => void;
  /** The access log's status when the tunnel closes (default 200). */
  status?: () => number;
}

const HTTP_ANSWER: TunnelAnswer = {
  kind: 'connect',
  established: (socket) => socket.write(ESTABLISHED),
  refuse: refuseSocket,
};

/**
 * A CONNECT head, from the front end's parser or from node:http (`req.url` and
 * `req.headers['proxy-authorization']`); `head` is what the client sent after it.
 */
export function handleConnect(
  ctx: ProxyContext,
  requestTarget: string,
  proxyAuthorization: string | undefined,
  socket: net.Socket,
  head: Buffer,
): void {
  openTunnel(ctx, parseAuthority(requestTarget), proxyAuthorization, socket, head, HTTP_ANSWER);
}

/**
 * Opens a tunnel to `target` (undefined: the request named none that parses) for a client that
 * sent `proxyAuthorization` (an HTTP client's header, or the same value built from SOCKS5
 * credentials); `head` is what the client sent after its request.
 */
export function openTunnel(
  ctx: ProxyContext,
  target: { host: string; port: number } | undefined,
  proxyAuthorization: string | undefined,
  socket: net.Socket,
  head: Buffer,
  answer: TunnelAnswer,
): void {
  // The http server removed its own listeners: this socket must never be without an error handler.
  socket.on('error', () => socket.destroy());
  tunnel(ctx, target, proxyAuthorization, socket, head, answer).catch((err: unknown) => {
    ctx.logger.error({ err }, 'tunnel failed');
    socket.destroy();
  });
}

async function tunnel(
  ctx: ProxyContext,
  target: { host: string; port: number } | undefined,
  proxyAuthorization: string | undefined,
  socket: net.Socket,
  head: Buffer,
  answer: TunnelAnswer,
): Promise<void> {
  const started = performance.now();
  let account: string | undefined = undefined;
  let via: Exit | undefined;
  const method = answer.method ?? 'CONNECT';
  const refuse = (r: Refusal) => {
    const send = countRefusal(ctx, r, socket);
    ctx.ledger.refused(socket);
    if (send) answer.refuse(socket, r);
    ctx.access.refused(answer.kind, socket, r, send, started, method, target, account, via);
  };
  if (answer.invalid) return refuse(answer.invalid);
  if (!target) return refuse(refusalFor('connect_needs_authority'));
  const admitted = await admit(ctx, proxyAuthorization, socket);
  if ('status' in admitted) {
    account = admitted.account;
    return refuse(admitted);
  }
  account = accessAccount(admitted);
  const dest = await ctx.guard.check(target.host, target.port);
  if (!dest.ok) return refuse(guardRefusal(dest.reason));
  const exits = await chooseExits(ctx, admitted);
  if (exits.length === 0) return refuse(NO_EXIT);

  const timeoutMs = ctx.spec.timeouts.connectSeconds * 1000;
  let upstream: net.Socket | undefined;
  let lastError: ExitError | undefined;
  for (const exit of exits.slice(0, MAX_EXIT_ATTEMPTS)) {
    if (socket.destroyed) return;
    via = exit;
    try {
      upstream = await openThroughExit(
        exit,
        { host: target.host.replace(/^\[|\]$/g, ''), address: dest.address, port: target.port },
        timeoutMs,
      );
      ctx.exits.markHealthy(exit);
      break;
    } catch (err) {
      lastError = err instanceof ExitError ? err : new ExitError('refused', String(err), true, 'error');
      // Only the exit's own failure marks it and moves on to the next exit: the destination
      // refusing or not answering would do the same on every exit, and the exit is shared.
      if (!lastError.exitFault) break;
      ctx.metrics.exitFailures.inc({ plan: ctx.plan, reason: lastError.kind });
      ctx.exits.markFailed(exit, lastError.code);
    }
  }
  if (!upstream) {
    if (lastError && !lastError.exitFault) {
      return refuse(
        refusalFor(lastError.kind === 'timeout' ? 'destination_connect_timeout' : 'destination_refused'),
      );
    }
    return refuse(refusalFor(lastError?.kind === 'timeout' ? 'exit_connect_timeout' : 'exit_failed'));
  }
  if (socket.destroyed) {
    upstream.destroy();
    return;
  }
  const { tab } = admitted;
  (answer.kind === 'socks5'
    ? ctx.hot.socksRequests
    : answer.kind === 'upgrade'
      ? ctx.hot.upgradeRequests
      : ctx.hot.connectRequests
  ).inc();
  ctx.hot.tunnels.inc();
  if (tab) {
    tab.tunnel(upstream);
    tab.relaying(socket, upstream);
    tab.request();
  }
  const up = upstream;
  let closed = false;
  // An upstream that finished cleanly lets the customer's socket flush what is queued (the relay
  // has ended it); an error on either side tears both down.
  up.on('error', () => socket.destroy());
  // (Skipped once the customer's socket is gone: end() on a destroyed socket builds an error,
  // with its stack trace, that nobody reads; that was 3 % of a CONNECT profile.)
  up.on('close', (hadError) => {
    if (socket.destroyed) return;
    if (hadError) socket.destroy();
    else socket.end();
  });
  // A reset from the customer is passed on as a reset (no TIME_WAIT left on this side per tunnel).
  let reset = false;
  socket.on('error', () => (reset = true));
  socket.on('close', () => {
    if (closed) return;
    closed = true;
    ctx.hot.tunnels.dec();
    const status = answer.status?.() ?? 200;
    ctx.access.done(answer.kind, socket, status, undefined, started, method, target, account, via);
    if (reset && !up.destroyed) up.resetAndDestroy();
    else up.destroy();
  });
  answer.established(socket, up);
  if (head.length) up.write(head);
  relay(socket, up, tab);
  relay(up, socket, tab, answer.fromUpstream);
}

/**
 * One direction of a tunnel, by hand rather than pipe() (as forward.ts relays answers): each chunk
 * feeds the budget's estimate and is written, the source pauses on back-pressure, and a 'drain'
 * resumes it unless the ledger holds it (pipe() resumed a held source on every drain, so a tunnel
 * waiting for its budget's next lease ran on into its overdraft and was cut: prefetch.int.test.ts).
 */
function relay(
  from: net.Socket,
  to: net.Socket,
  tab: Tab | undefined,
  observe?: (chunk: Buffer) => void,
): void {
  from.on('data', (chunk: Buffer) => {
    tab?.onChunk(chunk.length);
    observe?.(chunk);
    // The other side is gone or finished: stop reading (pipe() unpiped here).
    if (to.destroyed || to.writableEnded) return void from.pause();
    if (!to.write(chunk)) from.pause();
  });
  to.on('drain', () => {
    if (!tab?.isHeld(from)) from.resume();
  });
  from.on('end', () => {
    if (!to.destroyed && !to.writableEnded) to.end();
  });
  // The front end paused the customer's socket when it handed it over (front-end.ts), and a
  // paused stream stays paused when a 'data' listener is added: start the flow unless held.
  if (!tab?.isHeld(from)) from.resume();
}
