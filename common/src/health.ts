// /healthz (the process is alive), /readyz (it can serve: every readiness check passes and it is
// not draining) and /metrics, on a plain node:http server for the entrypoints that have no
// Express app, and as a request handler the API mounts on its own port. /prestop, where an
// entrypoint sets a wait (the gateway, docs/adr/0094), is the pod's preStop hook: readiness false
// at once, then the answer when the wait is over (the kubelet sends SIGTERM after it).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';

export type ReadinessCheck = () => Promise<void> | void;

export class Health {
  private readonly checks = new Map<string, ReadinessCheck>();
  private draining = false;
  /** Extra fields for /readyz, such as the cache version a pod has applied. */
  private readonly info = new Map<string, () => unknown>();

  private readonly registries: Registry[];
  private preStop: (() => Promise<unknown>) | undefined;

  constructor(registries: Registry[]) {
    this.registries = registries;
  }

  addCheck(name: string, check: ReadinessCheck): void {
    this.checks.set(name, check);
  }

  addInfo(name: string, read: () => unknown): void {
    this.info.set(name, read);
  }

  addRegistry(registry: Registry): void {
    this.registries.push(registry);
  }

  /** What /prestop waits for after readiness went false (the gateway: its Service endpoint gone). */
  setPreStop(wait: () => Promise<unknown>): void {
    this.preStop = wait;
  }

  /** Called first on shutdown so load balancers stop sending new work while we drain. */
  startDraining(): void {
    this.draining = true;
  }

  async readiness(): Promise<{
    ready: boolean;
    checks: Record<string, string>;
    info: Record<string, unknown>;
  }> {
    const checks: Record<string, string> = {};
    let ready = !this.draining;
    if (this.draining) checks.shutdown = 'draining';
    await Promise.all(
      [...this.checks].map(async ([name, check]) => {
        try {
          await check();
          checks[name] = 'ok';
        } catch (err) {
          ready = false;
          checks[name] = err instanceof Error ? err.message : String(err);
        }
      }),
    );
    const info: Record<string, unknown> = {};
    for (const [name, read] of this.info) info[name] = read();
    return { ready, checks, info };
  }

  async metrics(): Promise<{ contentType: string; body: string }> {
    const merged = this.registries.length === 1 ? this.registries[0]! : Registry.merge(this.registries);
    return { contentType: merged.contentType, body: await merged.metrics() };
  }

  /**
   * Answers /healthz, /readyz and /metrics, and /prestop unless `preStop` is false (a public
   * port, where any client could make the pod unready); returns false for any other path.
   */
  handle(req: http.IncomingMessage, res: http.ServerResponse, { preStop = true } = {}): boolean {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    if (path === '/healthz') {
      send(res, 200, 'application/json', JSON.stringify({ status: 'ok' }));
      return true;
    }
    if (path === '/readyz') {
      this.readiness().then(
        (report) => send(res, report.ready ? 200 : 503, 'application/json', JSON.stringify(report)),
        () => send(res, 503, 'application/json', '{"ready":false}'),
      );
      return true;
    }
    if (path === '/prestop' && preStop && this.preStop) {
      this.startDraining();
      this.preStop().then(
        (result) => send(res, 200, 'application/json', JSON.stringify({ preStop: result ?? 'done' })),
        () => send(res, 500, 'application/json', '{"preStop":"failed"}'),
      );
      return true;
    }
    if (path === '/metrics') {
      this.metrics().then(
        (m) => send(res, 200, m.contentType, m.body),
        () => send(res, 500, 'text/plain', 'metrics failed\n'),
      );
      return true;
    }
    return false;
  }
}

function send(res: http.ServerResponse, status: number, contentType: string, body: string): void {
  res.writeHead(status, { 'content-type': contentType, 'cache-control': 'no-store' });
  res.end(body);
}

export interface HealthServer {
  readonly port: number;
  close(): Promise<void>;
}

export async function startHealthServer(health: Health, host: string, port: number): Promise<HealthServer> {
  const server = http.createServer((req, res) => {
    if (!health.handle(req, res)) send(res, 404, 'application/json', '{"error":"not found"}');
  });
  server.on('clientError', (_err, socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
