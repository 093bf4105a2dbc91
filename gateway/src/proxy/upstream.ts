// The raw upstream client (docs/adr/0038), the gateway's one client for plain-HTTP requests:
// the request written on a pooled socket (upstream-pool.ts) as node:http's client wrote it, the
// answer read by our own strict parser (upstream-parser.ts) and relayed to the customer, in place
// of node:http's client (whose parser copied every body chunk and whose request machinery was
// 46 % of a keep-alive profile). Refusals, exit-fault accounting, fail-over to the next exit and
// the resend of a stale pooled socket's request are node's client's, as forward.ts had them.
import type http from 'node:http';
import type net from 'node:net';
import type { Readable } from 'node:stream';
import { countRefusal, type Admitted, type ProxyContext } from './context.ts';
import { isExitFault } from './connect-exit.ts';
import type { Exit } from './exits.ts';
import { endToEndHeaders, headBytes, refuseRequest, type Refusal } from './http-util.ts';
import { refusalFor } from './refusals.ts';
import type { ResponseHead } from './upstream-head.ts';
import { ResponseParser } from './upstream-parser.ts';
import { own, type SocketUser } from './upstream-pool.ts';

/** One admitted plain-HTTP request, as forward.ts built it for the upstream. */
export interface Outgoing {
  url: URL;
  address: string;
  port: number;
  headers: string[];
  hasBody: boolean;
  /** The exit tried last, and the refusal answered after it (the access log's). */
  exit?: Exit;
  refusal?: Refusal;
}

/**
 * Sends an admitted request through `exits` (the chosen one first; later ones for fail-over) and
 * relays the answer to `res`: sendRaw below. The differential test gives its gateways node:http's
 * client instead, as the oracle the raw client is compared with (test/node-upstream.ts).
 */
export type UpstreamClient = (
  ctx: ProxyContext,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  a: Admitted,
  exits: Exit[],
  out: Outgoing,
) => void;

/**
 * The raw upstream client: node:http's client's refusals, exit-fault accounting, fail-over and
 * stale-socket resend, on a pooled socket with our own response parser.
 */
export function sendRaw(
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
      ctx.exits.markFailed(exit, 'ETIMEDOUT');
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
    // As node's client did: only the exit's own failure marks it and moves on to the next exit.
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
      ctx.exits.markFailed(exit, err.code ?? 'error');
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
  // The customer left before the end: as node's client's destroyed request, whose 'error' then
  // counted the abandonment (fail() sees the customer's socket gone: client_abandoned, nothing
  // sent). Unlike node's client through an upstream proxy, the exit is not marked failed for it.
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
    // The body nobody reads any more is drained, as node's client's pipe into its destroyed request did.
    if (out.hasBody) req.resume();
    if (send) refuseRequest(res, r);
    else res.destroy();
  }
}

/**
 * What the ledger pauses and resumes for one answer (tab.relaying): the upstream socket while this
 * exchange owns it, nothing once the socket went back to the pool (another customer's answer).
 */
export class Valve {
  socket: net.Socket | undefined;
  private readonly flow: () => void;
  /** `flow` resumes the relay (the socket, and what the parser stopped before). */
  constructor(socket: net.Socket, flow: () => void) {
    this.socket = socket;
    this.flow = flow;
  }
  get destroyed(): boolean {
    return this.socket === undefined || this.socket.destroyed;
  }
  pause(): this {
    this.socket?.pause();
    return this;
  }
  resume(): this {
    if (this.socket) this.flow();
    return this;
  }
  asReadable(): Readable {
    return this as unknown as Readable;
  }
}

/**
 * Methods node's client sends as they are when they end without a body; others (POST, PUT, ...)
 * with no Content-Length get an empty chunked body, as node's client gives them.
 */
const BODYLESS_BY_DEFAULT = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT']);

/** The request head, as node's client writes it for forward.ts (Connection: keep-alive added). */
export function requestHead(
  method: string,
  path: string,
  headers: readonly string[],
  hasBody: boolean,
): string {
  let head = `${method} ${path} HTTP/1.1\r\n`;
  let length = false;
  for (let i = 0; i < headers.length; i += 2) {
    head += `${headers[i]}: ${headers[i + 1]}\r\n`;
    if (!length && headers[i]!.length === 14 && headers[i]!.toLowerCase() === 'content-length') length = true;
  }
  head += 'Connection: keep-alive\r\n';
  if (!hasBody && !length && !BODYLESS_BY_DEFAULT.has(method))
    return `${head}Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n`;
  return `${head}\r\n`;
}
