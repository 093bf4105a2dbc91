// What the proxy benchmarks share: child processes (started, awaited until ready, stopped), the
// gateway as a target, a process's CPU seconds from /proc and a measured window, a keep-alive
// request loop, medians and percentiles, and a scratch database with one
// account holding bandwidth (DATABASE_URL: a server to create it on; unset: an embedded
// PostgreSQL in the bench's temporary directory).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import pg from 'pg';
import { stringify } from 'yaml';
import { createAccount } from '#common/accounts/accounts.ts';
import { recordPurchase } from '#common/billing/purchases.ts';
import { startEmbeddedPostgres } from '#common/db/embedded.ts';
import { migrate } from '#common/db/migrate.ts';
import { createPool } from '#common/db/pool.ts';
import type { Logger } from '#common/logger.ts';

const ROOT = path.resolve(import.meta.dirname, '..');

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The node processes a bench started (stopped at its end, killed on SIGINT). */
export const children: ChildProcess[] = [];

/** Runs `node args...` from the repository root; resolves when its output matches `ready`. */
export function startProcess(
  args: string[],
  env: Record<string, string>,
  ready: RegExp,
  cwd = ROOT,
): Promise<{ child: ChildProcess; match: RegExpExecArray }> {
  const child = spawn(process.execPath, args, {
    cwd,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const m = ready.exec(out);
      if (m) {
        child.stdout.off('data', onData);
        child.stdout.resume();
        resolve({ child, match: m });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}: ${out.slice(-2000)}`)));
  });
}

export const stopChild = (child: ChildProcess) =>
  new Promise<void>((r) => {
    if (child.exitCode !== null || child.signalCode !== null) return r();
    child.once('exit', () => r());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 15_000).unref();
  });

/** CPU seconds (user + system) a process (or, with `thread`, one of its threads) has used so far; 0 without a pid. */
export async function cpuSeconds(pid: number | undefined, thread?: number): Promise<number> {
  if (pid === undefined) return 0;
  const stat = await readFile(
    thread === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${thread}/stat`,
    'utf8',
  );
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of stat(5), in clock ticks (100 per second here).
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * Waits `warmupMs`, then measures for `seconds` (`setMeasuring` turns the load's counting on and
 * off): the seconds measured and the CPU seconds the process `pid` used in them, all threads and
 * its main thread's alone (the rest is V8's GC helpers and libuv's pool, which CPU profiles do
 * not see).
 */
export async function measureWindow(
  warmupMs: number,
  seconds: number,
  setMeasuring: (on: boolean) => void,
  pid: number | undefined,
): Promise<{ seconds: number; cpu: number; cpuMain: number }> {
  await sleep(warmupMs);
  const cpuBefore = await cpuSeconds(pid);
  const mainBefore = await cpuSeconds(pid, pid);
  setMeasuring(true);
  const started = performance.now();
  await sleep(seconds * 1000);
  setMeasuring(false);
  const elapsed = (performance.now() - started) / 1000;
  return {
    seconds: elapsed,
    cpu: (await cpuSeconds(pid)) - cpuBefore,
    cpuMain: (await cpuSeconds(pid, pid)) - mainBefore,
  };
}

export function median(values: number[]): number {
  if (!values.length) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function p99(latencies: number[]): number {
  if (!latencies.length) return NaN;
  const sorted = Float64Array.from(latencies).sort();
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)]!;
}

let reportedRefusal = false;

/**
 * Reads HTTP/1.1 responses with Content-Length off a socket (or a TLS session), calling back at
 * each end with the body's size. The first answer other than 200 is printed once.
 */
function responseReader(socket: Readable, onResponse: (bodyBytes: number) => void): void {
  let headBuf: Buffer | undefined;
  let remaining = -1;
  let bodyBytes = 0;
  socket.on('data', (chunk: Buffer) => {
    let offset = 0;
    while (offset < chunk.length) {
      if (remaining < 0) {
        const piece = chunk.subarray(offset);
        const buf = headBuf ? Buffer.concat([headBuf, piece]) : piece;
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) {
          headBuf = Buffer.from(buf);
          offset = chunk.length;
          continue;
        }
        const headText = buf.toString('latin1', 0, end);
        if (!headText.startsWith('HTTP/1.1 200') && !reportedRefusal) {
          reportedRefusal = true;
          process.stderr.write(`unexpected response: ${headText.slice(0, 300)}\n`);
        }
        const cl = /content-length:\s*(\d+)/i.exec(headText);
        if (!cl) throw new Error(`response without content-length: ${buf.toString('latin1', 0, 200)}`);
        offset += end + 4 - (headBuf ? headBuf.length : 0);
        headBuf = undefined;
        remaining = bodyBytes = Number(cl[1]);
      }
      const take = Math.min(remaining, chunk.length - offset);
      remaining -= take;
      offset += take;
      if (remaining === 0) {
        remaining = -1;
        onResponse(bodyBytes);
      }
    }
  });
}

