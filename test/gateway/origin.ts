// The origin of the gateway's integration tests: a local HTTP server whose routes answer with
// the peer address, exact byte counts, slow or cut answers and echoes.
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';

export interface Origin {
  port: number;
  close(): Promise<void>;
}

/**
 * Routes: /peer -> the peer address; /bytes/N -> N bytes; /slow/N/MS -> N bytes over MS ms;
 * /kill/N -> headers and N bytes, then the connection is destroyed; POST /echo -> the body.
 * Any other connection that does not speak HTTP is echoed raw on the raw port.
 */
export async function startOrigin(): Promise<Origin> {
  const server = http.createServer((req, res) => {
    const parts = (req.url ?? '/').split('?')[0]!.split('/');
    if (parts[1] === 'peer') {
      res.end(req.socket.remoteAddress ?? '');
    } else if (parts[1] === 'headers') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(req.rawHeaders));
    } else if (parts[1] === 'bytes') {
      const n = Number(parts[2]);
      res.writeHead(200, { 'content-length': n, 'content-type': 'application/octet-stream' });
      res.end(Buffer.alloc(n, 120));
    } else if (parts[1] === 'slow') {
      const n = Number(parts[2]);
      const ms = Number(parts[3]);
      const steps = 20;
      res.writeHead(200, { 'content-length': n });
      let sent = 0;
      const timer = setInterval(() => {
        const size = sent + Math.ceil(n / steps) > n ? n - sent : Math.ceil(n / steps);
        sent += size;
        res.write(Buffer.alloc(size, 121));
        if (sent >= n) {
          clearInterval(timer);
          res.end();
        }
      }, ms / steps);
      res.on('close', () => clearInterval(timer));
    } else if (parts[1] === 'kill') {
      const n = Number(parts[2]);
      res.writeHead(200, { 'content-length': n * 2 });
      res.write(Buffer.alloc(n, 122), () => setTimeout(() => req.socket.destroy(), 50));
    } else if (parts[1] === 'echo') {
      req.pipe(res);
    } else {
      res.writeHead(404).end();
    }
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

/**
 * A destination that accepts connections and never answers (a gateway's answer timeout meets it);
 * `close` destroys what it holds and stops listening.
 */
export async function startSilentServer(): Promise<Origin> {
  const held = new Set<net.Socket>();
  const server = net.createServer((s) => {
    held.add(s);
    s.on('error', () => undefined);
    s.on('close', () => held.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => {
      for (const s of held) s.destroy();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}
