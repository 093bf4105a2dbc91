// Refusals (RFC 9209 Proxy-Status) and hop-by-hop header handling shared by both request forms.
import type http from 'node:http';
import type net from 'node:net';

/** A byte table: 1 for the characters of `chars` and of the inclusive `ranges`. */
export function charTable(chars: string, ranges: [number, number][] = []): Uint8Array {
  const t = new Uint8Array(256);
  for (const c of chars) t[c.charCodeAt(0)] = 1;
  for (const [from, to] of ranges) t.fill(1, from, to + 1);
  return t;
}
export const ALNUM: [number, number][] = [
  [0x30, 0x39],
  [0x41, 0x5a],
  [0x61, 0x7a],
];
/** RFC 9110 tchar (field names, methods), by byte. */
export const TOKEN = charTable("!#$%&'*+-.^_`|~", ALNUM);
/** RFC 9110 field-content: HTAB, SP, VCHAR, obs-text, by byte. */
export const FIELD_VALUE = charTable('\t ', [
  [0x21, 0x7e],
  [0x80, 0xff],
]);

/** Whether every character of `s` (latin1) from `from` to `to` is in table `t`. */
export function allIn(t: Uint8Array, s: string, from = 0, to = s.length): boolean {
  for (let k = from; k < to; k++) if (!t[s.charCodeAt(k)]) return false;
  return true;
}

export interface Refusal {
  status: number;
  /** RFC 9209 error type. */
  error: string;
  /** Short reason for Proxy-Status details and the metrics label (bounded set). */
  reason: string;
  details: string;
  retryAfter?: number;
  /** The SOCKS5 reply code for a SOCKS client (refusals.ts). */
  socks: number;
  /**
   * false: a 407 without the Basic challenge, on a plan that refuses credentials in clear when the
   * connection is not TLS (docs/adr/0096): nothing invites the client to send them that way.
   */
  challenge?: false;
  /**
   * Who a refusal at admission belongs to, as accessAccount words it, when the credentials named
   * an account (a wrong password, a spent balance): its usage history counts it (docs/adr/0103).
   */
  account?: string;
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  402: 'Payment Required',
  403: 'Forbidden',
  407: 'Proxy Authentication Required',
  429: 'Too Many Requests',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

export const PROXY_NAME = 'proxyfleet';
const REALM = 'Basic realm="proxyfleet"';

function refusalHeaders(r: Refusal): [string, string][] {
  const headers: [string, string][] = [
    ['Proxy-Status', `${PROXY_NAME}; error=${r.error}; details="${r.details.replace(/["\\]/g, '')}"`],
    ['Connection', 'close'],
    ['Content-Type', 'text/plain; charset=utf-8'],
  ];
  if (r.status === 407 && r.challenge !== false) headers.push(['Proxy-Authenticate', REALM]);
  if (r.retryAfter) headers.push(['Retry-After', String(r.retryAfter)]);
  return headers;
}

/** Refuses a plain request; the connection closes after the response (its bytes are not billed). */
export function refuseRequest(res: http.ServerResponse, r: Refusal): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = `${r.status} ${STATUS_TEXT[r.status] ?? ''}: ${r.details}\n`;
  const headers = refusalHeaders(r);
  headers.push(['Content-Length', String(Buffer.byteLength(body))]);
  res.shouldKeepAlive = false;
  res.writeHead(r.status, STATUS_TEXT[r.status], headers.flat());
  res.end(body);
}

/** Refuses a CONNECT and closes the connection (a refused tunnel never stays open). */
export function refuseSocket(socket: net.Socket, r: Refusal): void {
  if (socket.destroyed) return;
  const body = `${r.status} ${STATUS_TEXT[r.status] ?? ''}: ${r.details}\n`;
  const lines = refusalHeaders(r)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.end(
    `HTTP/1.1 ${r.status} ${STATUS_TEXT[r.status] ?? ''}\r\n${lines}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  socket.destroySoon();
}

// RFC 9110 section 7.6.1 plus the proxy-specific ones; Proxy-Authorization never goes on.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** Headers that frame or route the message: a Connection header may not name them. */
const FRAMING = new Set(['content-length', 'transfer-encoding', 'host']);

/**
 * Whether the Connection (or Proxy-Connection) header names a framing header. RFC 9110 7.6.1
 * makes a proxy drop what Connection names; dropping Content-Length would forward the body
 * unframed and let it be read as a second request (smuggling), so such a request is refused.
 */
export function connectionNamesFraming(raw: readonly string[]): boolean {
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (name !== 'connection' && name !== 'proxy-connection') continue;
    for (const token of raw[i + 1]!.split(',')) if (FRAMING.has(token.trim().toLowerCase())) return true;
  }
  return false;
}

/** Removes hop-by-hop headers, those the Connection header names and `drop`; returns a flat raw list. */
export function endToEndHeaders(raw: readonly string[], drop?: string): string[] {
  let named: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (name === 'connection' || name === 'proxy-connection') {
      named ??= new Set();
      for (const token of raw[i + 1]!.split(',')) named.add(token.trim().toLowerCase());
    }
  }
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (HOP_BY_HOP.has(name) || named?.has(name) || name === drop) continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
}

/** Approximate size of a header block (for enforcement estimates; billing uses socket counters). */
export function headBytes(raw: readonly string[], firstLine: number): number {
  let n = firstLine + 2;
  for (const s of raw) n += s.length + 2;
  return n;
}
