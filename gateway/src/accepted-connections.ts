// The connections one gateway accepts, from the accept to the handler of their first head, and
// their drain. The invariant: every accepted socket is either refused at once (the process's
// connection caps, limits.ts) or counted open until it closes, and delivers its first request head
// (or finishes its TLS or SOCKS5 handshake) within headersSeconds, else it is refused with
// `head_timeout` (inside TLS once the session is up; a SOCKS5 handshake by its own reply; a TLS
// handshake closed without an answer). A head node:http cannot parse is refused in the spec's
// error format. The composition (server.ts) builds the proxy context and hands it here.
import type http from 'node:http';
import type net from 'node:net';
import { carrierOf } from './accounting/wire.ts';
import { statusClass, type ProxyContext } from './proxy/context.ts';
import { handleRequest } from './proxy/forward.ts';
import { installFrontEnd } from './proxy/front-end.ts';
import { refuseSocket } from './proxy/http-util.ts';
import type { ConnectionLimiter } from './proxy/limits.ts';
import { adoptPeer, readHeaderOf, type ProxyProtocolPolicy } from './proxy/proxy-protocol.ts';
import { refusalFor } from './proxy/refusals.ts';
import { handleSocks, socksHeadTimeout } from './proxy/socks5.ts';
import { handleConnect } from './proxy/tunnel.ts';
import { handleUpgrade } from './proxy/upgrade.ts';
import type { UpstreamClient } from './proxy/upstream.ts';
import type { GatewayCertificates } from './tls/certificates.ts';
import { acceptTls, type TlsSession } from './tls/handshake.ts';

export interface AcceptOptions {
  /** The process's connection caps (shared by its gateways). */
  limiter: ConnectionLimiter;
  /** The first head (or handshake) must arrive within this long of the accept. */
  headersMs: number;
  /** CONNECT heads parsed by the front end (docs/adr/0027); false: all through node:http. */
  connectFastPath: boolean;
  /** The certificate TLS sessions start with; absent: no TLS. */
  tls: GatewayCertificates | undefined;
  /** Tests only: the client plain-HTTP requests go upstream through (upstream.ts by default). */
  upstreamClient: UpstreamClient | undefined;
  /** The PROXY protocol's policy (proxy/proxy-protocol.ts); absent: off. */
  proxyProtocol?: ProxyProtocolPolicy | undefined;
}

/** The accepted connections of one gateway's server: counted, timed to their first head, drained. */
export interface AcceptedConnections {
  /** performance.now() of the last connection accepted (the preStop waits for them to stop). */
  lastConnectionAt(): number;
  /** Closes idle connections until none is open or `deadline` (Date.now()) passes, then cuts the rest. */
  drain(deadline: number): Promise<void>;
}

