// A process-level fleet on one machine, the closest thing to a cluster that runs here: 2 API
// processes, 3 gateway processes of plan basic and 1 of plan advanced, the worker, HAProxy in
// front of the gateways (TCP) and of the APIs (HTTP) the way a Service spreads connections, a
// local HTTP and TLS origin (origin.localhost), and Prometheus scraping every process every
// second. One fresh database per fleet: on DATABASE_URL's server, or an embedded one; with
// `pgbouncer`, every process reaches it through PgBouncer (transaction pool for the queries, session
// pool for LISTEN and the leader lock: docs/adr/0068), which repointDatabase() moves to another
// server as a failover does.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { chmod, mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '#common/db/embedded.ts';
import { migrate } from '#common/db/migrate.ts';
import { DEFAULT_QUERY_TIMEOUT_MS, statementTimeoutFor } from '#common/db/pool.ts';
import { createLogger } from '#common/logger.ts';
import { startProxyfleetBouncer, type PgBouncer } from '#test/pgbouncer.ts';
import { startOrigin, type Origin } from './origin.ts';

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const RULES_FILE = path.join(REPO_ROOT, 'charts/proxyfleet/files/proxyfleet.rules.yaml');

/** Every port is FLEET_BASE_PORT plus an offset (docs/loadtest.md has the table). */
export function fleetPorts(base: number) {
  return {
    api: base, // HAProxy, HTTP, in front of the two APIs
    apis: [base + 1, base + 2],
    basic: base + 10, // HAProxy, TCP, in front of the three basic gateways
    basicGateways: [base + 11, base + 12, base + 13],
    advanced: base + 20, // HAProxy, TCP, in front of the advanced gateway
    advancedGateways: [base + 21],
    gatewayHealth: [base + 31, base + 32, base + 33, base + 34],
    workerHealth: base + 35,
    relay: base + 36, // the change relay's stream (ws://127.0.0.1:<relay>/changes)
    relayHealth: base + 37,
    originHttp: base + 40,
    originHttps: base + 43,
    prometheus: base + 90,
  };
}
type FleetPorts = ReturnType<typeof fleetPorts>;

/** The exits of every gateway: one source address each, so the origin sees which one was used. */
const EXITS = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'];

export interface FleetOptions {
  basePort: number;
  /** A server to create the fleet's database on; unset: an embedded PostgreSQL in `dir`. */
  databaseUrl?: string | undefined;
  /** Run directory: configs, logs, Prometheus data. */
  dir: string;
  logLevel?: string;
  /** Called with a line for each step (the CLI prints them). */
  onStep?: (line: string) => void;
  /** Every process through PgBouncer (transaction and session pools) instead of directly. */
  pgbouncer?: boolean;
  /** Database connections per process (PROXYFLEET_DB_POOL_SIZE; default 5). */
  poolSize?: number;
  /**
   * The APIs and gateways take their changes from a change relay (docs/adr/0105), as `npm start`
   * and the chart run them (default); false: each process LISTENs itself.
   */
  relay?: boolean;
}

interface Member {
  name: string;
  kind: 'relay' | 'api' | 'gateway' | 'worker' | 'haproxy' | 'prometheus';
  command: string;
  args: string[];
  env: Record<string, string>;
  ready: () => Promise<boolean>;
  child?: ChildProcess;
  exited?: Promise<void>;
}

export interface Fleet {
  ports: FleetPorts;
  dir: string;
  /** The fleet's database, directly (the runner's own queries). */
  databaseUrl: string;
  /** The PgBouncer in front of it (with `pgbouncer`). */
  pgbouncer: PgBouncer | undefined;
  /**
   * Moves the fleet to another server holding its database (a promoted replica): PgBouncer is
   * re-pointed (RELOAD, then RECONNECT), and databaseUrl and the final drop follow.
   */
  repointDatabase(server: { host: string; port: number }): Promise<void>;
  adminToken: string;
  apiUrl: string;
  prometheusUrl: string;
  origin: Origin;
  /** Names of the member processes, e.g. gateway-basic-1. */
  members(): string[];
  pids(): number[];
  /** Sends a signal to one member and waits for it to exit. */
  kill(name: string, signal: NodeJS.Signals): Promise<void>;
  /** Starts a member that exited again and waits until it is ready. */
  restart(name: string): Promise<void>;
  stop(): Promise<void>;
}

