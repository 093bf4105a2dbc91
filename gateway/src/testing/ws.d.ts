// Types for the part of `ws` (8.x, a devDependency) the gateway's tests use: @types/ws is not
// installed. Replace this file with @types/ws when it is.
declare module 'ws' {
  import type http from 'node:http';
  import type net from 'node:net';
  import type { Duplex } from 'node:stream';

  export interface ClientOptions {
    headers?: Record<string, string>;
    perMessageDeflate?: boolean;
    /** Opens the connection the handshake goes over (instead of net.connect to the URL's host). */
    createConnection?: () => net.Socket;
    /** Called with the handshake request before it is sent; must end it. */
    finishRequest?: (req: http.ClientRequest, ws: WebSocket) => void;
  }

  export class WebSocket {
    constructor(address: string, options?: ClientOptions);
    send(data: string | Buffer, options?: { binary?: boolean }): void;
    close(code?: number, reason?: string): void;
    terminate(): void;
    on(event: 'message', listener: (data: Buffer, isBinary: boolean) => void): this;
    on(event: 'open', listener: () => void): this;
    on(event: 'close', listener: (code: number, reason: Buffer) => void): this;
    on(event: 'error', listener: (err: Error) => void): this;
    once(event: 'message', listener: (data: Buffer, isBinary: boolean) => void): this;
    once(event: 'open', listener: () => void): this;
    once(event: 'close', listener: (code: number, reason: Buffer) => void): this;
    once(event: 'error', listener: (err: Error) => void): this;
  }

  export interface ServerOptions {
    noServer: true;
    perMessageDeflate?: boolean;
  }

  export class WebSocketServer {
    constructor(options: ServerOptions);
    handleUpgrade(
      req: http.IncomingMessage,
      socket: Duplex,
      head: Buffer,
      callback: (ws: WebSocket, req: http.IncomingMessage) => void,
    ): void;
    close(callback?: (err?: Error) => void): void;
  }
}
