// Absolute-form HTTP requests (`GET http://host/path`): admit, check the destination, pick an exit
// for THIS request (keep-alive does not pin a rotating customer to one exit), forward with
// hop-by-hop headers removed (nothing added: no Via, no X-Forwarded-For), stream the answer back.
// Upstream connections are pooled per exit and destination; a request whose exit fails before
// any byte of it was sent, and that has no body, is retried on the next matching exit.
import http from 'node:http';
import {
  accessAccount,
  admit,
  chooseExits,
  guardRefusal,
  NO_EXIT,
  countRefusal,
  type Admitted,
  type ProxyContext,
} from './context.ts';
import { refusalFor } from './refusals.ts';
import { isExitFault } from './connect-exit.ts';
import type { Exit } from './exits.ts';
import {
  connectionNamesFraming,
  endToEndHeaders,
  headBytes,
  refuseRequest,
  type Refusal,
} from './http-util.ts';
import { MAX_EXIT_ATTEMPTS } from './tunnel.ts';
import { own, requestHead, ResponseParser, Valve, type ResponseHead, type SocketUser } from './upstream.ts';
import type net from 'node:net';

export function handleRequest(ctx: ProxyContext, req: http.IncomingMessage, res: http.ServerResponse): void {
  forward(ctx, req, res).catch((err: unknown) => {
    ctx.logger.error({ err }, 'forwarding failed');
    res.destroy();
  });
}

async function forward(
  ctx: ProxyContext,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  const socket = req.socket;
  const started = performance.now();
  let target: URL | undefined;
  let account: string | undefined = undefined;
  const refuse = (r: Refusal) => {
    const send = countRefusal(ctx, r, socket);
    ctx.ledger.refused(socket);
    req.resume();
    if (send) refuseRequest(res, r);
    ctx.access.refused('http', socket, r, send, started, req.method, target, account);
  };
  const url = req.url ?? '';
  if (!url.startsWith('http://')) {
    return refuse(refusalFor(url.startsWith('https://') ? 'https_not_connect' : 'not_proxy_request'));
  }
  try {
    target = new URL(url);
  } catch {
    return refuse(refusalFor('bad_destination'));
  }
  if (connectionNamesFraming(req.rawHeaders)) {
    return refuse(refusalFor('bad_connection_header'));
  }
  const admitted = await admit(ctx, req.headers['proxy-authorization'], socket);
  if ('status' in admitted) return refuse(admitted);
  account = accessAccount(admitted);
  const host = target.hostname;
  const port = target.port ? Number(target.port) : 80;
  const dest = await ctx.guard.check(host, port);
  if (!dest.ok) return refuse(guardRefusal(dest.reason));
  const exits = await chooseExits(ctx, admitted);
  if (exits.length === 0) return refuse(NO_EXIT);

  const { tab } = admitted;
  ctx.hot.httpRequests.inc();
  if (tab) {
    tab.request(headBytes(req.rawHeaders, url.length + 16));
    req.on('data', (chunk: Buffer) => tab.onChunk(chunk.length));
  }
  // RFC 9112 section 3.2.2: with an absolute-form target the received Host is ignored and
  // replaced by the target's authority.
  const headers = endToEndHeaders(req.rawHeaders, 'host');
  headers.push('Host', target.host);
  if (req.headers['transfer-encoding'] !== undefined) headers.push('Transfer-Encoding', 'chunked');
  const hasBody =
    req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] ?? '0') !== '0';
  if (tab) res.on('finish', () => tab.done());
  const out: Outgoing = { url: target, address: dest.address, port, headers, hasBody };
  if (out.hasBody) req.pause(); // until the upstream socket takes it (sendRaw) or pipe() does
  (ctx.upstreamClient === 'node' ? send : sendRaw)(
    ctx,
    req,
    res,
    admitted,
    exits.slice(0, MAX_EXIT_ATTEMPTS),
    out,
  );
  res.once('close', () =>
    ctx.access.response(res, out.refusal, started, req.method, target, account, out.exit),
  );
}

interface Outgoing {
  url: URL;
  address: string;
  port: number;
  headers: string[];
  hasBody: boolean;
  /** The exit tried last, and the refusal answered after it (the access log's). */
  exit?: Exit;
  refusal?: Refusal;
}

