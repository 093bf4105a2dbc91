// A TCP relay in front of a real server for fault injection, with the two outages a database
// meets: blackHole() holds every byte (new connections are accepted and held too), as a network
// that drops packets does: nothing is answered, nothing is closed; forward() delivers what was
// held, as TCP's retransmissions would once the path is back. cut() resets every connection and
// refuses new ones, as a server that went down does; restore() listens again on the same port.
import net from 'node:net';

interface Pair {
  client: net.Socket;
  upstream: net.Socket | undefined;
  toUpstream: Buffer[];
  toClient: Buffer[];
}

export class TcpRelay {
  private server: net.Server | undefined;
  private readonly pairs = new Set<Pair>();
  private forwarding = true;
  port = 0;
  private readonly target: { host: string; port: number };

  constructor(target: { host: string; port: number }) {
    this.target = target;
  }

  /** A relay in front of the server of a postgres URL; `url` is the same URL through the relay. */
  static async forUrl(url: string): Promise<{ relay: TcpRelay; url: string }> {
    const u = new URL(url);
    const relay = new TcpRelay({ host: u.hostname, port: Number(u.port || 5432) });
    await relay.listen();
    u.host = `127.0.0.1:${relay.port}`;
    return { relay, url: u.toString() };
  }

  async listen(): Promise<void> {
    const server = net.createServer((client) => {
      const pair: Pair = { client, upstream: undefined, toUpstream: [], toClient: [] };
      this.pairs.add(pair);
      client.on('error', () => undefined);
      client.on('data', (chunk: Buffer) => {
        if (this.forwarding && pair.upstream) pair.upstream.write(chunk);
        else pair.toUpstream.push(chunk);
      });
      client.on('close', () => {
        this.pairs.delete(pair);
        pair.upstream?.destroy();
      });
      if (this.forwarding) this.connect(pair);
    });
    this.server = server;
    await new Promise<void>((r) => server.listen(this.port, '127.0.0.1', r));
    this.port = (server.address() as net.AddressInfo).port;
  }

  private connect(pair: Pair): void {
    const upstream = net.connect(this.target);
    pair.upstream = upstream;
    upstream.on('error', () => undefined);
    upstream.on('data', (chunk: Buffer) => {
      if (this.forwarding) pair.client.write(chunk);
      else pair.toClient.push(chunk);
    });
    upstream.on('close', () => pair.client.destroy());
    for (const chunk of pair.toUpstream.splice(0)) upstream.write(chunk);
  }

  /** From now on nothing gets through in either direction, and nothing is closed. */
  blackHole(): void {
    this.forwarding = false;
  }

  /** Forwards again, delivering what was held. */
  forward(): void {
    this.forwarding = true;
    for (const pair of this.pairs) {
      if (!pair.upstream) {
        this.connect(pair);
        continue;
      }
      for (const chunk of pair.toUpstream.splice(0)) pair.upstream.write(chunk);
      for (const chunk of pair.toClient.splice(0)) pair.client.write(chunk);
    }
  }

  /** Every open connection reset, new ones refused (nothing listens) until restore(). */
  async cut(): Promise<void> {
    for (const pair of this.pairs) {
      pair.client.destroy();
      pair.upstream?.destroy();
    }
    if (this.server?.listening) await new Promise<void>((r) => this.server!.close(() => r()));
  }

  /** Listens again on the same port after cut(). */
  restore(): Promise<void> {
    return this.listen();
  }

  close(): Promise<void> {
    return this.cut();
  }
}

/**
 * A relay to a test fixture's database (TcpRelay.forUrl), closed with the fixture once its
 * gateways have stopped: the tests cut it to take the database away from them.
 */
export async function relayToFixtureDatabase(fx: {
  db: { url: string };
  onClose(close: () => unknown): void;
}): Promise<{ relay: TcpRelay; url: string }> {
  const relayed = await TcpRelay.forUrl(fx.db.url);
  fx.onClose(() => relayed.relay.close());
  return relayed;
}