const node = process.execPath;
const nodeArgs = ['--disable-warning=ExperimentalWarning'];

async function httpOk(url: string): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    await res.arrayBuffer();
    return res.ok;
  } catch {
    return false;
  }
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${what} not ready within ${timeoutMs} ms`);
}

function gatewayYaml(plan: 'basic' | 'advanced', port: number): string {
  const exits = EXITS.map(
    (address, i) => `    - name: exit-${i + 1}\n      country: '*'\n      sourceAddress: ${address}`,
  ).join('\n');
  return `apiVersion: proxyfleet.io/v1alpha1
kind: ProxyGateway
metadata:
  name: ${plan}
spec:
  plan: ${plan}
  port: ${port}
  advertisedHost: 127.0.0.1
  exits:
${exits}
`;
}

// Like a Kubernetes Service, HAProxy sends traffic to a process only while its /readyz answers 200.
function haproxyConfig(ports: FleetPorts): string {
  const servers = (list: number[], check: string) =>
    list.map((p, i) => `    server s${i + 1} 127.0.0.1:${p} ${check}`).join('\n');
  return `global
    maxconn 4096
defaults
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout tunnel 60s
frontend api
    mode http
    bind 127.0.0.1:${ports.api}
    default_backend apis
backend apis
    mode http
    balance roundrobin
    option httpchk GET /readyz
${servers(ports.apis, 'check inter 1s fall 2 rise 1')}
frontend basic
    mode tcp
    bind 127.0.0.1:${ports.basic}
    default_backend basic
backend basic
    mode tcp
    balance roundrobin
    option httpchk GET /readyz
${ports.basicGateways.map((p, i) => `    server s${i + 1} 127.0.0.1:${p} check port ${ports.gatewayHealth[i]} inter 1s fall 2 rise 1`).join('\n')}
frontend advanced
    mode tcp
    bind 127.0.0.1:${ports.advanced}
    default_backend advanced
backend advanced
    mode tcp
    option httpchk GET /readyz
${ports.advancedGateways.map((p, i) => `    server s${i + 1} 127.0.0.1:${p} check port ${ports.gatewayHealth[3 + i]} inter 1s fall 2 rise 1`).join('\n')}
`;
}

function prometheusConfig(ports: FleetPorts): string {
  const job = (name: string, targets: { port: number; instance: string }[]) =>
    `  - job_name: ${name}\n    static_configs:\n` +
    targets
      .map(
        (t) => `      - targets: ['127.0.0.1:${t.port}']\n        labels: { instance_name: '${t.instance}' }`,
      )
      .join('\n');
  return `global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - ${RULES_FILE}