function send(
  ctx: ProxyContext,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  a: Admitted,
  exits: Exit[],
  out: Outgoing,
): void {
  const exit = exits[0]!;
  out.exit = exit;
  const timeoutMs = ctx.spec.timeouts.idleSeconds * 1000;
  const options: http.RequestOptions = exit.upstream
    ? {
        host: exit.upstream.host,
        port: exit.upstream.port,
        method: req.method!,
        path: out.url.href,
        headers: exit.upstream.authorization
          ? [...out.headers, 'Proxy-Authorization', exit.upstream.authorization]
          : out.headers,
        agent: exit.agent,
        setHost: false,
        timeout: timeoutMs,
      }
    : {
        host: out.address,
        port: out.port,
        method: req.method!,
        path: `${out.url.pathname}${out.url.search}`,
        headers: out.headers,
        agent: exit.agent,
        setHost: false,
        timeout: timeoutMs,
        ...(exit.sourceAddress ? { localAddress: exit.sourceAddress } : {}),
      };
  const proxyReq = http.request(options);
  let responded = false;
  proxyReq.on('response', (upstreamRes) => {
    responded = true;
    ctx.exits.markHealthy(exit);
    const tab = a.tab;
    if (tab) {
      tab.onChunk(headBytes(upstreamRes.rawHeaders, 32));
      tab.relaying(upstreamRes);
    }
    upstreamRes.on('error', () => res.destroy());
    res.writeHead(
      upstreamRes.statusCode ?? 502,
      upstreamRes.statusMessage,
      endToEndHeaders(upstreamRes.rawHeaders),
    );
    // The relay, by hand rather than pipe(): one 'data' listener that feeds the budget's estimate
    // and writes, pausing on back-pressure; a drain resumes the answer unless the ledger holds it
    // (a budget waiting for its next lease). pipe() adds and removes eight listeners per request.
    upstreamRes.on('data', (chunk: Buffer) => {
      if (tab) tab.onChunk(chunk.length);
      if (!res.write(chunk)) upstreamRes.pause();
    });
    res.on('drain', () => {
      if (!tab?.isHeld(upstreamRes)) upstreamRes.resume();
    });
    upstreamRes.on('end', () => res.end());
  });
  // destroy() below makes the request emit ECONNRESET 'socket hang up': the timeout has already
  // answered, so that error must neither refuse a second time (cutting the 504 off) nor count.
  let timedOut = false;
  proxyReq.on('timeout', () => {
    timedOut = true;
    // Still connecting to an upstream proxy: the exit's fault (no fail-over, the 504 is sent).
    const exitFault = !responded && exit.upstream !== undefined && proxyReq.socket?.connecting === true;
    if (exitFault) {
      ctx.metrics.exitFailures.inc({ plan: ctx.plan, reason: 'timeout' });
      ctx.exits.markFailed(exit);
    }
    proxyReq.destroy();
    if (!responded) fail(refusalFor(exitFault ? 'exit_response_timeout' : 'destination_response_timeout'));
    else res.destroy();
  });
  proxyReq.on('error', (err: NodeJS.ErrnoException) => {
    if (timedOut) return;
    if (responded) {
      res.destroy();
      return;
    }
    // A failure before the destination answered. Only the exit's own failure (its upstream proxy
    // unreachable, its source address unusable) marks it and moves on to the next exit: the
    // destination refusing or not answering would do the same on every exit, and the exit is shared.
    const exitFault = !proxyReq.reusedSocket && isExitFault(err, exit.upstream !== undefined);
    if (exitFault) {
      ctx.metrics.exitFailures.inc({
        plan: ctx.plan,
        reason: err.code === 'ETIMEDOUT' ? 'timeout' : 'refused',
      });
      ctx.exits.markFailed(exit);
    }
    // Without a body the request can be sent again: on the same exit when a pooled keep-alive
    // socket had gone stale, on the next exit when this one failed.
    const next = proxyReq.reusedSocket ? exits : exitFault ? exits.slice(1) : [];
    if (!out.hasBody && next.length > 0 && !res.headersSent && !req.socket.destroyed) {
      send(ctx, req, res, a, next, out);
      return;
    }
    if (exitFault) fail(refusalFor('exit_failed'));
    else if (err.code === 'ETIMEDOUT') fail(refusalFor('destination_connect_timeout'));
    else fail(refusalFor('destination_refused'));
  });
  res.on('close', () => {
    if (!res.writableFinished) proxyReq.destroy();
  });
  if (out.hasBody) req.pipe(proxyReq);
  else proxyReq.end();

  function fail(r: Refusal): void {
    out.refusal = r;
    const send = countRefusal(ctx, r, req.socket) && !res.destroyed;
    a.tab?.refused();
    if (send) refuseRequest(res, r);
    else res.destroy();
  }
}

