// SOCKS5 (RFC 1928) on the plan's port, with username/password authentication (RFC 1929) and the
// CONNECT command only (docs/adr/0028). The front end routes a connection here when its first byte
// is 0x05 (no HTTP method starts with it). The handshake is read here, message by message, each
// bounded by the RFC's own length bytes (greeting 257, authentication 513, request 262 bytes); the
// head timer of server.ts bounds the whole of it. The credentials become the value an HTTP client
// would send (`Basic base64(user:pass)`), so the credential grammar, the cache, the login backoff
// and every refusal are the HTTP path's; the tunnel is tunnel.ts's, answered with SOCKS replies.
import type net from 'node:net';
import { countRefusal, type ProxyContext } from './context.ts';
import { parseAuthority } from './guard.ts';
import type { Refusal } from './http-util.ts';
import { refusalFor, type RefusalId } from './refusals.ts';
import { openTunnel, type TunnelAnswer } from './tunnel.ts';
import { isTls } from '../tls/handshake.ts';

/** The first byte of every SOCKS5 connection (the protocol version). */
export const SOCKS_VERSION = 0x05;
const AUTH_VERSION = 0x01;
const METHOD_NO_AUTHENTICATION = 0x00;
const METHOD_USERNAME_PASSWORD = 0x02;
const NO_ACCEPTABLE_METHODS = 0xff;
const CMD_CONNECT = 0x01;
const ATYP_IPV4 = 0x01;
const ATYP_DOMAIN = 0x03;
const ATYP_IPV6 = 0x04;
const COLON = 0x3a;

/** More bytes are needed for the message. */
export const INCOMPLETE = 0;

export interface Greeting {
  methods: number[];
  length: number;
}

export interface Credentials {
  username: Buffer;
  password: Buffer;
  length: number;
}

export interface SocksRequest {
  /** undefined: the address named no destination that parses (refused as bad_destination). */
  target: { host: string; port: number } | undefined;
  length: number;
}

/** A message the gateway refuses: the refusal table's id. */
export interface Malformed {
  refuse: RefusalId;
}

/** The greeting: VER NMETHODS METHODS (RFC 1928 section 3). */
export function parseGreeting(buf: Buffer): Greeting | Malformed | typeof INCOMPLETE {
  if (buf.length < 2) return INCOMPLETE;
  if (buf[0] !== SOCKS_VERSION) return { refuse: 'malformed_request' };
  const length = 2 + buf[1]!;
  if (buf.length < length) return INCOMPLETE;
  return { methods: [...buf.subarray(2, length)], length };
}

/** Username/password authentication: VER ULEN UNAME PLEN PASSWD (RFC 1929 section 2). */
export function parseCredentials(buf: Buffer): Credentials | Malformed | typeof INCOMPLETE {
  if (buf.length < 2) return INCOMPLETE;
  if (buf[0] !== AUTH_VERSION) return { refuse: 'malformed_authorization' };
  const ulen = buf[1]!;
  if (buf.length < 2 + ulen + 1) return INCOMPLETE;
  const plen = buf[2 + ulen]!;
  const length = 3 + ulen + plen;
  if (buf.length < length) return INCOMPLETE;
  return { username: buf.subarray(2, 2 + ulen), password: buf.subarray(3 + ulen, length), length };
}

