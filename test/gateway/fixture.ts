// A gateway on port 0 over a test database, in this process (startTestGateway), and the jest hook
// that gives a whole test file a database, an origin and a gateway (useTestGateway).
import { Registry } from 'prom-client';
import { Health } from '#common/health.ts';
import { createLogger } from '#common/logger.ts';
import type { Pool } from '#common/db/pool.ts';
import { changeLogHead } from '#common/db/changes.ts';
import type { InterfaceLister } from '../../gateway/src/proxy/exit-addresses.ts';
import { startGateway, type RunningGateway } from '../../gateway/src/server.ts';
import { GatewayCertificates } from '../../gateway/src/tls/certificates.ts';
import { proxyGatewaySchema, type ExitSpec, type Plan, type ProxyGateway } from '../../gateway/src/spec.ts';
import { createTestDatabase, type TestDatabase } from '../db.ts';
import { jestHooks } from '../hooks.ts';
import { nodeUpstream } from '../node-upstream.ts';
import { startOrigin, type Origin } from './origin.ts';
import { spawnGateway, type GatewayProcess } from './process.ts';

export function gatewaySpec(
  plan: Plan,
  exits: ExitSpec[] = [{ name: 'direct', country: '*' }],
  extra: Record<string, unknown> = {},
): ProxyGateway {
  return proxyGatewaySchema.parse({
    apiVersion: 'proxyfleet.io/v1alpha1',
    kind: 'ProxyGateway',
    metadata: { name: `test-${plan}` },
    spec: { plan, port: 1, advertisedHost: '127.0.0.1', exits, ...extra },
  });
}

/**
 * gatewaySpec's `extra` for an answer timeout of 1 s: a destination that accepts and never answers
 * (startSilentServer) gets the gateway's 504 within about a second.
 */
export const ONE_SECOND_ANSWER_TIMEOUT = {
  timeouts: { headersSeconds: 10, connectSeconds: 10, idleSeconds: 1, maxLifetimeSeconds: 86_400 },
} as const;

export interface TestGatewayOptions {
  gatewayId?: string;
  drainMs?: number;
  allowCidrs?: string[];
  limits?: { maxConnections?: number; maxUnauthenticatedPerSource?: number };
  /** false: every CONNECT head through node:http (the front end's fast path off). */
  connectFastPath?: boolean;
  /**
   * The plain-HTTP upstream client: the gateway's own (default) or 'node', node:http's client as
   * the differential test's oracle (test/node-upstream.ts, docs/adr/0038).
   */
  upstreamClient?: 'raw' | 'node';
  fleetSize?: () => number;
  /** Target statistics caps (accounting/targets.ts). */
  targets?: { perAccount?: number; perDay?: number; maxEntries?: number };
  /** TLS on the port (docs/adr/0071): the certificate files, read again every `reloadMs`. */
  tls?: { certFile: string; keyFile: string; reloadMs?: number };
  /** The interfaces exits' source addresses are looked for on, and how often (proxy/exit-addresses.ts). */
  interfaces?: InterfaceLister;
  addressCheckMs?: number;
}

export type TestGateway = RunningGateway & { registry: Registry; certificates?: GatewayCertificates };

export async function startTestGateway(
  pool: Pool,
  url: string,
  gateway: ProxyGateway,
  options: TestGatewayOptions = {},
): Promise<TestGateway> {
  const registry = new Registry();
  const logger = createLogger('test', 'silent');
  const oracle = options.upstreamClient === 'node' ? nodeUpstream() : undefined;
  const certificates = options.tls
    ? await GatewayCertificates.open({ ...options.tls, logger, registry })
    : undefined;
  const running = await startGateway({
    gateway,
    port: 0,
    host: '127.0.0.1',
    gatewayId: options.gatewayId ?? `test-${Math.random().toString(36).slice(2, 8)}`,
    allowCidrs: options.allowCidrs ?? ['127.0.0.0/8'],
    pool,
    databaseUrl: url,
    logger,
    registry,
    health: new Health([registry]),
    drainMs: options.drainMs ?? 2_000,
    ...(certificates ? { tls: certificates } : {}),
    ...(options.limits ? { limits: options.limits } : {}),
    ...(options.connectFastPath === false ? { connectFastPath: false } : {}),
    ...(oracle ? { upstreamClient: oracle.send } : {}),
    ...(options.fleetSize ? { fleetSize: options.fleetSize } : {}),
    ...(options.targets ? { targets: options.targets } : {}),
    ...(options.interfaces ? { interfaces: options.interfaces } : {}),
    ...(options.addressCheckMs ? { addressCheckMs: options.addressCheckMs } : {}),
  });
  if (!oracle && !certificates) return { ...running, registry };
  return {
    ...running,
    registry,
    ...(certificates ? { certificates } : {}),
    close: async () => {
      await running.close();
      oracle?.close();
      certificates?.close();
    },
  };
}