/** What a request loop counts while measuring, and the errors it saw at any time. */
export interface RequestCounts {
  count: number;
  bodyBytes: number;
  latencies: number[];
  errors: number;
}

/**
 * Keep-alive load: each socket sends `request`, then again at the end of each response, until
 * stopped. While `measuring(true)`, each response is counted in `result` with its latency. Errors
 * count always, and so does a connection the proxy closes before `stop()` (a refusal, a budget cut).
 */
export function requestLoop(
  sockets: (Readable & { write(b: Buffer): unknown; destroy(): unknown })[],
  request: Buffer,
  result: RequestCounts,
): { measuring: (on: boolean) => void; stop: () => void } {
  let measuring = false;
  let running = true;
  for (const socket of sockets) {
    let sentAt = 0;
    socket.on('error', () => result.errors++);
    socket.on('close', () => {
      if (running) result.errors++;
    });
    responseReader(socket, (bytes) => {
      if (measuring) {
        result.count++;
        result.bodyBytes += bytes;
        result.latencies.push(performance.now() - sentAt);
      }
      if (!running) return;
      sentAt = performance.now();
      socket.write(request);
    });
    sentAt = performance.now();
    socket.write(request);
  }
  return {
    measuring: (on) => (measuring = on),
    stop: () => {
      running = false;
      for (const s of sockets) s.destroy();
    },
  };
}

/**
 * The gateway entrypoint as a bench target: one basic ProxyGateway (direct egress, no per-account
 * connection cap to speak of) on a free loopback port, logging at info, on `databaseUrl`; `env`
 * adds to or overrides the environment, `nodeArgs` go before the script.
 */
export async function startBenchGateway(
  dir: string,
  databaseUrl: string,
  label: string,
  env: Record<string, string> = {},
  nodeArgs: readonly string[] = [],
  cwd = ROOT,
): Promise<{ child: ChildProcess; port: number }> {
  const file = path.join(dir, 'gateway.yaml');
  await writeFile(
    file,
    stringify({
      apiVersion: 'proxyfleet.io/v1alpha1',
      kind: 'ProxyGateway',
      metadata: { name: 'bench' },
      spec: {
        plan: 'basic',
        port: 12321,
        advertisedHost: '127.0.0.1',
        exits: [{ name: 'direct', country: '*' }],
        // The idle phase holds 6,000 tunnels of one account (default cap 1,000).
        limits: { maxConnectionsPerAccount: 100_000 },
      },
    }),
  );
  const { child, match } = await startProcess(
    [...nodeArgs, 'gateway/src/main.ts'],
    {
      DATABASE_URL: databaseUrl,
      PROXYFLEET_GATEWAY_CONFIG: file,
      PROXYFLEET_GATEWAY_PORT: '0',
      PROXYFLEET_GATEWAY_HOST: '127.0.0.1',
      PROXYFLEET_GATEWAY_ALLOW_CIDRS: '127.0.0.0/8',
      PROXYFLEET_GATEWAY_ID: `bench-${label}-${randomBytes(3).toString('hex')}`,
      PROXYFLEET_HEALTH_PORT: '0',
      PROXYFLEET_HEALTH_HOST: '127.0.0.1',
      PROXYFLEET_LOG_LEVEL: 'info',
      PROXYFLEET_SHUTDOWN_GRACE_SECONDS: '8',
      ...env,
    },
    /"port":(\d+)[^\n]*"msg":"gateway listening"/,
    cwd,
  );
  return { child, port: Number(match[1]) };
}

export interface BenchDatabase {
  url: string;
  /** Basic credentials of an account with 10 TB of basic bandwidth. */
  user: string;
  pass: string;
  auth: string;
  drop(): Promise<void>;
}

/** A migrated scratch database with one account that has basic bandwidth. */
export async function benchDatabase(dir: string, logger: Logger): Promise<BenchDatabase> {
  let url: string;
  let drop: () => Promise<void>;
  if (process.env.DATABASE_URL) {
    const name = `gateway_bench_${randomBytes(4).toString('hex')}`;
    const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    const u = new URL(process.env.DATABASE_URL);
    u.pathname = `/${name}`;
    url = u.toString();
    drop = async () => {
      const c = new pg.Client({ connectionString: process.env.DATABASE_URL });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    };
  } else {
    const embedded = await startEmbeddedPostgres(path.join(dir, 'pg'), logger);
    url = embedded.url;
    drop = () => embedded.stop();
  }
  await migrate(url);
  const pool = createPool({ url, max: 2, applicationName: 'bench', logger });
  const account = await createAccount(
    pool,
    { email: `bench-${randomBytes(3).toString('hex')}@example.test` },
    randomBytes(32),
  );
  await recordPurchase(pool, { accountId: account.id, product: 'basic', bytes: 10 ** 13 });
  await pool.end();
  const user = account.proxyUsername;
  const pass = account.proxyPassword;
  return { url, user, pass, auth: `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`, drop };
}
