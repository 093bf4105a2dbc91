// Absolute-form HTTP requests (`GET http://host/path`): admit, check the destination, pick an exit
// for THIS request (keep-alive does not pin a rotating customer to one exit), forward with
// hop-by-hop headers removed (nothing added: no Via, no X-Forwarded-For), stream the answer back.
// The raw upstream client (upstream.ts, docs/adr/0038) sends it on a connection pooled per exit
// and destination; a request whose exit fails before any byte of it was sent, and that has no
// body, is retried on the next matching exit.
import type http from 'node:http';
import {
  accessAccount,
  admit,
  chooseExits,
  guardRefusal,
  NO_EXIT,
  countRefusal,
  type ProxyContext,
} from './context.ts';
import { refusalFor } from './refusals.ts';
import {
  connectionNamesFraming,
  endToEndHeaders,
  headBytes,
  refuseRequest,
  type Refusal,
} from './http-util.ts';
import { MAX_EXIT_ATTEMPTS } from './tunnel.ts';
import { sendRaw, type Outgoing, type UpstreamClient } from './upstream.ts';

/** `send`: the upstream client, the raw one but in the differential test (test/node-upstream.ts). */
export function handleRequest(
  ctx: ProxyContext,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  send: UpstreamClient = sendRaw,
): void {
  forward(ctx, req, res, send).catch((err: unknown) => {
    ctx.logger.error({ err }, 'forwarding failed');
    res.destroy();
  });
}

async function forward(
  ctx: ProxyContext,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  send: UpstreamClient,
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
  if ('status' in admitted) {
    account = admitted.account;
    return refuse(admitted);
  }
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
  if (out.hasBody) req.pause(); // until the upstream client takes it
  send(ctx, req, res, admitted, exits.slice(0, MAX_EXIT_ATTEMPTS), out);
  res.once('close', () =>
    ctx.access.response(res, out.refusal, started, req.method, target, account, out.exit),
  );
}
