// node:http's client as the gateway's upstream client (upstream.ts's UpstreamClient), kept only as
// the oracle the raw client is compared with (the differential tests upstream*.int.test.ts,
// docs/adr/0038): plain HTTP as forward.ts sent it before the raw client, through a keep-alive
// http.Agent per exit; a source-address exit's agent dials through source-ports.ts as tunnels do.
// startTestGateway's `upstreamClient: 'node'` runs a gateway with it.
import http from 'node:http';
import type { Duplex } from 'node:stream';
import { countRefusal, type Admitted, type ProxyContext } from '../gateway/src/proxy/context.ts';
import { isExitFault } from '../gateway/src/proxy/connect-exit.ts';
import type { Exit } from '../gateway/src/proxy/exits.ts';
import { endToEndHeaders, headBytes, refuseRequest, type Refusal } from '../gateway/src/proxy/http-util.ts';
import { refusalFor } from '../gateway/src/proxy/refusals.ts';
import { dialFrom, type SourcePorts } from '../gateway/src/proxy/source-ports.ts';
import type { Outgoing, UpstreamClient } from '../gateway/src/proxy/upstream.ts';
import { MAX_FREE_SOCKETS } from '../gateway/src/proxy/upstream-pool.ts';

/** Connection timeout of the agent when the request gives none. */
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/**
 * The keep-alive agent of an exit with a source address: its new connections choose their source
 * port as tunnels do (source-ports.ts) instead of binding port 0.
 */
class SourceAddressAgent extends http.Agent {
  private readonly address: string;
  private readonly ports: SourcePorts;

  constructor(address: string, ports: SourcePorts) {
    super({ keepAlive: true, maxFreeSockets: MAX_FREE_SOCKETS, scheduling: 'lifo' });
    this.address = address;
    this.ports = ports;
  }

  override createConnection(
    options: http.ClientRequestArgs,
    callback?: (err: Error | null, stream: Duplex) => void,
  ): undefined {
    const dest = { host: options.host ?? 'localhost', port: Number(options.port ?? 80) };
    dialFrom(this.address, this.ports, dest, options.timeout || DEFAULT_CONNECT_TIMEOUT_MS).then(
      (socket) => callback?.(null, socket),
      (err: Error) => callback?.(err, undefined as unknown as Duplex),
    );
    return undefined;
  }
}

export interface NodeUpstream {
  send: UpstreamClient;
  /** Destroys the agents and their sockets (after the gateway closed). */
  close(): void;
}

/** node:http's client for one gateway: an agent per exit, made at the exit's first request. */
export function nodeUpstream(): NodeUpstream {
  const agents = new Map<Exit, http.Agent>();
  const agentOf = (exit: Exit): http.Agent => {
    let agent = agents.get(exit);
    if (!agent) {
      agent =
        exit.sourceAddress && exit.ports
          ? new SourceAddressAgent(exit.sourceAddress, exit.ports)
          : new http.Agent({ keepAlive: true, maxFreeSockets: MAX_FREE_SOCKETS, scheduling: 'lifo' });
      agents.set(exit, agent);
    }
    return agent;
  };

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
          agent: agentOf(exit),
          setHost: false,
          timeout: timeoutMs,
        }
      : {
          host: out.address,
          port: out.port,
          method: req.method!,
          path: `${out.url.pathname}${out.url.search}`,
          headers: out.headers,
          agent: agentOf(exit),
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
        ctx.exits.markFailed(exit, 'ETIMEDOUT');
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
        ctx.exits.markFailed(exit, err.code ?? 'error');
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

  return {
    send,
    close() {
      for (const agent of agents.values()) agent.destroy();
      agents.clear();
    },
  };
}
