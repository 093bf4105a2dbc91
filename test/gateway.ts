// Test harness for the gateway's integration tests: a local origin that echoes the peer address,
// a gateway on port 0 over a test database (useTestGateway: both for a whole test file), and
// clients that measure the exact bytes they moved.
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { Health } from '#common/health.ts';
import { createLogger } from '#common/logger.ts';
import type { Pool } from '#common/db/pool.ts';
import { changeLogHead } from '#common/db/changes.ts';
import { startGateway, type RunningGateway } from '../gateway/src/server.ts';
import { proxyGatewaySchema, type ExitSpec, type Plan, type ProxyGateway } from '../gateway/src/spec.ts';
import { createTestDatabase, type TestDatabase } from './db.ts';
import { jestHooks } from './hooks.ts';
import { nodeUpstream } from './node-upstream.ts';

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
}

export type TestGateway = RunningGateway & { registry: Registry };

export async function startTestGateway(
  pool: Pool,
  url: string,
  gateway: ProxyGateway,
  options: TestGatewayOptions = {},
): Promise<TestGateway> {
  const registry = new Registry();
  const oracle = options.upstreamClient === 'node' ? nodeUpstream() : undefined;
  const running = await startGateway({
    gateway,
    port: 0,
    host: '127.0.0.1',
    gatewayId: options.gatewayId ?? `test-${Math.random().toString(36).slice(2, 8)}`,
    allowCidrs: options.allowCidrs ?? ['127.0.0.0/8'],
    pool,
    databaseUrl: url,
    logger: createLogger('test', 'silent'),
    registry,
    health: new Health([registry]),
    drainMs: options.drainMs ?? 2_000,
    ...(options.limits ? { limits: options.limits } : {}),
    ...(options.connectFastPath === false ? { connectFastPath: false } : {}),
    ...(oracle ? { upstreamClient: oracle.send } : {}),
    ...(options.fleetSize ? { fleetSize: options.fleetSize } : {}),
    ...(options.targets ? { targets: options.targets } : {}),
  });
  if (!oracle) return { ...running, registry };
  return {
    ...running,
    registry,
    close: async () => {
      await running.close();
      oracle.close();
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

export const basicAuth = (user: string, pass: string) =>
  `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;

export interface Exchange {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/**
 * Sends raw requests over ONE connection to the proxy and reads the answers; returns them with
 * the exact bytes the client wrote and read on that connection.
 */
export async function rawExchange(
  proxyPort: number,
  requests: string[],
  options: { sourceAddress?: string } = {},
): Promise<{ responses: Exchange[]; written: number; read: number }> {
  const socket = net.connect({
    port: proxyPort,
    host: '127.0.0.1',
    ...(options.sourceAddress ? { localAddress: options.sourceAddress } : {}),
  });
  socket.on('error', () => undefined);
  await new Promise<void>((r, j) => {
    socket.once('connect', () => r());
    socket.once('error', j);
  });
  const responses: Exchange[] = [];
  let buffer = Buffer.alloc(0);
  const waitFor = async (pred: () => boolean) => {
    while (!pred()) {
      if (socket.destroyed && !socket.readableLength)
        throw new Error(`connection closed; got ${buffer.toString('latin1').slice(0, 200)}`);
      await new Promise<void>((r) => {
        const done = () => {
          socket.off('data', onData);
          socket.off('close', done);
          r();
        };
        const onData = (chunk: Buffer) => {
          buffer = Buffer.concat([buffer, chunk]);
          done();
        };
        socket.on('data', onData);
        socket.on('close', done);
      });
    }
  };
  for (const request of requests) {
    socket.write(request);
    await waitFor(() => buffer.indexOf('\r\n\r\n') >= 0);
    const end = buffer.indexOf('\r\n\r\n');
    const head = buffer.subarray(0, end).toString('latin1').split('\r\n');
    const status = Number(head[0]!.split(' ')[1]);
    const headers: http.IncomingHttpHeaders = {};
    for (const line of head.slice(1)) {
      const i = line.indexOf(':');
      headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
    }
    buffer = buffer.subarray(end + 4);
    let body: Buffer;
    if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      await waitFor(() => buffer.length >= n || socket.destroyed);
      body = buffer.subarray(0, n);
      buffer = buffer.subarray(n);
    } else if (headers['transfer-encoding'] === 'chunked') {
      await waitFor(() => buffer.indexOf('0\r\n\r\n') >= 0);
      body = dechunk(buffer.subarray(0, buffer.indexOf('0\r\n\r\n') + 5));
      buffer = buffer.subarray(buffer.indexOf('0\r\n\r\n') + 5);
    } else {
      body = Buffer.alloc(0);
    }
    responses.push({ status, headers, body });
    if (headers.connection === 'close') break;
  }
  await new Promise((r) => setImmediate(r));
  const result = { responses, written: socket.bytesWritten, read: socket.bytesRead };
  socket.destroy();
  await new Promise((r) => setTimeout(r, 20));
  return result;
}

function dechunk(data: Buffer): Buffer {
  const out: Buffer[] = [];
  let i = 0;
  while (i < data.length) {
    const eol = data.indexOf('\r\n', i);
    const size = parseInt(data.subarray(i, eol).toString('latin1'), 16);
    if (!size) break;
    out.push(data.subarray(eol + 2, eol + 2 + size));
    i = eol + 2 + size + 2;
  }
  return Buffer.concat(out);
}

export const get = (url: string, auth?: string, extra = '') =>
  `GET ${url} HTTP/1.1\r\nHost: ${new URL(url).host}\r\n${auth ? `Proxy-Authorization: ${auth}\r\n` : ''}${extra}\r\n`;

/** Opens a CONNECT tunnel; resolves with the socket after the 200, or the refusal status. */
export async function openTunnel(
  proxyPort: number,
  authority: string,
  auth?: string,
): Promise<{ status: number; socket: net.Socket; headers: string; leftover: Buffer }> {
  const socket = net.connect({ port: proxyPort, host: '127.0.0.1' });
  socket.on('error', () => undefined);
  socket.write(
    `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${auth ? `Proxy-Authorization: ${auth}\r\n` : ''}\r\n`,
  );
  let buffer = Buffer.alloc(0);
  await new Promise<void>((resolve) => {
    const onData = (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      if (buffer.indexOf('\r\n\r\n') >= 0) {
        socket.off('data', onData);
        resolve();
      }
    };
    socket.on('data', onData);
    socket.once('close', () => resolve());
  });
  const end = buffer.indexOf('\r\n\r\n');
  const headers = buffer.subarray(0, Math.max(0, end)).toString('latin1');
  return { status: Number(headers.split(' ')[1] ?? 0), socket, headers, leftover: buffer.subarray(end + 4) };
}

/**
 * One download of `bytes` from the origin through a gateway on a fresh connection: its status, or
 * -1 when the answer was cut short or never came.
 */
export function download(
  proxyPort: number,
  originPort: number,
  auth: string,
  bytes: number,
): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request({
      host: '127.0.0.1',
      port: proxyPort,
      path: `http://127.0.0.1:${originPort}/bytes/${bytes}`,
      headers: { 'proxy-authorization': auth },
      agent: false,
    });
    req.on('response', (res) => {
      let n = 0;
      res.on('data', (c: Buffer) => (n += c.length));
      res.on('end', () => resolve(res.statusCode === 200 && n < bytes ? -1 : (res.statusCode ?? -1)));
      res.on('error', () => resolve(-1));
      res.on('aborted', () => resolve(-1));
    });
    req.on('error', () => resolve(-1));
    req.end();
  });
}

