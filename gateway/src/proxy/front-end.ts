// The gateway's front end (docs/adr/0027): every accepted connection's first bytes are read here.
// A first byte 0x05 is SOCKS5 (socks5.ts, docs/adr/0028: no HTTP method starts with it). A first
// byte 0x16 is a TLS ClientHello when the gateway has a certificate (tls/handshake.ts, docs/adr/0071):
// after the handshake the session's cleartext comes back here and is routed the same way. A plain
// CONNECT head (connect-head.ts) is handled straight on the socket: no llhttp parser, no
// IncomingMessage, no hand-back of the socket by node:http. Anything else (plain HTTP, unusual or
// malformed CONNECT heads) goes to the node:http server with its bytes put back unread, so
// forwarding, llhttp's refusals and every later request on the connection are node:http's as
// before. Nothing is refused here except a connection that closes mid-head, answered as node:http
// answers it (400, malformed_request).
import type http from 'node:http';
import type net from 'node:net';
import { isTls, TLS_HANDSHAKE } from '../tls/handshake.ts';
import { DECLINE, INCOMPLETE, parseConnectHead, type ConnectHead } from './connect-head.ts';
import { SOCKS_VERSION } from './socks5.ts';

export interface FrontEndHandlers {
  /**
   * CONNECT heads parsed here (default true); false: every HTTP head goes to node:http (tests
   * compare the two paths, docs/adr/0027). SOCKS5 is routed either way.
   */
  connectFastPath?: boolean;
  /** A SOCKS5 connection: `first` holds its first bytes (the socket is paused). */
  socks(socket: net.Socket, first: Buffer): void;
  /**
   * A TLS ClientHello on a plain connection: `first` holds its first bytes (the socket is paused).
   * Absent (no certificate), or inside a TLS session, such bytes go to node:http like any others,
   * which answers 400.
   */
  tls?(socket: net.Socket, first: Buffer): void;
  /** A plain CONNECT head arrived; `rest` is what the client sent after it (the tunnel's first data). */
  connect(socket: net.Socket, head: ConnectHead, rest: Buffer): void;
  /** The client ended its side in the middle of a CONNECT head (node:http: HPE_INVALID_EOF_STATE). */
  truncated(socket: net.Socket): void;
}

export interface FrontEnd {
  /**
   * Reads an accepted socket's first head: call it from the server's 'connection' handler.
   * `first`: bytes already read from it (after a PROXY header), routed before any further ones.
   */
  route(socket: net.Socket, first?: Buffer): void;
  /**
   * Closes the connections that have not sent a byte yet (node:http's closeIdleConnections does
   * so for those it holds).
   */
  closeIdle(): void;
}

/**
 * Takes node:http's own 'connection' listener off the server (the server still listens, tracks
 * the connections it is handed for headersTimeout and closeIdleConnections, and closes as before)
 * and returns the front end that routes each accepted socket.
 */
export function installFrontEnd(server: http.Server, handlers: FrontEndHandlers): FrontEnd {
  const own = server.listeners('connection');
  // node:http adds exactly one 'connection' listener in its constructor; anything else means
  // this runs too late, or on a node whose http server is built differently.
  if (own.length !== 1) throw new Error(`node:http server has ${own.length} connection listeners, not 1`);
  const httpConnection = own[0] as (this: http.Server, socket: net.Socket) => void;
  server.removeListener('connection', httpConnection);

  const fastPath = handlers.connectFastPath ?? true;
  const silent = new Set<net.Socket>();
  const route = (socket: net.Socket, first?: Buffer) => {
    let bytes: Buffer | undefined;
    silent.add(socket);
    // Dropped at the first byte: a listener held for a tunnel's whole life is memory per tunnel.
    const forget = () => silent.delete(socket);
    socket.once('close', forget);
    const spoke = () => {
      silent.delete(socket);
      socket.off('close', forget);
    };
    const onData = (chunk: Buffer) => {
      if (bytes === undefined) spoke();
      bytes = bytes === undefined ? chunk : Buffer.concat([bytes, chunk]);
      if (bytes[0] === SOCKS_VERSION) {
        socket.off('data', onData);
        socket.off('end', onEnd);
        socket.pause();
        handlers.socks(socket, bytes);
        return;
      }
      if (bytes[0] === TLS_HANDSHAKE && handlers.tls && !isTls(socket)) {
        socket.off('data', onData);
        socket.off('end', onEnd);
        socket.pause();
        handlers.tls(socket, bytes);
        return;
      }
      const head = fastPath ? parseConnectHead(bytes) : DECLINE;
      if (head === INCOMPLETE) return;
      socket.off('data', onData);
      socket.off('end', onEnd);
      // Nothing more is read until the next owner asks (node:http, or the tunnel's pipe).
      socket.pause();
      if (head === DECLINE) {
        // node:http reads the socket's handle directly from now on; what was read here comes
        // first, on the next tick, before any further bytes from the network.
        socket.unshift(bytes);
        httpConnection.call(server, socket);
        socket.resume();
        return;
      }
      handlers.connect(socket, head, bytes.subarray(head.length));
    };
    const onEnd = () => {
      if (bytes === undefined) spoke();
      socket.off('data', onData);
      if (bytes === undefined) socket.end();
      else handlers.truncated(socket);
    };
    socket.on('data', onData);
    socket.once('end', onEnd);
    if (first?.length) onData(first);
  };
  return {
    route,
    closeIdle: () => {
      for (const socket of silent) socket.destroy();
    },
  };
}