/** The request: VER CMD RSV ATYP DST.ADDR DST.PORT (RFC 1928 section 4). */
export function parseRequest(buf: Buffer): SocksRequest | Malformed | typeof INCOMPLETE {
  if (buf.length < 4) return INCOMPLETE;
  if (buf[0] !== SOCKS_VERSION) return { refuse: 'malformed_request' };
  // BIND (0x02), UDP ASSOCIATE (0x03) and anything else: only CONNECT is served.
  if (buf[1] !== CMD_CONNECT) return { refuse: 'socks_command_not_supported' };
  // (RSV, buf[2], is not checked: RFC 1928 only reserves it.)
  const atyp = buf[3];
  let addressEnd: number;
  if (atyp === ATYP_IPV4) addressEnd = 8;
  else if (atyp === ATYP_IPV6) addressEnd = 20;
  else if (atyp === ATYP_DOMAIN) {
    if (buf.length < 5) return INCOMPLETE;
    addressEnd = 5 + buf[4]!;
  } else return { refuse: 'socks_address_type_not_supported' };
  const length = addressEnd + 2;
  if (buf.length < length) return INCOMPLETE;
  const port = buf.readUInt16BE(addressEnd);
  let authority: string | undefined;
  if (atyp === ATYP_IPV4) authority = `${[...buf.subarray(4, 8)].join('.')}:${port}`;
  else if (atyp === ATYP_IPV6) {
    const groups: string[] = [];
    for (let i = 4; i < 20; i += 2) groups.push(buf.readUInt16BE(i).toString(16));
    authority = `[${groups.join(':')}]:${port}`;
  } else {
    const name = buf.subarray(5, addressEnd);
    // A name of visible ASCII only; parseAuthority then takes what an HTTP CONNECT target may be.
    if (name.length > 0 && name.every((b) => b > 0x20 && b < 0x7f))
      authority = `${name.toString('latin1')}:${port}`;
  }
  return { target: authority === undefined ? undefined : parseAuthority(authority), length };
}

/** The Proxy-Authorization value an HTTP client with these credentials would send. */
export function basicAuthorization(c: Credentials): string {
  return `Basic ${Buffer.concat([c.username, Buffer.of(COLON), c.password]).toString('base64')}`;
}

/** A reply to the request (RFC 1928 section 6); the bound address is never told (0.0.0.0:0). */
function reply(code: number): Buffer {
  return Buffer.of(SOCKS_VERSION, code, 0x00, ATYP_IPV4, 0, 0, 0, 0, 0, 0);
}
const SUCCEEDED = reply(0x00);
const METHOD_SELECTED = Buffer.of(SOCKS_VERSION, METHOD_USERNAME_PASSWORD);
const NO_AUTHENTICATION_SELECTED = Buffer.of(SOCKS_VERSION, METHOD_NO_AUTHENTICATION);
const NO_METHOD = Buffer.of(SOCKS_VERSION, NO_ACCEPTABLE_METHODS);
const AUTH_SUCCEEDED = Buffer.of(AUTH_VERSION, 0x00);
const AUTH_FAILED = Buffer.of(AUTH_VERSION, 0x01);

/** Sends `bytes` and closes the connection once they are out. */
function endWith(socket: net.Socket, bytes: Buffer): void {
  if (socket.destroyed) return;
  socket.end(bytes);
  socket.destroySoon();
}

const SOCKS_ANSWER: TunnelAnswer = {
  kind: 'socks5',
  established: (socket) => socket.write(SUCCEEDED),
  refuse: (socket, r) => endWith(socket, reply(r.socks)),
};

/**
 * Counts and logs a refusal during the handshake, sends `answer` (none: the connection just
 * closes) and closes.
 */
function refuseHandshake(
  ctx: ProxyContext,
  socket: net.Socket,
  r: Refusal,
  answer: Buffer | undefined,
  started: number,
): void {
  const send = countRefusal(ctx, r, socket);
  ctx.access.refused('socks5', socket, r, send, started);
  if (send && answer) endWith(socket, answer);
  else socket.destroy();
}

/**
 * The head timer ran out during the handshake: counted and logged as `head_timeout`, closed
 * without a reply (the client may be waiting for any of the three answers).
 */
export function socksHeadTimeout(ctx: ProxyContext, socket: net.Socket, started: number): void {
  if (socket.destroyed) return;
  refuseHandshake(ctx, socket, refusalFor('head_timeout'), undefined, started);
}

/**
 * Serves a SOCKS5 connection whose first bytes are `first` (the front end paused the socket).
 * `arrived` is called once the whole request is in (it stops the head timer).
 */
