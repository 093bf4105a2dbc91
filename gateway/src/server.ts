// One gateway: a forward proxy for one ProxyGateway (one plan) on the plan's port. Composition of
// auth/ (credentials, cache), proxy/ (tunnels, forwarding, guard, exits), accounting/ (meters,
// leases, flusher) and the accepted connections (accepted-connections.ts: head timers, handshake
// state, refusals of heads, drain). The credential cache, its change feed, the metrics and the connection caps
// are per process (GatewayProcess), shared by every gateway the process runs (`npm start` runs five).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type net from 'node:net';
import type { Registry } from 'prom-client';
import type { ChangeSource } from '#common/db/changes.ts';
import { openChangeSource } from '#common/db/relay-feed.ts';
import type { Health } from '#common/health.ts';
import type { Logger } from '#common/logger.ts';
import type { Pool } from '#common/db/pool.ts';
import { Ledger } from './accounting/ledger.ts';
import { giveBackOnChanges } from './accounting/give-back.ts';
import { TargetTally, type TargetTallyOptions } from './accounting/targets.ts';
import { HistoryTally } from './accounting/history.ts';
import { carrierOf, checkTcpCarrier } from './accounting/wire.ts';
import { acceptConnections } from './accepted-connections.ts';
import { Authenticator } from './auth/authenticate.ts';
import { AuthBackoff } from './auth/backoff.ts';
import { CredentialCache } from './auth/cache.ts';
import { createGatewayMetrics, planMetrics, zeroPlanSeries, type GatewayMetrics } from './metrics.ts';
import { AccessLog, DEFAULT_ACCESS_LOG_SAMPLE } from './proxy/access-log.ts';
import type { ProxyContext } from './proxy/context.ts';
import { ExitAddressWatch, type InterfaceLister } from './proxy/exit-addresses.ts';
import { ExitPool, type ExitReport } from './proxy/exits.ts';
import type { UpstreamClient } from './proxy/upstream.ts';
import { DestinationGuard } from './proxy/guard.ts';
import {
  ConnectionLimiter,
  defaultMaxConnections,
  DEFAULT_UNAUTHENTICATED_PER_SOURCE,
} from './proxy/limits.ts';
import { ProxyProtocolPolicy } from './proxy/proxy-protocol.ts';
import { REFUSALS } from './proxy/refusals.ts';
import { SessionStore } from './proxy/sessions.ts';
import type { ProxyGateway } from './spec.ts';
import type { GatewayCertificates } from './tls/certificates.ts';

export interface GatewayDeps {
  gateway: ProxyGateway;
  /** Overrides spec.port (tests listen on port 0). */
  port?: number;
  host: string;
  gatewayId: string;
  allowCidrs: readonly string[];
  pool: Pool;
  databaseUrl: string;
  /** PROXYFLEET_RELAY_URL (docs/adr/0105); unset: the process's own LISTEN session. */
  relayUrl?: string | undefined;
  logger: Logger;
  registry: Registry;
  health: Health;
  /** How long close() lets open connections finish before cutting them (default 20 s). */
  drainMs?: number;
  /** Benchmark only: authentication and metering off. */
  bare?: boolean;
  /** Share of access-log lines logged at info (default 1 %); all of them at debug. */
  accessLogSample?: number;
  /**
   * CONNECT heads parsed by the front end and handled straight on the socket (default true);
   * false: every HTTP head goes through node:http (tests compare the two, docs/adr/0027). SOCKS5
   * is served either way.
   */
  connectFastPath?: boolean;
  /**
   * Tests only: the client plain-HTTP requests go upstream through (default: the raw client,
   * upstream.ts). The differential test gives node:http's, as an oracle (docs/adr/0038).
   */
  upstreamClient?: UpstreamClient;
  /** The process's shared state, when it runs several gateways (else the gateway opens its own). */
  process?: GatewayProcess;
  /**
   * The certificate TLS sessions on the plan's port start with (docs/adr/0071); absent: no TLS
   * (a ClientHello gets node:http's 400, as before).
   */
  tls?: GatewayCertificates;
  /**
   * Live gateways of this plan (the heartbeat's count, accounting/heartbeat.ts): the database-outage
   * credit is shared among them (docs/adr/0024). Default: 1.
   */
  fleetSize?: () => number;
  /** Milliseconds between usage flushes (PROXYFLEET_GATEWAY_FLUSH_SECONDS). Default: FLUSH_MS (2 s). */
  flushMs?: number;
  /** Connection caps of the process the gateway opens itself (ignored with `process`). */
  limits?: { maxConnections?: number; maxUnauthenticatedPerSource?: number; authFailuresPerAddress?: number };
  /** Target statistics caps (tests lower them; accounting/targets.ts has the defaults). */
  targets?: Pick<TargetTallyOptions, 'perAccount' | 'perDay' | 'maxEntries'>;
  /**
   * Where exits' source addresses are looked for (default os.networkInterfaces), and how often
   * (default ADDRESS_CHECK_MS): tests give their own (proxy/exit-addresses.ts).
   */
  interfaces?: InterfaceLister;
  addressCheckMs?: number;
}