/**
 * send() with the raw upstream client (upstream.ts, docs/adr/0038): the same refusals, exit-fault
 * accounting, fail-over and stale-socket retry, on a pooled socket with our own response parser.
 */
function sendRaw(
  ctx: ProxyContext,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  a: Admitted,
  exits: Exit[],
  out: Outgoing,
): void {
  const exit = exits[0]!;
  out.exit = exit;
  const timeoutMs = ctx.spec.timeouts.idleSeconds * 1000;
  const up = exit.upstream;
  const host = up ? up.host : out.address;
  const port = up ? up.port : out.port;
  const key = `${host}:${port}`;
  const method = req.method!;
  const head = up
    ? requestHead(
        method,
        out.url.href,
        up.authorization ? [...out.headers, 'Proxy-Authorization', up.authorization] : out.headers,
        out.hasBody,
      )
    : requestHead(method, `${out.url.pathname}${out.url.search}`, out.headers, out.hasBody);
  const chunked = out.hasBody && req.headers['transfer-encoding'] !== undefined;
  const tab = a.tab;
  const pool = exit.pool;

  let socket: net.Socket | undefined = pool.take(key, timeoutMs);
  const reused = socket !== undefined;
  /** The exchange is over (answered, failed or timed out): the socket is no longer ours. */
  let over = false;
  let responded = false;
  let answered: ResponseHead | undefined;
  let complete = false;
  let bodySent = !out.hasBody;
  let valve: Valve | undefined;
  const parser = new ResponseParser(method === 'HEAD', {
    head(h) {
      responded = true;
      answered = h;
      ctx.exits.markHealthy(exit);
      if (tab) {
        tab.onChunk(headBytes(h.rawHeaders, 32));
        valve = new Valve(socket!, flow);
        tab.relaying(valve.asReadable());
      }
      res.writeHead(h.statusCode, h.statusMessage, endToEndHeaders(h.rawHeaders));
    },
    // Paused (back-pressure, or the ledger through the valve): nothing more is relayed until
    // flow(), as node's paused IncomingMessage keeps the rest of a read.
    body(chunk) {
      if (tab) tab.onChunk(chunk.length);
      if (!res.write(chunk)) socket!.pause();
    },
    flowing: () => !socket!.isPaused(),
    complete() {
      complete = true;
      res.end();
      if (bodySent) release();
    },
  });

  const onData = (chunk: Buffer) => {
    try {
      parser.push(chunk);
    } catch (err) {
      failed(err as NodeJS.ErrnoException);
    }
  };
  const onEnd = () => {
    if (over) return;
    try {
      parser.end();
    } catch (err) {
      failed(err as NodeJS.ErrnoException);
    }
  };
  const onError = (err: NodeJS.ErrnoException) => failed(err);
  const onClose = () => {
    if (over || complete) return;
    const err: NodeJS.ErrnoException = new Error('socket hang up');
    err.code = 'ECONNRESET';
    failed(err);
  };
  const onTimeout = () => {
    if (over) return;
    // The answer was complete and only the upload was left: the upstream socket goes, not the customer.
    if (complete) return finish(false);
    // Still connecting to an upstream proxy: the exit's fault (no fail-over, the 504 is sent).
    const exitFault = !responded && up !== undefined && socket?.connecting === true;
    if (exitFault) {
      ctx.metrics.exitFailures.inc({ plan: ctx.plan, reason: 'timeout' });
      ctx.exits.markFailed(exit);
    }
    finish(false);
    if (!responded) fail(refusalFor(exitFault ? 'exit_response_timeout' : 'destination_response_timeout'));
    else res.destroy();
  };
  const onDrain = () => {
    if (!(valve && tab?.isHeld(valve.asReadable()))) flow();
  };
  function flow(): void {
    if (over) return;
    socket!.resume();
    try {
      parser.proceed();
    } catch (err) {
      failed(err as NodeJS.ErrnoException);
    }
  }
  const onBody = (chunk: Buffer) => {
    if (over) return;
    const s = socket!;
    let ok: boolean;
    if (chunked) {
      // Size line, data and CRLF in one writev.
      s.cork();
      s.write(`${chunk.length.toString(16)}\r\n`, 'latin1');
      s.write(chunk);
      ok = s.write('\r\n', 'latin1');
      s.uncork();
    } else ok = s.write(chunk);
    if (!ok) req.pause();
  };
  const onUploadDrain = () => {
    if (out.hasBody) req.resume();
  };
  const onBodyEnd = () => {
    if (over) return;
    if (chunked) socket!.write('0\r\n\r\n');
    bodySent = true;
    if (complete) release();
  };

  const user: SocketUser = {
    data: onData,
    end: onEnd,
    error: onError,
    close: onClose,
    timeout: onTimeout,
    drain: onUploadDrain,
  };
  const start = (s: net.Socket) => {
    socket = s;
    own(s, user);
    s.write(head, 'latin1');
    if (out.hasBody) {
      req.on('data', onBody);
      req.on('end', onBodyEnd);
      req.resume();
    }
  };

  /** Detaches from the socket; keeps it for the next request when `keep`, else destroys it. */
  function finish(keep: boolean): void {
    over = true;
    const s = socket;
    if (valve) valve.socket = undefined;
    if (out.hasBody) {
      req.off('data', onBody);
      req.off('end', onBodyEnd);
    }
    if (!s) return;
    own(s, undefined);
    if (keep) pool.give(key, s, answered?.keepAliveHint ?? 0);
    else s.destroy();
  }

  function release(): void {
    if (over) return;
    const held = valve !== undefined && tab?.isHeld(valve.asReadable()) === true;
    const s = socket!;
    finish(answered?.keepAlive === true && !parser.trailing && !held && s.readable && s.writable);
  }

  function failed(err: NodeJS.ErrnoException): void {
    if (over) return;
    finish(false);
    if (complete) return;
    if (responded) {
      res.destroy();
      return;
    }
    // As send(): only the exit's own failure marks it and moves on to the next exit.
    // A stale pooled socket (nothing of an answer before it closed) is nobody's fault; once an
    // answer began, staleness is ruled out, and through an upstream proxy the failure counts
    // against the exit whether or not the socket was pooled (as node's resend on a new socket ends:
    // the same answer, the same exit_failed).
    const exitFault = (!reused || parser.started) && isExitFault(err, up !== undefined);
    if (exitFault) {
      ctx.metrics.exitFailures.inc({
        plan: ctx.plan,
        reason: err.code === 'ETIMEDOUT' ? 'timeout' : 'refused',
      });
      ctx.exits.markFailed(exit);
    }
    // A pooled socket closed by the destination before any byte of an answer: stale, sent again.
    const next = reused && !parser.started ? exits : exitFault ? exits.slice(1) : [];
    if (!out.hasBody && next.length > 0 && !res.headersSent && !req.socket.destroyed) {
      sendRaw(ctx, req, res, a, next, out);
      return;
    }
    if (exitFault) fail(refusalFor('exit_failed'));
    else if (err.code === 'ETIMEDOUT') fail(refusalFor('destination_connect_timeout'));
    else fail(refusalFor('destination_refused'));
  }

  res.on('drain', onDrain);
  // The customer left before the end: as send()'s destroyed request, whose 'error' then counts the
  // abandonment (fail() sees the customer's socket gone: client_abandoned, nothing sent). Unlike
  // send() through an upstream proxy, the exit is not marked failed for it.
  res.on('close', () => {
    if (res.writableFinished || over) return;
    finish(false);
    if (!responded) fail(refusalFor('destination_refused'));
  });

  if (socket) start(socket);
  else {
    const dialed = pool.dial(host, port, timeoutMs);
    if (dialed instanceof Promise) {
      dialed.then(
        (s) => {
          if (over) s.destroy();
          else start(s);
        },
        (err: NodeJS.ErrnoException) => failed(err),
      );
    } else start(dialed);
  }

  function fail(r: Refusal): void {
    out.refusal = r;
    const send = countRefusal(ctx, r, req.socket) && !res.destroyed;
    tab?.refused();
    // The body nobody reads any more is drained, as send()'s pipe into its destroyed request did.
    if (out.hasBody) req.resume();
    if (send) refuseRequest(res, r);
    else res.destroy();
  }
}