scrape_configs:
${job(
  'proxyfleet-api',
  ports.apis.map((port, i) => ({ port, instance: `api-${i + 1}` })),
)}
${job('proxyfleet-gateway', [
  ...ports.gatewayHealth.slice(0, 3).map((port, i) => ({ port, instance: `gateway-basic-${i + 1}` })),
  { port: ports.gatewayHealth[3]!, instance: 'gateway-advanced-1' },
])}
${job('proxyfleet-worker', [{ port: ports.workerHealth, instance: 'worker' }])}
${job('proxyfleet-relay', [{ port: ports.relayHealth, instance: 'relay' }])}
`;
}

function makeCert(dir: string): { key: string; cert: string } {
  const key = path.join(dir, 'origin-key.pem');
  const cert = path.join(dir, 'origin-cert.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-subj',
      '/CN=origin.localhost',
      '-addext',
      'subjectAltName=DNS:origin.localhost',
      '-days',
      '2',
      '-keyout',
      key,
      '-out',
      cert,
    ],
    { stdio: 'ignore' },
  );
  return { key, cert };
}

export async function startFleet(options: FleetOptions): Promise<Fleet> {
  const step = options.onStep ?? (() => undefined);
  const ports = fleetPorts(options.basePort);
  const dir = path.resolve(options.dir);
  const logs = path.join(dir, 'logs');
  await mkdir(logs, { recursive: true });
  // As root, an embedded server runs as the 'postgres' user, which must pass through this
  // directory (mkdtemp makes it 0700).
  if (process.getuid?.() === 0) await chmod(dir, 0o711);
  const logger = createLogger('fleet', 'warn');
  const members: Member[] = [];
  let embedded: EmbeddedDatabase | undefined;
  let dropDatabase: (() => Promise<void>) | undefined;
  let serverUrl = options.databaseUrl;
  let bouncer: PgBouncer | undefined;
  let origin: Origin | undefined;
  let stopped = false;

  const stopMember = async (m: Member, signal: NodeJS.Signals = 'SIGTERM') => {
    const child = m.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await m.exited;
    clearTimeout(timer);
  };

  const stop = async () => {
    if (stopped) return;
    stopped = true;
    // The proxies first (no new traffic), then the processes that serve it, Prometheus last.
    const order: Member['kind'][] = ['haproxy', 'gateway', 'api', 'worker', 'relay', 'prometheus'];
    for (const kind of order)
      await Promise.all(members.filter((m) => m.kind === kind).map((m) => stopMember(m)));
    // Each step even when one before failed (Ctrl-C also reaches an embedded server directly).
    const attempt = async (what: string, step: (() => Promise<void>) | undefined) => {
      try {
        await step?.();
      } catch (err) {
        logger.warn({ err }, `fleet: ${what} failed while stopping`);
      }
    };
    await attempt('closing the origin', origin && (() => origin!.close()));
    await attempt('stopping PgBouncer', bouncer && (() => bouncer!.stop()));
    await attempt('dropping the database', dropDatabase);
    await attempt('stopping the embedded database', embedded && (() => embedded!.stop()));
  };

  const launch = (m: Member) => {
    const out = createWriteStream(path.join(logs, `${m.name}.log`), { flags: 'a' });
    const child = spawn(m.command, m.args, {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? dir, ...m.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.pipe(out, { end: false });
    child.stderr.pipe(out, { end: false });
    m.child = child;
    // A command that cannot start (ENOENT) emits 'error' and no 'exit': the start-up then fails
    // naming it and stops every member already running, instead of an unhandled error.
    m.exited = new Promise((resolve) => {
      child.once('exit', () => resolve());
      child.once('error', (err) => {
        out.write(`cannot start ${m.command}: ${err.message}\n`);
        resolve();
      });
    });
    void m.exited.then(() => out.end());
  };

  try {
    // The database: a fresh one per fleet, dropped at stop.
    let databaseUrl: string;
    if (options.databaseUrl) {
      const name = `proxyfleet_fleet_${Date.now()}_${process.pid}`;
      const admin = new pg.Client({ connectionString: options.databaseUrl });
      await admin.connect();
      await admin.query(`CREATE DATABASE ${name}`);
      await admin.end();
      const url = new URL(options.databaseUrl);
      url.pathname = `/${name}`;
      databaseUrl = url.toString();
      dropDatabase = async () => {
        const c = new pg.Client({ connectionString: serverUrl });
        await c.connect();
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await c.end();
      };
    } else {
      embedded = await startEmbeddedPostgres(path.join(dir, 'db'), logger);
      databaseUrl = embedded.url;
    }
    await migrate(databaseUrl);
    step(`database ready (${options.databaseUrl ? 'fresh database on DATABASE_URL' : 'embedded'})`);
    let connection: Record<string, string> = { DATABASE_URL: databaseUrl };
    if (options.pgbouncer) {
      const bouncerDir = path.join(dir, 'pgbouncer');
      await mkdir(bouncerDir);
      const pgb = await startProxyfleetBouncer(databaseUrl, {
        statementTimeoutMs: statementTimeoutFor(DEFAULT_QUERY_TIMEOUT_MS),
        dir: bouncerDir,
      });
      bouncer = pgb.bouncer;
      connection = {
        DATABASE_URL: pgb.pooledUrl,
        PROXYFLEET_DATABASE_SESSION_URL: pgb.sessionUrl,
        PROXYFLEET_DB_POOLING: 'transaction',
      };
      step(`PgBouncer on 127.0.0.1:${bouncer.port} (transaction pool and session pool)`);
    }

    const cert = makeCert(dir);
    origin = await startOrigin({ httpPort: ports.originHttp, httpsPort: ports.originHttps, ...cert });

    const adminToken = randomBytes(24).toString('hex');
    const credentialsKey = randomBytes(32).toString('hex');
    const common = {
      ...connection,
      PROXYFLEET_LOG_LEVEL: options.logLevel ?? 'warn',
      PROXYFLEET_DB_POOL_SIZE: String(options.poolSize ?? 5),
    };
    const relayed = options.relay ?? true;
    // The processes that keep caches: through the relay, or each with its own LISTEN.
    const feed: Record<string, string> = relayed
      ? { PROXYFLEET_RELAY_URL: `ws://127.0.0.1:${ports.relay}/changes` }
      : {};
    if (relayed)
      members.push({
        name: 'relay',
        kind: 'relay',
        command: node,
        args: [...nodeArgs, 'relay/src/main.ts'],
        env: {
          ...common,
          PROXYFLEET_RELAY_HOST: '127.0.0.1',
          PROXYFLEET_RELAY_PORT: String(ports.relay),
          PROXYFLEET_HEALTH_HOST: '127.0.0.1',
          PROXYFLEET_HEALTH_PORT: String(ports.relayHealth),
        },
        ready: () => httpOk(`http://127.0.0.1:${ports.relayHealth}/readyz`),
      });
    await writeFile(path.join(dir, 'basic.yaml'), gatewayYaml('basic', ports.basicGateways[0]!));
    await writeFile(path.join(dir, 'advanced.yaml'), gatewayYaml('advanced', ports.advancedGateways[0]!));

    ports.apis.forEach((port, i) =>
      members.push({
        name: `api-${i + 1}`,
        kind: 'api',
        command: node,
        args: [...nodeArgs, 'api/src/main.ts'],
        env: {
          ...common,
          ...feed,
          PROXYFLEET_API_HOST: '127.0.0.1',
          PROXYFLEET_API_PORT: String(port),
          PROXYFLEET_ADMIN_TOKEN: adminToken,
          PROXYFLEET_CREDENTIALS_KEY: credentialsKey,
          PROXYFLEET_INSTANCE_ID: `api-${i + 1}`,
          // Every client of the fleet comes from 127.0.0.1 (HAProxy): the per-address limit of
          // failed authentications would turn one scenario's refusals into everyone's 429s.
          PROXYFLEET_AUTH_FAILURES_PER_MINUTE: '1000000',
          PROXYFLEET_AUTH_FAILURES_BURST: '1000000',
          PROXYFLEET_USAGE_REFRESH_SECONDS: '2',
        },
        ready: () => httpOk(`http://127.0.0.1:${port}/readyz`),
      }),
    );
    const gateway = (plan: 'basic' | 'advanced', index: number, port: number, health: number): Member => ({
      name: `gateway-${plan}-${index}`,
      kind: 'gateway',
      command: node,
      args: [...nodeArgs, 'gateway/src/main.ts'],
      env: {
        ...common,
        ...feed,
        PROXYFLEET_GATEWAY_CONFIG: path.join(dir, `${plan}.yaml`),
        PROXYFLEET_GATEWAY_HOST: '127.0.0.1',
        PROXYFLEET_GATEWAY_PORT: String(port),
        PROXYFLEET_GATEWAY_ID: `gateway-${plan}-${index}`,
        PROXYFLEET_GATEWAY_ALLOW_CIDRS: '127.0.0.0/8',
        // Every client of the fleet comes from 127.0.0.1: the revocation rounds' probes of old
        // passwords would otherwise back off that one address, and with it every customer.
        PROXYFLEET_GATEWAY_AUTH_FAILURES_PER_MINUTE: '1000000',
        PROXYFLEET_HEALTH_HOST: '127.0.0.1',
        PROXYFLEET_HEALTH_PORT: String(health),
      },
      ready: () => httpOk(`http://127.0.0.1:${health}/readyz`),
    });
    ports.basicGateways.forEach((port, i) =>
      members.push(gateway('basic', i + 1, port, ports.gatewayHealth[i]!)),
    );
    members.push(gateway('advanced', 1, ports.advancedGateways[0]!, ports.gatewayHealth[3]!));
    members.push({
      name: 'worker',
      kind: 'worker',
      command: node,
      args: [...nodeArgs, 'worker/src/main.ts'],
      env: {
        ...common,
        PROXYFLEET_HEALTH_HOST: '127.0.0.1',
        PROXYFLEET_HEALTH_PORT: String(ports.workerHealth),
      },
      ready: () => httpOk(`http://127.0.0.1:${ports.workerHealth}/healthz`),
    });
    await writeFile(path.join(dir, 'haproxy.cfg'), haproxyConfig(ports));
    members.push({
      name: 'haproxy',
      kind: 'haproxy',
      command: 'haproxy',
      args: ['-db', '-f', path.join(dir, 'haproxy.cfg')],
      env: {},
      ready: () => httpOk(`http://127.0.0.1:${ports.api}/healthz`),
    });
    await writeFile(path.join(dir, 'prometheus.yml'), prometheusConfig(ports));
    members.push({
      name: 'prometheus',
      kind: 'prometheus',
      command: 'prometheus',
      args: [
        `--config.file=${path.join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${path.join(dir, 'prometheus')}`,
        `--web.listen-address=127.0.0.1:${ports.prometheus}`,
        '--log.level=warn',
      ],
      env: {},
      ready: () => httpOk(`http://127.0.0.1:${ports.prometheus}/-/ready`),
    });

    // The relay, whose snapshot the others start from; the APIs (they race for nothing: the
    // schema is migrated), then everything else.
    for (const kind of ['relay', 'api', 'gateway', 'worker', 'haproxy', 'prometheus'] as const) {
      const batch = members.filter((m) => m.kind === kind);
      if (batch.length === 0) continue;
      batch.forEach(launch);
      await Promise.all(
        batch.map((m) =>
          Promise.race([
            waitFor(m.name, m.ready, 60_000),
            m.exited!.then(() => {
              throw new Error(`${m.name} exited at start; see ${path.join(logs, `${m.name}.log`)}`);
            }),
          ]),
        ),
      );
      step(`${batch.map((m) => m.name).join(', ')} ready`);
    }

    const byName = (name: string) => {
      const m = members.find((x) => x.name === name);
      if (!m) throw new Error(`no fleet member ${name}`);
      return m;
    };
    const fleet: Fleet = {
      ports,
      dir,
      databaseUrl,
      pgbouncer: bouncer,
      async repointDatabase(server) {
        const move = (url: string) => {
          const u = new URL(url);
          u.host = `${server.host}:${server.port}`;
          return u.toString();
        };
        fleet.databaseUrl = move(fleet.databaseUrl);
        if (serverUrl) serverUrl = move(serverUrl);
        await bouncer?.repoint(server);
      },
      adminToken,
      apiUrl: `http://127.0.0.1:${ports.api}`,
      prometheusUrl: `http://127.0.0.1:${ports.prometheus}`,
      origin,
      members: () => members.map((m) => m.name),
      pids: () =>
        members.flatMap((m) =>
          m.child?.pid !== undefined && m.child.exitCode === null && m.child.signalCode === null
            ? [m.child.pid]
            : [],
        ),
      kill: (name, signal) => stopMember(byName(name), signal),
      async restart(name) {
        const m = byName(name);
        launch(m);
        await waitFor(m.name, m.ready, 60_000);
      },
      stop,
    };
    return fleet;
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Removes a run directory (the CLI keeps it when asked). */
export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}