export interface RunningGateway {
  port: number;
  /** The gateway's ledger (tests flush it). */
  ledger: Ledger;
  /** The gateway's target statistics (tests drain them after a flush). */
  targets: TargetTally;
  /** The gateway's usage history tally (tests drain it after a flush). */
  history: HistoryTally;
  /** Change-feed version this process's credential cache has applied. */
  cacheVersion(): number;
  /** performance.now() of the last connection accepted (the preStop waits for them to stop, common/src/prestop.ts). */
  lastConnectionAt(): number;
  /** Each exit's health, for the heartbeat (docs/adr/0117). */
  exitReport(): ExitReport[];
  close(): Promise<void>;
}

/** An idle keep-alive connection (between requests) is closed after this long. */
const KEEP_ALIVE_TIMEOUT_MS = 30_000;
const DEFAULT_DRAIN_MS = 20_000;
/** Time kept after draining for the final flush. */
const FINAL_FLUSH_MS = 5_000;

/** Options of the gateway process: what every gateway it runs shares. */
export interface GatewayProcessOptions {
  pool: Pool;
  databaseUrl: string;
  /** PROXYFLEET_RELAY_URL: the change relay's stream instead of a LISTEN session (docs/adr/0105). */
  relayUrl?: string | undefined;
  logger: Logger;
  registry: Registry;
  health: Health;
  gatewayId: string;
  /** Open customer connections of the whole process (default: from the fd limit, limits.ts). */
  maxConnections?: number;
  /** Connections not yet authenticated, per source address (default 256). */
  maxUnauthenticatedPerSource?: number;
  /** Failed logins per source address per minute before it is backed off (backoff.ts default). */
  authFailuresPerAddress?: number;
}

/**
 * What the gateways of one process share: the credential cache and its change feed, the metrics
 * (created once in the process's registry) and the connection caps. Owned by whoever opened it
 * (`npm start` opens one for its five gateways; a lone gateway opens its own).
 */
export class GatewayProcess {
  readonly cache: CredentialCache;
  readonly feed: ChangeSource;
  readonly metrics: GatewayMetrics;
  readonly limiter: ConnectionLimiter;
  readonly ledgers = new Set<Ledger>();
  /** Sockets admitted through an IP allowlist entry, and its id (ProxyContext.viaAllowlist). */
  readonly viaAllowlist = new WeakMap<net.Socket, string>();
  readonly authFailuresPerAddress: number | undefined;
  private readonly logger: Logger;

  private constructor(opts: GatewayProcessOptions) {
    this.logger = opts.logger;
    this.authFailuresPerAddress = opts.authFailuresPerAddress;
    this.cache = new CredentialCache(opts.pool);
    this.metrics = createGatewayMetrics(opts.registry);
    this.limiter = new ConnectionLimiter(
      opts.maxConnections ?? defaultMaxConnections(),
      opts.maxUnauthenticatedPerSource ?? DEFAULT_UNAUTHENTICATED_PER_SOURCE,
    );
    this.feed = openChangeSource({
      relayUrl: opts.relayUrl,
      databaseUrl: opts.databaseUrl,
      logger: opts.logger,
      component: 'gateway',
      ack: { instance: opts.gatewayId, component: 'gateway', batched: true },
      registry: opts.registry,
    });
  }

