// The conversion webhook: HTTPS on its own port, POST /convert with a ConversionReview (v1),
// served by every controller replica (leader or not: the API server may call any of them through
// the Service). The serving certificate is swapped in place when certificates.ts renews it;
// connections already open finish on the old one. Each review's handling time is the histogram
// proxyfleet_controller_conversion_duration_seconds.
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Histogram, type Registry } from 'prom-client';
import type { Logger } from '#common/logger.ts';
import { reviewResponse, type ConversionReview } from './convert.ts';
import type { KeyPair } from './x509.ts';

export const CONVERT_PATH = '/convert';
/** The API server sends at most a list page of objects; bodies larger than this are refused. */
const MAX_BODY_BYTES = 32 * 1024 * 1024;

export class ConversionWebhook {
  readonly duration: Histogram<'kind' | 'result'>;
  private server: Server | undefined;
  private readonly logger: Logger;

  constructor(registry: Registry, logger: Logger) {
    this.logger = logger;
    this.duration = new Histogram({
      name: 'proxyfleet_controller_conversion_duration_seconds',
      help: 'Time to answer one ConversionReview of the conversion webhook, by kind and result (Success, Failure).',
      labelNames: ['kind', 'result'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers: [registry],
    });
  }

  /** Starts serving `pair`; resolves with the port (0 picks a free one). */
  async listen(pair: KeyPair, port: number, host: string): Promise<number> {
    const server = createServer({ cert: pair.cert, key: pair.key, minVersion: 'TLSv1.2' }, (req, res) => {
      const started = process.hrtime.bigint();
      if (req.method !== 'POST' || req.url?.split('?')[0] !== CONVERT_PATH) {
        res.writeHead(404).end();
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_BODY_BYTES) req.destroy();
        else chunks.push(c);
      });
      req.on('end', () => {
        let review: ConversionReview;
        try {
          review = JSON.parse(Buffer.concat(chunks).toString()) as ConversionReview;
          const answer = reviewResponse(review);
          const body = JSON.stringify(answer);
          res.writeHead(200, { 'content-type': 'application/json' }).end(body);
          const kind = review.request?.objects[0]?.kind ?? '';
          const result = answer.response?.result.status ?? 'Failure';
          if (result !== 'Success')
            this.logger.warn({ message: answer.response?.result.message }, 'conversion failed');
          this.duration.observe({ kind, result }, Number(process.hrtime.bigint() - started) / 1e9);
        } catch (err) {
          res
            .writeHead(400, { 'content-type': 'text/plain' })
            .end(`not a ConversionReview: ${(err as Error).message}`);
        }
      });
    });
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    return (server.address() as AddressInfo).port;
  }

  /** Serves `pair` from the next TLS handshake on. */
  setCertificate(pair: KeyPair): void {
    this.server?.setSecureContext({ cert: pair.cert, key: pair.key, minVersion: 'TLSv1.2' });
  }

  get listening(): boolean {
    return this.server?.listening ?? false;
  }

  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }
}
