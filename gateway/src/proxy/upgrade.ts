// Upgrade requests in absolute form (`GET http://host/path` with `Connection: Upgrade` and
// `Upgrade: websocket`, or any other protocol), docs/adr/0029: node:http hands the socket over
// ('upgrade' event) and the request becomes a tunnel (tunnel.ts) to its destination, with the same
// admission, guard, exits and failover, leases and billing as a CONNECT. What differs is the
// answer: the gateway sends the upstream the request head rewritten to origin form (hop-by-hop
// headers and Proxy-Authorization dropped, Connection: Upgrade and Upgrade kept, Host the target's
// authority) and relays whatever the origin answers, a 101 and the new protocol or any other
// answer, byte for byte. Only plain http:// targets: wss:// clients use CONNECT.
import type http from 'node:http';
import type net from 'node:net';
import { refusalFor } from './refusals.ts';
import type { ProxyContext } from './context.ts';
import { connectionNamesFraming, endToEndHeaders, refuseSocket, type Refusal } from './http-util.ts';
import { openTunnel, type TunnelAnswer } from './tunnel.ts';

/** Longest Upgrade value (all its header lines together) accepted. */
export const MAX_UPGRADE_LENGTH = 256;

// RFC 9110 section 7.8: protocol = protocol-name ["/" protocol-version], both tokens (5.6.2).
const TOKEN = "[!#$%&'*+\\-.^_`|~0-9A-Za-z]+";
const PROTOCOL = new RegExp(`^${TOKEN}(?:/${TOKEN})?$`);

/** The status of the origin's answer is read from at most this many bytes of its first line. */
const STATUS_LINE_BYTES = 16;

/** The Upgrade header's values, or a refusal when they are not a valid, bounded protocol list. */
function upgradeValues(raw: readonly string[]): string[] | Refusal {
  const values: string[] = [];
  let length = 0;
  let protocols = 0;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() !== 'upgrade') continue;
    const value = raw[i + 1]!;
    length += value.length;
    if (length > MAX_UPGRADE_LENGTH) return refusalFor('bad_upgrade');
    // A list may hold empty elements (RFC 9110 5.6.1); each other element must be a protocol.
    for (const element of value.split(',')) {
      const protocol = element.trim();
      if (protocol === '') continue;
      if (!PROTOCOL.test(protocol)) return refusalFor('bad_upgrade');
      protocols++;
    }
    values.push(value);
  }
  return protocols === 0 ? refusalFor('bad_upgrade') : values;
}

/** Why the request cannot be an upgrade, judged from the request alone (before admission). */
function invalid(
  req: http.IncomingMessage,
  url: URL | undefined,
  upgrade: string[] | Refusal,
): Refusal | undefined {
  const target = req.url ?? '';
  if (!target.startsWith('http://')) {
    return refusalFor(target.startsWith('https://') ? 'https_not_connect' : 'not_proxy_request');
  }
  if (!url) return refusalFor('bad_destination');
  // RFC 9110 7.8: an Upgrade in an HTTP/1.0 request is to be ignored; the socket is already out
  // of node:http's hands, so it cannot become a plain request any more: refused instead.
  if (req.httpVersion !== '1.1') return refusalFor('upgrade_needs_http11');
  if (connectionNamesFraming(req.rawHeaders)) return refusalFor('bad_connection_header');
  if (!Array.isArray(upgrade)) return upgrade;
  // node:http hands an upgrade over before any body is read: a body would reach the origin as
  // the new protocol's first bytes, unframed.
  const length = req.headers['content-length'];
  if (req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')) {
    return refusalFor('upgrade_with_body');
  }
  return undefined;
}

function parseUrl(target: string): URL | undefined {
  if (!target.startsWith('http://')) return undefined;
  try {
    return new URL(target);
  } catch {
    return undefined;
  }
}

/** The request head the origin gets: origin form, end-to-end headers, Host, Connection and Upgrade. */
function originHead(req: http.IncomingMessage, url: URL, upgrade: string[]): Buffer {
  const headers = endToEndHeaders(req.rawHeaders, 'host');
  let head = `${req.method} ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n`;
  for (let i = 0; i < headers.length; i += 2) head += `${headers[i]}: ${headers[i + 1]}\r\n`;
  head += 'Connection: Upgrade\r\n';
  for (const value of upgrade) head += `Upgrade: ${value}\r\n`;
  // node:http decoded the head as latin1: encoded back the same way, byte for byte.
  return Buffer.from(`${head}\r\n`, 'latin1');
}

/**
 * An Upgrade request node:http parsed (its 'upgrade' event); `head` is what the client sent after
 * the request head (already the new protocol's first bytes).
 */
export function handleUpgrade(
  ctx: ProxyContext,
  req: http.IncomingMessage,
  socket: net.Socket,
  head: Buffer,
): void {
  const url = parseUrl(req.url ?? '');
  const upgrade = upgradeValues(req.rawHeaders);
  const refusal = invalid(req, url, upgrade);
  // The origin's status line, for the access log: 101, or the answer it gave instead.
  let first = '';
  let status = 0;
  const answer: TunnelAnswer = {
    kind: 'upgrade',
    method: req.method ?? 'GET',
    invalid: refusal,
    established: (_socket, upstream) => {
      if (url && Array.isArray(upgrade)) upstream.write(originHead(req, url, upgrade));
    },
    refuse: refuseSocket,
    fromUpstream: (chunk) => {
      if (first.length >= STATUS_LINE_BYTES) return;
      first += chunk.subarray(0, STATUS_LINE_BYTES - first.length).toString('latin1');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(first);
      if (m) status = Number(m[1]);
    },
    status: () => status,
  };
  const port = url?.port ? Number(url.port) : 80;
  openTunnel(
    ctx,
    url ? { host: url.hostname, port } : undefined,
    req.headers['proxy-authorization'],
    socket,
    head,
    answer,
  );
}
