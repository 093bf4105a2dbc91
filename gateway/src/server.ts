// One gateway: a forward proxy for one ProxyGateway (one plan) on the plan's port. Composition of
// auth/ (credentials, cache), proxy/ (tunnels, forwarding, guard, exits) and accounting/ (meters,
// leases, flusher). The credential cache and its change feed are per process (per pool), shared
// by every gateway the process runs (`npm start` runs five).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type net from 'node:net';
import type { Registry } from 'prom-client';
import { ChangeFeed } from '../../common/src/db/changes.ts';
import type { Health } from '../../common/src/health.ts';
import type { Logger } from '../../common/src/logger.ts';
import type { Pool } from '../../common/src/db/pool.ts';
import { Ledger, type Metered } from './accounting/ledger.ts';
import { Authenticator } from './auth/authenticate.ts';
import { AuthBackoff } from './auth/backoff.ts';
import { CredentialCache } from './auth/cache.ts';
import { gatewayMetrics, planMetrics } from './metrics.ts';
import type { ProxyContext } from './proxy/context.ts';
import { ExitPool } from './proxy/exits.ts';
import { handleRequest } from './proxy/forward.ts';
import { DestinationGuard } from './proxy/guard.ts';
import { SessionStore } from './proxy/sessions.ts';
import { handleConnect } from './proxy/tunnel.ts';
import type { ProxyGateway } from './spec.ts';

export interface GatewayDeps {
  gateway: ProxyGateway;
  /** Overrides spec.port (tests listen on port 0). */
  port?: number;
  host: string;
  gatewayId: string;
  allowCidrs: readonly string[];
  pool: Pool;
  databaseUrl: string;
  logger: Logger;
  registry: Registry;
  health: Health;
  /** How long close() lets open connections finish before cutting them (default 20 s). */
  drainMs?: number;
  /** Benchmark only: authentication and metering off. */
  bare?: boolean;
}

export interface RunningGateway {
  port: number;
  /** The gateway's ledger (tests flush it). */
  ledger: Ledger;
  /** Change-feed version this process's credential cache has applied. */
  cacheVersion(): number;
  close(): Promise<void>;
}

const KEEP_ALIVE_TIMEOUT_MS = 30_000;
const DEFAULT_DRAIN_MS = 20_000;
/** Time kept after draining for the final flush. */
const FINAL_FLUSH_MS = 5_000;

/** The credential cache and change feed of one process (one per pool), shared by its gateways. */
interface Shared {
  cache: CredentialCache;
  feed: ChangeFeed;
  ledgers: Set<Ledger>;
  users: number;
}
const sharedByPool = new WeakMap<Pool, Promise<Shared>>();

async function openShared(deps: GatewayDeps): Promise<Shared> {
  const cache = new CredentialCache(deps.pool);
  const alreadyMeasured = deps.registry.getSingleMetric('proxyfleet_gateway_cache_version') !== undefined;
  const feed = new ChangeFeed({
    url: deps.databaseUrl,
    logger: deps.logger,
    component: 'gateway',
    ack: { instance: deps.gatewayId, component: 'gateway' },
    ...(alreadyMeasured ? {} : { registry: deps.registry }),
  });
  const shared: Shared = { cache, feed, ledgers: new Set(), users: 0 };
  feed.onChanges(async (changes) => {
    await cache.apply(changes);
    for (const c of changes) {
      if (c.kind === 'balance') for (const ledger of shared.ledgers) ledger.balanceChanged(c.accountId);
    }
  });
  await feed.start();
  await cache.loadAll();
  deps.health.addInfo('cacheVersion', () => feed.version);
  deps.health.addInfo('gatewayCredentials', () => cache.size);
  return shared;
}

export async function startGateway(deps: GatewayDeps): Promise<RunningGateway> {
  const spec = deps.gateway.spec;
  const plan = spec.plan;
  const logger = deps.logger;
  const metrics = gatewayMetrics(deps.registry);
  const hot = planMetrics(metrics, plan);
  let sharedPromise = sharedByPool.get(deps.pool);
  if (!sharedPromise) {
    sharedPromise = openShared(deps);
    sharedByPool.set(deps.pool, sharedPromise);
    sharedPromise.catch(() => sharedByPool.delete(deps.pool));
  }
  const shared = await sharedPromise;
  shared.users++;

  const ledger = new Ledger({
    pool: deps.pool,
    gatewayId: deps.gatewayId,
    plan,
    logger,
    metrics,
    hot,
    idleMs: spec.timeouts.idleSeconds * 1000,
    maxLifetimeMs: spec.timeouts.maxLifetimeSeconds * 1000,
  });
  shared.ledgers.add(ledger);
  const ctx: ProxyContext = {
    plan,
    spec,
    auth: new Authenticator(plan, shared.cache, new AuthBackoff(), spec.session.maxMinutes),
    ledger,
    guard: new DestinationGuard(deps.allowCidrs),
    exits: new ExitPool(spec.exits),
    sessions: new SessionStore(deps.pool),
    metrics,
    hot,
    logger,
    meters: new WeakMap<net.Socket, Metered>(),
    bare: deps.bare ?? false,
    draining: false,
  };

  const server = http.createServer({
    // Slow header senders are cut here (slowloris); bodies and tunnels by the ledger's idle sweep.
    headersTimeout: spec.timeouts.headersSeconds * 1000,
    requestTimeout: 0,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    noDelay: true,
  });
  server.on('request', (req, res) => handleRequest(ctx, req, res));
  server.on('connect', (req, socket: net.Socket, head: Buffer) => handleConnect(ctx, req, socket, head));
  server.on('clientError', (err: NodeJS.ErrnoException, socket: net.Socket) => {
    if (socket.writable && !socket.destroyed) {
      const status = err.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? '408 Request Timeout' : '400 Bad Request';
      socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    }
    socket.destroy();
  });
  const open = new Set<net.Socket>();
  server.on('connection', (socket: net.Socket) => {
    socket.on('error', () => socket.destroy());
    open.add(socket);
    hot.connections.inc();
    socket.once('close', () => {
      open.delete(socket);
      hot.connections.dec();
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(deps.port ?? spec.port, deps.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  if (!ctx.bare) ledger.start();
  const port = (server.address() as AddressInfo).port;
  deps.health.addCheck(`gateway-${deps.gateway.metadata.name}`, () => {
    if (!server.listening) throw new Error('not listening');
  });
  logger.info({ plan, port, exits: spec.exits.length }, 'gateway listening');

  let closing: Promise<void> | undefined;
  return {
    port,
    ledger,
    cacheVersion: () => shared.feed.version,
    close: () =>
      (closing ??= (async () => {
        // Stop accepting, let open connections finish (bounded), then bill and flush everything.
        ctx.draining = true;
        const drainMs = deps.drainMs ?? DEFAULT_DRAIN_MS;
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        const deadline = Date.now() + drainMs;
        while (open.size > 0 && Date.now() < deadline) {
          server.closeIdleConnections();
          await new Promise((r) => setTimeout(r, 100));
        }
        for (const socket of open) socket.destroy();
        await closed;
        // Let the destroyed sockets' 'close' handlers bill their last bytes before the final flush.
        await new Promise((r) => setTimeout(r, 20));
        await ledger.close(Date.now() + FINAL_FLUSH_MS);
        ctx.exits.close();
        shared.ledgers.delete(ledger);
        if (--shared.users === 0) {
          sharedByPool.delete(deps.pool);
          await shared.feed.close();
        }
        logger.info({ plan }, 'gateway stopped');
      })()),
  };
}