// The jest hook for gateway integration tests, as useTestApi is for the API's (test/api.ts).
export interface GatewayFixture {
  db: TestDatabase;
  origin: Origin;
  /** The gateway the hook started (none with `gateway: false`). */
  gateway: TestGateway;
  /**
   * Starts another gateway, on the fixture's database unless `pool` and `url` say otherwise (a
   * relayed or slowed pool); it is closed after the file's tests, before the database goes.
   */
  start(
    spec?: ProxyGateway,
    options?: TestGatewayOptions & { pool?: Pool; url?: string },
  ): Promise<TestGateway>;
  /** Runs a gateway process on the fixture's database (spawnGateway); killed after the file's tests. */
  spawn(spec?: ProxyGateway, env?: Record<string, string>, databaseUrl?: string): Promise<GatewayProcess>;
  /**
   * Something to close after the file's tests once the gateways are stopped, before the origin
   * and the database go (a pool or relay the gateways used); the last registered runs first.
   */
  onClose(close: () => unknown): void;
}

/** Hooks may wait for a gateway to drain and flush: longer than a test's default 30 s. */
const FIXTURE_HOOK_MS = 60_000;

/**
 * A test database, an origin (startOrigin) and a gateway on port 0 for the whole test file:
 * started before its tests (after the file's beforeAll hooks declared earlier, so `spec` may be a
 * function of what they opened), stopped after them. Read the fields inside tests.
 */
export function useTestGateway(
  options: TestGatewayOptions & {
    /** Default gatewaySpec('basic'). */
    spec?: ProxyGateway | (() => ProxyGateway);
    /** false: the database and the origin only; the tests start their gateways (start, spawn). */
    gateway?: false;
  } = {},
): GatewayFixture {
  const { spec, gateway, ...startOptions } = options;
  const gateways: TestGateway[] = [];
  const processes: GatewayProcess[] = [];
  const closers: (() => unknown)[] = [];
  const fixture: GatewayFixture = {
    db: undefined as unknown as TestDatabase,
    origin: undefined as unknown as Origin,
    gateway: undefined as unknown as TestGateway,
    async start(gatewaySpec = basicSpec(), { pool, url, ...opts } = {}) {
      const started = await startTestGateway(
        pool ?? fixture.db.pool,
        url ?? fixture.db.url,
        gatewaySpec,
        opts,
      );
      gateways.push(started);
      return started;
    },
    async spawn(gatewaySpec = basicSpec(), env = {}, databaseUrl = fixture.db.url) {
      const started = await spawnGateway(databaseUrl, gatewaySpec, env);
      processes.push(started);
      return started;
    },
    onClose(close) {
      closers.push(close);
    },
  };
  jestHooks().beforeAll(async () => {
    fixture.db = await createTestDatabase();
    fixture.origin = await startOrigin();
    if (gateway === false) return;
    fixture.gateway = await fixture.start(typeof spec === 'function' ? spec() : spec, startOptions);
  }, FIXTURE_HOOK_MS);
  jestHooks().afterAll(async () => {
    await Promise.all(gateways.map((g) => g.close()));
    await Promise.all(processes.map((p) => p.stop('SIGKILL')));
    for (const close of closers.reverse()) await close();
    await fixture.origin?.close();
    await fixture.db?.drop();
  }, FIXTURE_HOOK_MS);
  return fixture;
}

const basicSpec = () => gatewaySpec('basic');

/** Waits until gateways have applied every change so far (new accounts become usable then). */
export async function cacheSynced(
  pool: Pool,
  gateways: number | { cacheVersion(): number }[],
): Promise<void> {
  const head = await changeLogHead(pool);
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (typeof gateways === 'number') {
      const acks = await pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM cache_acks WHERE component = 'gateway' AND version >= $1`,
        [head],
      );
      if (acks.rows[0]!.n >= gateways) return;
    } else if (gateways.every((g) => g.cacheVersion() >= head)) {
      return;
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`gateways did not apply change ${head} within 10 s`);
}