/** Installs the connection, head and refusal handlers of `server`, routing heads to the proxy. */
export function acceptConnections(
  server: http.Server,
  ctx: ProxyContext,
  opts: AcceptOptions,
): AcceptedConnections {
  const { plan, metrics, hot } = ctx;
  const { limiter, headersMs } = opts;
  // A connection must deliver its first request head within headersSeconds of being accepted
  // (Node never times out a connection that sends nothing, and times the first head from the
  // connection only when its periodic check runs).
  // Keyed by the accepted socket: a head that arrives inside a TLS session stops its carrier's timer.
  const headTimers = new WeakMap<net.Socket, NodeJS.Timeout>();
  const headArrived = (socket: net.Socket) => {
    const carrier = carrierOf(socket);
    const timer = headTimers.get(carrier);
    if (timer) {
      clearTimeout(timer);
      headTimers.delete(carrier);
    }
  };
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    headArrived(req.socket);
    handleRequest(ctx, req, res, opts.upstreamClient);
  });
  // CONNECT heads node:http parsed: the front end declined them (or it is off), or they follow a
  // plain request on a keep-alive connection.
  server.on('connect', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    headArrived(socket);
    handleConnect(ctx, req.url ?? '', req.headers['proxy-authorization'], socket, head);
  });
  // Absolute-form requests with `Connection: upgrade` and an `Upgrade` header (WebSocket and the
  // like): a tunnel whose first bytes are the rewritten request (upgrade.ts, docs/adr/0029). An
  // Upgrade header without `Connection: upgrade` stays a plain request ('request' above).
  server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    headArrived(socket);
    handleUpgrade(ctx, req, socket, head);
  });
  const refuseHead = (socket: net.Socket, key: 'header_too_large' | 'head_timeout' | 'malformed_request') => {
    if (socket.writable && !socket.destroyed) {
      const r = refusalFor(key);
      metrics.refusals.inc({ plan, reason: r.reason, status_class: statusClass(r.status) });
      refuseSocket(socket, r);
      ctx.access.refused('http', socket, r, true, performance.now());
    }
    socket.destroy();
  };
  server.on('clientError', (err: NodeJS.ErrnoException, socket: net.Socket) => {
    refuseHead(
      socket,
      err.code === 'HPE_HEADER_OVERFLOW'
        ? 'header_too_large'
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? 'head_timeout'
          : 'malformed_request',
    );
  });
  // SOCKS5 connections still in their handshake: the head timer closes them without HTTP bytes.
  const socksHandshakes = new WeakSet<net.Socket>();
  // TLS sessions by their accepted socket: the head timer ends a handshake, or answers inside it.
  const tlsSessions = new WeakMap<net.Socket, TlsSession>();
  const certificates = opts.tls;
  const tlsCounts = {
    resumed: metrics.tlsHandshakes.labels({ plan, resumed: 'true' }),
    full: metrics.tlsHandshakes.labels({ plan, resumed: 'false' }),
  };
  const front = installFrontEnd(server, {
    connectFastPath: opts.connectFastPath,
    connect: (socket, head, rest) => {
      headArrived(socket);
      handleConnect(ctx, head.target, head.proxyAuthorization, socket, rest);
    },
    // As node:http answers a head cut by the client's FIN (HPE_INVALID_EOF_STATE).
    truncated: (socket) => refuseHead(socket, 'malformed_request'),
    socks: (socket, first) => {
      socksHandshakes.add(socket);
      handleSocks(ctx, socket, first, () => {
        socksHandshakes.delete(socket);
        headArrived(socket);
      });
    },
    ...(certificates && {
      tls: (socket: net.Socket, first: Buffer) => {
        const session = acceptTls(socket, first, certificates.context, {
          // The session's cleartext is routed as a plain connection is (SOCKS5 and HTTP inside TLS).
          secure: (inner, resumed) => {
            adoptPeer(inner, socket);
            (resumed ? tlsCounts.resumed : tlsCounts.full).inc();
            front.route(inner);
          },
          failed: (reason) => metrics.tlsHandshakeFailures.inc({ plan, reason }),
        });
        tlsSessions.set(socket, session);
      },
    }),
  });
  const open = new Set<net.Socket>();
  let lastConnectionAt = performance.now();
  const admitted = (socket: net.Socket): boolean => {
    const refused = limiter.accept(socket);
    if (!refused) return true;
    metrics.connectionRefusals.inc({ plan, reason: refused });
    socket.resetAndDestroy();
    return false;
  };
  // Connections whose PROXY header is still awaited: the head timer closes them without a word.
  const awaitingHeader = new WeakSet<net.Socket>();
  const proxy = opts.proxyProtocol;
  server.on('connection', (socket: net.Socket) => {
    lastConnectionAt = performance.now();
    socket.on('error', () => socket.destroy());
    // A trusted balancer's connection counts against its client, once the header names it.
    const deferred = proxy !== undefined && proxy.trusts(socket.remoteAddress);
    if (!deferred && !admitted(socket)) return;
    open.add(socket);
    hot.connections.inc();
    const timer = setTimeout(() => {
      headTimers.delete(socket);
      if (socket.destroyed) return;
      if (awaitingHeader.delete(socket)) {
        metrics.proxyProtocolRefusals.inc({ plan, reason: 'timeout' });
        return void socket.destroy();
      }
      // A TLS handshake not done in time is closed without an answer (nothing to answer in yet);
      // after it, the head is refused inside the session as on a plain connection.
      const session = tlsSessions.get(socket);
      if (session && !session.secured) return session.timedOut();
      const s = session?.socket ?? socket;
      if (socksHandshakes.has(s)) return socksHeadTimeout(ctx, s, performance.now() - headersMs);
      const r = refusalFor('head_timeout');
      metrics.refusals.inc({ plan, reason: r.reason, status_class: statusClass(r.status) });
      refuseSocket(s, r);
      ctx.access.refused('http', s, r, true, performance.now() - headersMs);
      s.destroySoon();
      setTimeout(() => s.destroy(), 1_000).unref();
    }, headersMs);
    timer.unref();
    headTimers.set(socket, timer);
    socket.once('close', () => {
      headArrived(socket);
      open.delete(socket);
      hot.connections.dec();
    });
    if (!proxy) return front.route(socket);
    awaitingHeader.add(socket);
    let counted = !deferred;
    readHeaderOf(socket, proxy, {
      identified: (s, header) => {
        metrics.proxyProtocolHeaders.inc({ plan, version: String(header.version) });
        counted = admitted(s);
        if (!counted) awaitingHeader.delete(s);
        return counted;
      },
      proceed: (s, _header, first) => {
        if (!awaitingHeader.delete(s)) return;
        if (!counted && !admitted(s)) return;
        front.route(s, first);
      },
      refuse: (s, reason) => {
        awaitingHeader.delete(s);
        metrics.proxyProtocolRefusals.inc({ plan, reason });
        s.destroy();
      },
    });
  });

  return {
    lastConnectionAt: () => lastConnectionAt,
    drain: async (deadline) => {
      server.closeIdleConnections();
      front.closeIdle();
      while (open.size > 0 && Date.now() < deadline) {
        server.closeIdleConnections();
        front.closeIdle();
        await new Promise((r) => setTimeout(r, 100));
      }
      for (const socket of open) socket.destroy();
    },
  };
}
