// A TLS session on the plan's own port (docs/adr/0071). The front end sees a first byte 0x16 (a
// TLS handshake record, RFC 8446 section 5.1) and hands the accepted socket here with the bytes it
// read; the session runs on the socket's own handle (node:tls wraps it natively, no JS stream in
// the data path), and once the handshake completes the cleartext side goes back to the front end,
// which serves it as it serves a plain connection. Billing counts the TCP socket under it
// (accounting/wire.ts). The handshake has no timer of its own: the head timer, started at
// accept, bounds handshake and first request head together (server.ts).
import type net from 'node:net';
import tls from 'node:tls';
import { carry } from '../accounting/wire.ts';
import type { TlsFailureReason } from '../metrics.ts';
import { ALPN_PROTOCOLS } from './certificates.ts';

/** ContentType handshake (RFC 8446 section 5.1): the first byte of every ClientHello. */
export const TLS_HANDSHAKE = 0x16;

/** Whether the socket is a TLS session (`encrypted` is node:tls's documented marker). */
export const isTls = (socket: net.Socket): socket is tls.TLSSocket =>
  (socket as Partial<tls.TLSSocket>).encrypted === true;

export interface TlsHandlers {
  /** The handshake completed: `socket` is the session's cleartext side. */
  secure(socket: tls.TLSSocket, resumed: boolean): void;
  /** The handshake did not complete; the connection is destroyed. */
  failed(reason: TlsFailureReason): void;
}

export interface TlsSession {
  readonly socket: tls.TLSSocket;
  /** The handshake has completed. */
  readonly secured: boolean;
  /** The head timer ran out during the handshake: counted as `timeout`, destroyed. */
  timedOut(): void;
}

/**
 * Starts a server-side TLS session on `raw`, a paused socket whose first bytes `first` (already
 * read) begin a ClientHello.
 */
export function acceptTls(
  raw: net.Socket,
  first: Buffer,
  context: tls.SecureContext,
  on: TlsHandlers,
): TlsSession {
  // node:tls feeds what the socket holds unread to the session before reading the network.
  raw.unshift(first);
  const socket = new tls.TLSSocket(raw, {
    isServer: true,
    secureContext: context,
    ALPNProtocols: ALPN_PROTOCOLS,
  });
  carry(socket, raw);
  let state: 'handshake' | 'secure' | 'failed' = 'handshake';
  const fail = (reason: TlsFailureReason) => {
    if (state !== 'handshake') return;
    state = 'failed';
    on.failed(reason);
    socket.destroy();
  };
  socket.on('error', (err: NodeJS.ErrnoException) => {
    if (state === 'handshake') fail(failureReason(err));
    else socket.destroy();
  });
  // The client went away mid-handshake. Its FIN must be caught as 'end': node:tls holds our own
  // end() until a handshake completes, so the socket would not close before the head timer.
  socket.once('end', () => fail('client_closed'));
  socket.once('close', () => fail('client_closed'));
  socket.once('secure', () => {
    state = 'secure';
    on.secure(socket, socket.isSessionReused());
  });
  return {
    socket,
    get secured() {
      return state === 'secure';
    },
    timedOut: () => fail('timeout'),
  };
}

/**
 * OpenSSL's error codes, as node:tls reports them, sorted into the metric's reasons: the client
 * going away, the client refusing our certificate (its alert names the certificate: an expired or
 * wrong-name certificate shows here), anything else the client sent that is not a TLS 1.2 or 1.3
 * handshake we serve (garbage, old versions, no shared cipher, no http/1.1 in its ALPN list).
 */
export function failureReason(err: NodeJS.ErrnoException): TlsFailureReason {
  const code = err.code ?? '';
  if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'ERR_SSL_UNEXPECTED_EOF_WHILE_READING')
    return 'client_closed';
  if (/_ALERT_(BAD_CERTIFICATE|UNKNOWN_CA|CERTIFICATE_|UNSUPPORTED_CERTIFICATE)/.test(code))
    return 'certificate_refused';
  return 'protocol_error';
}