export function handleSocks(ctx: ProxyContext, socket: net.Socket, first: Buffer, arrived: () => void): void {
  const started = performance.now();
  let buf = first;
  let step: 'greeting' | 'auth' | 'request' = 'greeting';
  let authorization: string | undefined;
  let stopped = false;
  const stop = () => {
    stopped = true;
    socket.off('data', onData);
    socket.off('end', onEnd);
    socket.off('close', stop);
  };
  const refuse = (r: Refusal, answer: Buffer | undefined) => {
    stop();
    refuseHandshake(ctx, socket, r, answer, started);
  };
  const advance = (): void => {
    for (;;) {
      if (step === 'greeting') {
        const g = parseGreeting(buf);
        if (g === INCOMPLETE) return;
        if ('refuse' in g) return refuse(refusalFor(g.refuse), NO_METHOD);
        buf = buf.subarray(g.length);
        // Username/password whenever offered: credentials decide, as on HTTP. Without them only
        // the IP allowlist can know the customer (docs/adr/0036); admit() checks again at the
        // request, and refuses a suspended account there (0x02) as it does with credentials.
        if (!g.methods.includes(METHOD_USERNAME_PASSWORD)) {
          if (!g.methods.includes(METHOD_NO_AUTHENTICATION) || ctx.bare)
            return refuse(refusalFor('missing'), NO_METHOD);
          const auth = ctx.auth.authenticate(undefined, socket.remoteAddress ?? '');
          if (!auth.ok && auth.reason !== 'account_suspended') {
            ctx.metrics.authFailures.inc({ plan: ctx.plan, reason: auth.reason });
            return refuse(refusalFor(auth.reason, { retryAfter: auth.retryAfter }), NO_METHOD);
          }
          socket.write(NO_AUTHENTICATION_SELECTED);
          step = 'request';
          continue;
        }
        socket.write(METHOD_SELECTED);
        step = 'auth';
      } else if (step === 'auth') {
        const c = parseCredentials(buf);
        if (c === INCOMPLETE) return;
        if ('refuse' in c) return refuse(refusalFor(c.refuse), AUTH_FAILED);
        buf = buf.subarray(c.length);
        // Credentials in clear on a plan that refuses them (docs/adr/0072): refused unchecked.
        if (ctx.spec.tls?.refuseCredentialsInClear && !isTls(socket))
          return refuse(refusalFor('credentials_in_clear'), AUTH_FAILED);
        // A colon cannot be in a username (Basic would split it there): the grammar's own verdict.
        if (c.username.includes(COLON)) return refuse(refusalFor('bad_username'), AUTH_FAILED);
        authorization = basicAuthorization(c);
        if (!ctx.bare) {
          const auth = ctx.auth.authenticate(authorization, socket.remoteAddress ?? '');
          // A suspended account passes here and is refused at its request (0x02, not allowed), as
          // admit() refuses it: the credentials were right.
          if (!auth.ok && auth.reason !== 'account_suspended') {
            ctx.metrics.authFailures.inc({ plan: ctx.plan, reason: auth.reason });
            return refuse(refusalFor(auth.reason, { retryAfter: auth.retryAfter }), AUTH_FAILED);
          }
        }
        socket.write(AUTH_SUCCEEDED);
        step = 'request';
      } else {
        const q = parseRequest(buf);
        if (q === INCOMPLETE) return;
        stop();
        arrived();
        if ('refuse' in q) {
          const r = refusalFor(q.refuse);
          return refuseHandshake(ctx, socket, r, reply(r.socks), started);
        }
        // Nothing more is read until the tunnel's relay asks.
        socket.pause();
        openTunnel(ctx, q.target, authorization, socket, buf.subarray(q.length), SOCKS_ANSWER);
        return;
      }
    }
  };
  const onData = (chunk: Buffer) => {
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
    advance();
  };
  // The client ended its side mid-handshake: as a head cut short (malformed_request), no reply.
  const onEnd = () => refuse(refusalFor('malformed_request'), undefined);
  socket.on('data', onData);
  socket.once('end', onEnd);
  socket.once('close', stop);
  advance();
  if (!stopped) socket.resume();
}
