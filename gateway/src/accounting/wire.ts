// What billing reads from a customer connection: the counters of the TCP socket the customer's
// bytes cross (docs/gateway.md, "What is billed"). For a plain connection that is the socket the
// proxy code holds. For a TLS connection (docs/adr/0071) the proxy code holds the TLSSocket, whose
// own counters are cleartext; billing reads the TCP socket under it, TLS records included.
//
// Delivered bytes are bytesWritten - writableLength on a plain socket. Under TLS the encrypted
// records are written to the TCP socket's handle from C++, past its JS stream: its bytesWritten
// counts them when they are handed to libuv and its writableLength stays 0, so the records still
// queued in libuv (the handle's writeQueueSize) stand in for writableLength. When the socket is
// destroyed those records are dropped unsent, and libuv's queue is emptied before 'close': the
// queue is read in the socket's _destroy, the last moment the handle holds it.
import net from 'node:net';

/** The byte counters billing reads (a net.Socket has them). */
export interface WireCounters {
  readonly bytesRead: number;
  readonly bytesWritten: number;
  readonly writableLength: number;
}

interface StreamHandle {
  writeQueueSize?: unknown;
}
type Destroy = (error: Error | null, callback: (error?: Error | null) => void) => void;
interface SocketInternals {
  _handle?: StreamHandle | null;
  _destroy: Destroy;
}

/** The TCP socket a TLS session runs on, as billing counts it. */
export class TcpCarrier implements WireCounters {
  readonly socket: net.Socket;
  /** Records left in libuv's queue when the socket was destroyed: never delivered. */
  private dropped = 0;
  private destroyed = false;

  constructor(socket: net.Socket) {
    this.socket = socket;
    const internals = socket as unknown as SocketInternals;
    // Node keeps libuv's queue size on stream handles (net.js reads it too); without it the
    // queued records could not be told from delivered ones.
    if (typeof internals._handle?.writeQueueSize !== 'number')
      throw new Error('a TCP socket without a stream handle cannot carry a metered TLS session');
    const destroy = internals._destroy;
    internals._destroy = (error, callback) => {
      this.dropped = this.queued();
      this.destroyed = true;
      destroy.call(socket, error, callback);
    };
  }

  private queued(): number {
    const size = (this.socket as unknown as SocketInternals)._handle?.writeQueueSize;
    return typeof size === 'number' ? size : 0;
  }

  get bytesRead(): number {
    return this.socket.bytesRead;
  }

  get bytesWritten(): number {
    return this.socket.bytesWritten;
  }

  get writableLength(): number {
    return this.socket.writableLength + (this.destroyed ? this.dropped : this.queued());
  }
}

/**
 * Checks, once at start, that this node's accepted sockets expose what TcpCarrier reads: a loopback
 * connection to itself, its accepted side wrapped. Throws when they do not (a node upgrade changed
 * net.js), so the gateway does not start billing TLS connections wrongly.
 */
export async function checkTcpCarrier(): Promise<void> {
  const server = net.createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const accepted = new Promise<net.Socket>((resolve) => server.once('connection', resolve));
    const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    client.on('error', () => undefined);
    const socket = await accepted;
    try {
      new TcpCarrier(socket);
    } finally {
      socket.destroy();
      client.destroy();
    }
  } finally {
    server.close();
  }
}

const CARRIER = Symbol('proxyfleet.carrier');
interface Carried {
  [CARRIER]?: TcpCarrier;
}

/** Records that `inner` (a TLS session) runs on `tcp`: billing and the caps count `tcp`. */
export function carry(inner: net.Socket, tcp: net.Socket): TcpCarrier {
  const carrier = new TcpCarrier(tcp);
  (inner as net.Socket & Carried)[CARRIER] = carrier;
  return carrier;
}

/** The counters billing reads for a socket the proxy code holds. */
export function wireOf(socket: net.Socket): WireCounters {
  return (socket as net.Socket & Carried)[CARRIER] ?? socket;
}

/** The accepted TCP socket under `socket` (itself for a plain connection). */
export function carrierOf(socket: net.Socket): net.Socket {
  return (socket as net.Socket & Carried)[CARRIER]?.socket ?? socket;
}