  static async open(opts: GatewayProcessOptions): Promise<GatewayProcess> {
    const p = new GatewayProcess(opts);
    p.feed.onChanges(async (changes) => {
      giveBackOnChanges(changes, p.ledgers);
      const revoked = await p.cache.apply(changes);
      for (const c of changes) {
        if (c.kind === 'balance') for (const ledger of p.ledgers) ledger.balanceChanged(c.accountId);
        // A cap override is announced as an account change (docs/adr/0035): live budgets take it now.
        if (c.kind === 'account') for (const ledger of p.ledgers) ledger.throttleChanged(c.accountId);
      }
      // A suspension or a credential change ends the account's live connections at once: they
      // were admitted with credentials that no longer hold (docs/adr/0023).
      for (const accountId of revoked)
        p.cut({ account: accountId }, 'live connections cut: account suspended or credentials changed', (l) =>
          l.revoke(accountId),
        );
      // The account's own username or password changed: its own connections only, not its
      // sub-users', whose credentials still hold (docs/adr/0037).
      for (const accountId of p.cache.drainRevokedOwn())
        p.cut({ account: accountId }, "live connections cut: the account's credentials changed", (l) =>
          l.revokeBudget(accountId),
        );
      // A sub-user suspended, deleted or given new credentials: its connections only (docs/adr/0037).
      for (const [accountId, subUsers] of p.cache.drainRevokedSubUsers())
        for (const subUserId of subUsers)
          p.cut(
            { account: accountId, subUser: subUserId },
            'live connections cut: sub-user suspended, deleted or credentials changed',
            (l) => l.revokeBudget(accountId, subUserId),
          );
      // An allowlist entry removed (or its targeting changed) ends what it admitted, and only that:
      // the account's connections with credentials stay (docs/adr/0036).
      for (const [accountId, entries] of p.cache.drainRemovedEntries())
        p.cut({ account: accountId }, 'live connections cut: IP allowlist entry removed', (l) =>
          l.revoke(accountId, (socket) => entries.has(p.viaAllowlist.get(socket) ?? '')),
        );
    });
    await p.feed.start();
    // From the relay, the start delivered every credential row already.
    if (!p.feed.snapshots) await p.cache.loadAll();
    opts.health.addInfo('cacheVersion', () => p.feed.version);
    opts.health.addInfo('gatewayCredentials', () => p.cache.size);
    opts.health.addInfo('gatewayConnections', () => p.limiter.connections);
    return p;
  }

  /** Ends live connections on every gateway, those `revoke` ends on each ledger: counted, logged. */
  private cut(
    who: { account: string; subUser?: string },
    msg: string,
    revoke: (ledger: Ledger) => number,
  ): void {
    for (const ledger of this.ledgers) {
      const cut = revoke(ledger);
      if (!cut) continue;
      this.metrics.revocationCuts.inc({ plan: ledger.plan }, cut);
      this.logger.info({ ...who, connections: cut, plan: ledger.plan }, msg);
    }
  }

  async close(): Promise<void> {
    await this.feed.close();
  }
}

