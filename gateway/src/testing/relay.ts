// Fault injection for the gateway's integration tests: a TCP relay in front of PostgreSQL that a
// test can cut (every open connection reset, new ones refused) and restore, so the gateway meets
// a real database outage (docs/adr/0021).
import net from 'node:net';

export class Relay {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  port = 0;
  private readonly target: { host: string; port: number };

  constructor(target: { host: string; port: number }) {
    this.target = target;
  }

  /** A relay to the database of `databaseUrl`; `url(relay)` is the same URL through the relay. */
  static forDatabase(databaseUrl: string): Relay {
    const url = new URL(databaseUrl);
    return new Relay({ host: url.hostname, port: Number(url.port || 5432) });
  }

  /** `databaseUrl` pointed at this relay (after up()). */
  url(databaseUrl: string): string {
    const url = new URL(databaseUrl);
    url.host = `127.0.0.1:${this.port}`;
    return url.toString();
  }

  async up(): Promise<void> {
    this.server = net.createServer((client) => {
      const upstream = net.connect(this.target);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => {
          this.sockets.delete(s);
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((r) => this.server!.listen(this.port, '127.0.0.1', r));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  async down(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    if (this.server?.listening) await new Promise<void>((r) => this.server!.close(() => r()));
  }
}
