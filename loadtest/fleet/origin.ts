// The load tests' origin, on 127.0.0.1 over HTTP and TLS (certificate for origin.localhost):
// GET /bytes/<n> answers n bytes (at most 16 MiB); every answer names the address the request
// came from in `x-exit`, which is the exit's source address when it came through a gateway.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';

const MAX_BYTES = 16 * 1024 * 1024;
const BODY = Buffer.alloc(MAX_BYTES, 'x');

export interface Origin {
  httpPort: number;
  httpsPort: number;
  /** Requests answered so far. */
  requests(): number;
  close(): Promise<void>;
}

export async function startOrigin(options: {
  httpPort: number;
  httpsPort: number;
  key: string;
  cert: string;
}): Promise<Origin> {
  let count = 0;
  const handler: http.RequestListener = (req, res) => {
    count++;
    const exit = (req.socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    const m = /^\/bytes\/(\d+)$/.exec(req.url ?? '');
    const n = m ? Math.min(Number(m[1]), MAX_BYTES) : 0;
    res.writeHead(m || req.url === '/ip' ? 200 : 404, {
      'content-type': 'application/octet-stream',
      'content-length': String(m ? n : exit.length),
      'x-exit': exit,
    });
    res.end(m ? BODY.subarray(0, n) : exit);
  };
  const plain = http.createServer({ keepAliveTimeout: 30_000 }, handler);
  const secure = https.createServer(
    { key: readFileSync(options.key), cert: readFileSync(options.cert), keepAliveTimeout: 30_000 },
    handler,
  );
  const listen = (server: http.Server, port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
    });
  const httpPort = await listen(plain, options.httpPort);
  const httpsPort = await listen(secure, options.httpsPort);
  const close = (server: http.Server) =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return {
    httpPort,
    httpsPort,
    requests: () => count,
    close: async () => void (await Promise.all([close(plain), close(secure)])),
  };
}