export async function startGateway(deps: GatewayDeps): Promise<RunningGateway> {
  const spec = deps.gateway.spec;
  const plan = spec.plan;
  const logger = deps.logger;
  // Refusing credentials in clear with no TLS to send them over would refuse every customer.
  if (spec.tls?.refuseCredentialsInClear && !deps.tls)
    throw new Error(
      `ProxyGateway ${deps.gateway.metadata.name}: spec.tls.refuseCredentialsInClear needs a certificate (PROXYFLEET_GATEWAY_TLS_CERT and PROXYFLEET_GATEWAY_TLS_KEY)`,
    );
  // TLS connections are billed on the TCP socket's libuv queue (docs/adr/0071): this node has it.
  if (deps.tls) await checkTcpCarrier();
  // A gateway given no process opens its own, and closes it with itself.
  const owned = deps.process === undefined;
  const proc = deps.process ?? (await GatewayProcess.open({ ...deps, ...deps.limits }));
  const metrics = proc.metrics;
  const hot = planMetrics(metrics, plan);
  zeroPlanSeries(metrics, plan, REFUSALS);

  const targets = new TargetTally({ pool: deps.pool, plan, logger, ...deps.targets });
  const history = new HistoryTally({ pool: deps.pool, plan, logger });
  const ledger = new Ledger({
    targets,
    history,
    pool: deps.pool,
    gatewayId: deps.gatewayId,
    plan,
    logger,
    metrics,
    hot,
    idleMs: spec.timeouts.idleSeconds * 1000,
    maxLifetimeMs: spec.timeouts.maxLifetimeSeconds * 1000,
    ...(deps.fleetSize ? { fleetSize: deps.fleetSize } : {}),
    ...(deps.flushMs ? { flushMs: deps.flushMs } : {}),
    // The account's override, else the plan's default (docs/adr/0035).
    throttle: (accountId) => proc.cache.throttle(accountId, plan) ?? spec.throttle?.bytesPerSecond ?? 0,
    // A sub-user's own cap (docs/adr/0037), under the account's above.
    subUserThrottle: (accountId, subUserId) => proc.cache.subUserThrottle(accountId, subUserId) ?? 0,
  });
  proc.ledgers.add(ledger);
  const limiter = proc.limiter;
  const exits = new ExitPool(spec.exits);
  // Exits whose source address is not on this node are left out before the first request.
  const addresses = new ExitAddressWatch(exits, {
    plan,
    logger,
    gauge: metrics.exitMissing,
    ...(deps.interfaces ? { lister: deps.interfaces } : {}),
    ...(deps.addressCheckMs ? { intervalMs: deps.addressCheckMs } : {}),
  });
  addresses.start();
  const ctx: ProxyContext = {
    plan,
    spec,
    auth: new Authenticator(
      plan,
      proc.cache,
      new AuthBackoff(proc.authFailuresPerAddress),
      spec.session.maxMinutes,
    ),
    ledger,
    guard: new DestinationGuard(deps.allowCidrs),
    exits,
    sessions: new SessionStore(deps.pool),
    metrics,
    hot,
    logger,
    access: new AccessLog(
      logger,
      plan,
      deps.accessLogSample ?? DEFAULT_ACCESS_LOG_SAMPLE,
      Math.random,
      targets,
      history,
    ),
    bare: deps.bare ?? false,
    draining: false,
    viaAllowlist: proc.viaAllowlist,
    // The caps count the accepted TCP socket, also under a TLS session.
    authenticated: (socket) => limiter.authenticated(carrierOf(socket)),
  };

  const headersMs = spec.timeouts.headersSeconds * 1000;
  const server = http.createServer({
    // Heads of later requests on a keep-alive connection: Node's own check, run every second (its
    // default interval of 30 s let slow heads live 26-40 s). The first head: the connections' timer.
    headersTimeout: headersMs,
    connectionsCheckingInterval: 1_000,
    requestTimeout: 0,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    noDelay: true,
  });
  const certificates = deps.tls;
  const connections = acceptConnections(server, ctx, {
    limiter,
    headersMs,
    connectFastPath: deps.connectFastPath !== false,
    tls: certificates,
    upstreamClient: deps.upstreamClient,
    proxyProtocol:
      spec.proxyProtocol && spec.proxyProtocol.mode !== 'off'
        ? new ProxyProtocolPolicy(spec.proxyProtocol)
        : undefined,
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
  logger.info(
    {
      plan,
      port,
      exits: spec.exits.length,
      maxConnections: limiter.maxConnections,
      maxUnauthenticatedPerSource: limiter.maxUnauthenticatedPerSource,
      tls: certificates !== undefined,
      refuseCredentialsInClear: spec.tls?.refuseCredentialsInClear ?? false,
      proxyProtocol: spec.proxyProtocol?.mode ?? 'off',
    },
    'gateway listening',
  );

  let closing: Promise<void> | undefined;
  return {
    port,
    ledger,
    targets,
    history,
    cacheVersion: () => proc.feed.version,
    lastConnectionAt: () => connections.lastConnectionAt(),
    exitReport: () => exits.report(),
    close: () =>
      (closing ??= (async () => {
        // Stop accepting, let open connections finish (bounded), then bill and flush everything.
        ctx.draining = true;
        const drainMs = deps.drainMs ?? DEFAULT_DRAIN_MS;
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        await connections.drain(Date.now() + drainMs);
        await closed;
        // Let the destroyed sockets' 'close' handlers bill their last bytes before the final flush.
        await new Promise((r) => setTimeout(r, 20));
        await ledger.close(Date.now() + FINAL_FLUSH_MS);
        addresses.stop();
        ctx.exits.close();
        proc.ledgers.delete(ledger);
        if (owned) await proc.close();
        logger.info({ plan }, 'gateway stopped');
      })()),
  };
}