/** Billed bytes and requests recorded in usage batches for an account (flushed, unfolded or not). */
export async function recordedUsage(
  pool: Pool,
  accountId: string,
): Promise<{ up: number; down: number; requests: number }> {
  const { rows } = await pool.query<{ up: number; down: number; requests: number }>(
    `SELECT coalesce(sum(bytes_up), 0)::bigint AS up, coalesce(sum(bytes_down), 0)::bigint AS down, coalesce(sum(requests), 0)::bigint AS requests
       FROM usage_batch_lines WHERE account_id = $1`,
    [accountId],
  );
  return rows[0]!;
}

/** A gateway's usage as written by its next flush (flushes first). */
export async function flushedUsage(
  gateway: { ledger: RunningGateway['ledger'] },
  pool: Pool,
  accountId: string,
): Promise<{ up: number; down: number; requests: number }> {
  await gateway.ledger.flush();
  return recordedUsage(pool, accountId);
}

/**
 * A closed connection's usage, once the gateway has billed it: flushes until at least `up` bytes
 * up are recorded (the gateway bills a connection when it sees the close), at most about 1 s.
 */
export async function usageAfterClose(
  gateway: { ledger: RunningGateway['ledger'] },
  pool: Pool,
  accountId: string,
  up: number,
): Promise<{ up: number; down: number; requests: number }> {
  for (let i = 0; i < 50 && Number((await flushedUsage(gateway, pool, accountId)).up) < up; i++)
    await new Promise((r) => setTimeout(r, 20));
  return flushedUsage(gateway, pool, accountId);
}

/**
 * The non-zero series of a gateway counter, keyed by their labels after `plan` joined by spaces
 * (`proxyfleet_gateway_refusals_total`: "wrong_password 4xx").
 */
export async function counterValues(
  gateway: { registry: Registry },
  name: string,
): Promise<Record<string, number>> {
  return Object.fromEntries(
    (await gateway.registry.getSingleMetric(name)!.get()).values
      .filter((v) => v.value > 0)
      .map((v) => [Object.values(v.labels).slice(1).join(' '), v.value]),
  );
}

/** What changed in a set of counter values between two readings. */
export function counterDelta(
  now: Record<string, number>,
  then: Record<string, number>,
): Record<string, number> {
  return Object.fromEntries(
    Object.entries(now)
      .filter(([k, v]) => v !== (then[k] ?? 0))
      .map(([k, v]) => [k, v - (then[k] ?? 0)]),
  );
}

export async function fold(pool: Pool): Promise<void> {
  while (((await pool.query<{ n: number }>('SELECT usage_fold(1000) AS n')).rows[0]?.n ?? 0) > 0);
}

export interface GatewayProcess {
  port: number;
  /** Sends a signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  output(): string;
}

/** Runs gateway/src/main.ts as its own process (a pod), on a free port; resolves once it listens. */
export async function spawnGateway(
  databaseUrl: string,
  gateway: ProxyGateway,
  env: Record<string, string> = {},
): Promise<GatewayProcess> {
  const { spawn } = await import('node:child_process');
  const { mkdtemp, writeFile } = await import('node:fs/promises');
  const { tmpdir } = await import('node:os');
  const path = await import('node:path');
  const { stringify } = await import('yaml');
  const dir = await mkdtemp(path.join(tmpdir(), 'pf-gw-'));
  const file = path.join(dir, 'gateway.yaml');
  await writeFile(file, stringify(gateway));
  const child = spawn(process.execPath, [new URL('../gateway/src/main.ts', import.meta.url).pathname], {
    env: {
      PATH: process.env.PATH ?? '',
      DATABASE_URL: databaseUrl,
      PROXYFLEET_GATEWAY_CONFIG: file,
      PROXYFLEET_GATEWAY_PORT: '0',
      PROXYFLEET_GATEWAY_HOST: '127.0.0.1',
      PROXYFLEET_HEALTH_PORT: '0',
      PROXYFLEET_HEALTH_HOST: '127.0.0.1',
      PROXYFLEET_GATEWAY_ALLOW_CIDRS: '127.0.0.0/8',
      PROXYFLEET_DB_POOL_SIZE: '4',
      PROXYFLEET_DATA_DIR: dir,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const port = await new Promise<number>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const m = /"port":(\d+)[^\n]*"msg":"gateway listening"/.exec(out);
      if (m) resolve(Number(m[1]));
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    void exited.then((code) => reject(new Error(`gateway exited ${code}: ${out}`)));
    setTimeout(() => reject(new Error(`gateway did not start: ${out}`)), 20_000).unref();
  });
  return {
    port,
    output: () => out,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null) child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

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
