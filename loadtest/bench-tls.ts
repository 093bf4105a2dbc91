// `npm run bench:tls`: TLS to the proxy (docs/adr/0071), in one run, on this machine, against one
// local origin (loadtest/bench-origin.ts), side by side:
//   proxyfleet's gateway (everything on) with a certificate, the same process's port in clear
//   (the cost of TLS itself), proxy-chain over TLS (its serverType 'https', a node:https server)
//   and squid's https_port (squid-openssl) when installed;
// measuring, each with the proxy's own CPU (user + system from /proc/PID/stat) per unit of work:
//   handshake   new TCP connection, full TLS handshake (no session offered), close_notify, until
//               the proxy closed too: handshakes/s at 16 concurrent, µs CPU per handshake
//   resumed     the same offering a ticket from an earlier session (resumption: no certificate,
//               no signature): µs CPU per resumed handshake
//   keepalive   50 TLS connections, one 1 KiB GET after the other: req/s, p99, µs CPU per request
//   bulk        8 TLS connections, 1 MiB GETs: MiB/s, ms CPU per MiB
// The certificate is an ECDSA P-256 leaf of a throwaway CA (test/tls.ts); every client is node:tls
// (TLS 1.3, its default cipher order: AES-256-GCM first; key exchange X25519), trusting that CA. All proxies run side
// by side and take turns: BENCH_ROUNDS (default 3) rounds, rotating order, medians reported;
// BENCH_SECONDS (default 2) per measurement after a 1 s warm-up; BENCH_TARGETS and
// BENCH_SCENARIOS narrow a run, BENCH_PROFILE=1 writes CPU profiles of the node proxies to
// /tmp/pf-bench-prof. DATABASE_URL: a server for the scratch database (unset: embedded).
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { createLogger } from '#common/logger.ts';
import { createTestCa } from '#test/tls.ts';
import { raiseFileLimit } from '../gateway/src/proxy/limits.ts';
import { installed, SQUID, startSquid } from './bench-proxies.ts';
import {
  benchDatabase,
  children,
  measureWindow,
  median,
  p99,
  requestLoop,
  startBenchGateway,
  startProcess,
  stopChild,
} from './bench-support.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 2);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const WARMUP_MS = 1_000;
const HANDSHAKE_CONCURRENCY = 16;
const KEEPALIVE_CONNS = 50;
const BULK_CONNS = 8;
/** Waiting longer than this for a proxy to close after the handshake is an error. */
const CLOSE_WAIT_MS = 5_000;
const SCENARIOS = ['handshake', 'resumed', 'keepalive', 'bulk'] as const;
type Scenario = (typeof SCENARIOS)[number];
const logger = createLogger('bench', 'warn');
/** BENCH_PROFILE=1: the node proxies write CPU profiles (loadtest/profile-summary.ts reads them). */
const PROFILE = process.env.BENCH_PROFILE === '1' ? ['--cpu-prof', '--cpu-prof-dir=/tmp/pf-bench-prof'] : [];

interface Target {
  name: string;
  port: number;
  auth: string;
  pid: number | undefined;
  /** Whether the client speaks TLS to it (false: the gateway's port in clear, for reference). */
  tls: boolean;
  stop(): Promise<void>;
}

interface Sample {
  count: number;
  bodyBytes: number;
  latencies: number[];
  seconds: number;
  cpu: number;
  errors: number;
}

/** Warms up, then measures for SECONDS: the measured seconds and the proxy's CPU seconds in them. */
async function measure(setMeasuring: (on: boolean) => void, pid: number | undefined) {
  const { seconds, cpu } = await measureWindow(WARMUP_MS, SECONDS, setMeasuring, pid);
  return { seconds, cpu };
}

/** A TLS session to the proxy over a TCP socket with Nagle off, trusting the bench CA. */
function tlsClient(port: number, ca: Buffer, session?: Buffer): tls.TLSSocket {
  const tcp = net.connect({ port, host: '127.0.0.1', noDelay: true });
  const socket = tls.connect({
    socket: tcp,
    servername: 'localhost',
    ca,
    // X25519 only: node 24's OpenSSL would otherwise agree on the hybrid X25519MLKEM768 with the
    // node proxies, and squid's (Debian's OpenSSL 3.0) cannot: the same key exchange for all.
    ecdhCurve: 'X25519',
    ...(session ? { session } : {}),
  });
  // An error before the session existed is the TCP socket's: the session reports it too.
  tcp.on('error', () => undefined);
  return socket;
}

/** A connection to the proxy: a TLS session trusting the bench CA, or plain TCP. */
function open(target: Target, ca: Buffer, session?: Buffer): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = target.tls
      ? tlsClient(target.port, ca, session)
      : net.connect({ port: target.port, host: '127.0.0.1', noDelay: true });
    socket.once(target.tls ? 'secureConnect' : 'connect', () => resolve(socket));
    socket.once('error', reject);
  });
}

/**
 * HANDSHAKE_CONCURRENCY loops of: connect, handshake (offering `session` for the resumed
 * scenario), close_notify, and wait for the proxy to close its side (the handshake is then
 * complete on both sides, and nothing else was asked of the proxy).
 */
async function handshakes(target: Target, ca: Buffer, session: Buffer | undefined): Promise<Sample> {
  const result: Sample = { count: 0, bodyBytes: 0, latencies: [], seconds: 0, cpu: 0, errors: 0 };
  let measuring = false;
  let running = true;
  const once = () =>
    new Promise<void>((resolve) => {
      const started = performance.now();
      const socket = tlsClient(target.port, ca, session);
      let finished = false;
      const done = (ok: boolean) => {
        if (finished) return;
        finished = true;
        clearTimeout(timer);
        if (!ok) result.errors++;
        else if (measuring) {
          result.count++;
          result.latencies.push(performance.now() - started);
        }
        socket.destroy();
        resolve();
      };
      const timer = setTimeout(() => done(false), CLOSE_WAIT_MS);
      socket.once('secureConnect', () => {
        // A resumption the proxy declined is a full handshake: not what this scenario measures.
        if (session && !socket.isSessionReused()) return done(false);
        socket.on('data', () => undefined);
        socket.end();
      });
      socket.once('close', () => done(true));
      socket.once('error', () => done(false));
    });
  const loops = Array.from({ length: HANDSHAKE_CONCURRENCY }, async () => {
    while (running) await once();
  });
  Object.assign(result, await measure((on) => (measuring = on), target.pid));
  running = false;
  await Promise.all(loops);
  return result;
}

/** `conns` keep-alive connections each sending one GET after the other. */
async function requests(
  target: Target,
  ca: Buffer,
  originPort: number,
  conns: number,
  pathName: string,
): Promise<Sample> {
  const result: Sample = { count: 0, bodyBytes: 0, latencies: [], seconds: 0, cpu: 0, errors: 0 };
  const request = Buffer.from(
    `GET http://127.0.0.1:${originPort}${pathName} HTTP/1.1\r\nHost: 127.0.0.1:${originPort}\r\nProxy-Authorization: ${target.auth}\r\n\r\n`,
  );
  const sockets = await Promise.all(Array.from({ length: conns }, () => open(target, ca)));
  const loop = requestLoop(sockets, request, result);
  Object.assign(result, await measure(loop.measuring, target.pid));
  loop.stop();
  return result;
}

/** A session ticket from one full handshake with the proxy (TLS 1.3 sends it after the handshake). */
async function ticket(target: Target, ca: Buffer): Promise<Buffer> {
  const socket = tlsClient(target.port, ca);
  const session = await new Promise<Buffer>((resolve, reject) => {
    socket.once('session', resolve);
    socket.once('error', reject);
  });
  socket.destroy();
  return session;
}

async function startGateway(
  db: { url: string; auth: string },
  dir: string,
  cert: { certFile: string; keyFile: string },
): Promise<{ child: ChildProcess; port: number }> {
  return startBenchGateway(
    dir,
    db.url,
    'tls',
    {
      PROXYFLEET_GATEWAY_TLS_CERT: cert.certFile,
      PROXYFLEET_GATEWAY_TLS_KEY: cert.keyFile,
      // The handshake scenarios open thousands of connections that never authenticate.
      PROXYFLEET_GATEWAY_MAX_UNAUTHENTICATED_PER_SOURCE: '1000000',
    },
    PROFILE,
  );
}

interface Row {
  target: string;
  rate: Record<Scenario, number>;
  /** µs CPU per handshake, per resumed handshake, per request; ms per MiB. */
  cpu: Record<Scenario, number>;
  p99: number;
  errors: number;
}

async function main(): Promise<void> {
  raiseFileLimit((message) => process.stderr.write(`could not raise the file limit: ${message}\n`));
  const dir = await mkdtemp(path.join(tmpdir(), 'pf-bench-tls-'));
  const ca = await createTestCa();
  const db = await benchDatabase(dir, logger);
  try {
    const cert = await ca.issue('proxy', ['127.0.0.1', 'localhost']);
    const { child: origin, match } = await startProcess(['loadtest/bench-origin.ts'], {}, /^(\d+)\n/);
    const originPort = Number(match[1]);
    const only = process.env.BENCH_TARGETS?.split(',');
    const scenarios = new Set(process.env.BENCH_SCENARIOS?.split(',') ?? SCENARIOS);
    const makers: [string, () => Promise<Target[]>][] = [
      [
        'gateway',
        async () => {
          const g = await startGateway(db, dir, cert);
          const common = { port: g.port, auth: db.auth, pid: g.child.pid, stop: () => stopChild(g.child) };
          return [
            { name: 'gateway (full, TLS)', tls: true, ...common },
            // The same process and port in clear: what TLS adds. Stopped once, with the TLS row.
            { name: 'gateway (full, clear)', tls: false, ...common, stop: () => Promise.resolve() },
          ];
        },
      ],
      [
        'proxy-chain',
        async () => {
          const args = [
            ...PROFILE,
            'loadtest/bench-proxy-chain.ts',
            `${db.user}:${db.pass}`,
            cert.certFile,
            cert.keyFile,
          ];
          const { child, match: m } = await startProcess(args, {}, /^(\d+)\n/);
          const stop = () => stopChild(child);
          return [
            { name: 'proxy-chain (TLS)', port: Number(m[1]), auth: db.auth, pid: child.pid, tls: true, stop },
          ];
        },
      ],
    ];
    // No authentication configured on squid: the Proxy-Authorization header is ignored.
    if (installed(SQUID))
      makers.push([
        'squid',
        async () => [
          { name: 'squid (https_port)', auth: db.auth, tls: true, ...(await startSquid(dir, cert)) },
        ],
      ]);
    const targets = (
      await Promise.all(makers.filter(([n]) => !only || only.some((t) => n.includes(t))).map(([, m]) => m()))
    ).flat();
    process.stderr.write(`targets: ${targets.map((t) => t.name).join(', ')}\n`);
    const sessions = new Map<Target, Buffer>();
    for (const t of targets) if (t.tls) sessions.set(t, await ticket(t, ca.ca));
    const samples = targets.map(() => Object.fromEntries(SCENARIOS.map((s) => [s, [] as Sample[]])));
    for (let round = 0; round < ROUNDS; round++) {
      const order = targets.map((_, i) => (i + round) % targets.length);
      for (const scenario of SCENARIOS) {
        if (!scenarios.has(scenario)) continue;
        process.stderr.write(`round ${round + 1}/${ROUNDS}: ${scenario}\n`);
        for (const i of order) {
          const t = targets[i]!;
          if (!t.tls && (scenario === 'handshake' || scenario === 'resumed')) continue;
          const sample =
            scenario === 'handshake'
              ? await handshakes(t, ca.ca, undefined)
              : scenario === 'resumed'
                ? await handshakes(t, ca.ca, sessions.get(t))
                : scenario === 'keepalive'
                  ? await requests(t, ca.ca, originPort, KEEPALIVE_CONNS, '/1k')
                  : await requests(t, ca.ca, originPort, BULK_CONNS, '/1m');
          samples[i]![scenario]!.push(sample);
        }
      }
    }
    await Promise.all(targets.map((t) => t.stop()));
    await stopChild(origin);
    const rows: Row[] = targets.map((t, i) => {
      const s = samples[i]!;
      const per = (scenario: Scenario, f: (x: Sample) => number) => median(s[scenario]!.map(f));
      return {
        target: t.name,
        rate: {
          handshake: per('handshake', (x) => x.count / x.seconds),
          resumed: per('resumed', (x) => x.count / x.seconds),
          keepalive: per('keepalive', (x) => x.count / x.seconds),
          bulk: per('bulk', (x) => x.bodyBytes / x.seconds / 2 ** 20),
        },
        cpu: {
          handshake: per('handshake', (x) => (x.cpu / x.count) * 1e6),
          resumed: per('resumed', (x) => (x.cpu / x.count) * 1e6),
          keepalive: per('keepalive', (x) => (x.cpu / x.count) * 1e6),
          bulk: per('bulk', (x) => (x.cpu / (x.bodyBytes / 2 ** 20)) * 1e3),
        },
        p99: per('keepalive', (x) => p99(x.latencies)),
        errors: SCENARIOS.reduce((n, sc) => n + s[sc]!.reduce((m, x) => m + x.errors, 0), 0),
      };
    });
    report(rows);
  } finally {
    await Promise.all(children.map(stopChild));
    await db.drop();
    await ca.remove();
    await rm(dir, { recursive: true, force: true });
  }
}

function report(rows: Row[]): void {
  const base = rows.find((r) => r.target === 'proxy-chain (TLS)');
  const fig = (v: number, digits: number, b?: number) =>
    !Number.isFinite(v)
      ? 'n/a'
      : `${v.toFixed(digits)}${b !== undefined && Number.isFinite(b) && b > 0 ? ` (${(v / b).toFixed(2)}x)` : ''}`;
  const lines = [
    `| target | full handshakes/s @${HANDSHAKE_CONCURRENCY} | µs CPU per handshake | resumed handshakes/s | µs CPU per resumed handshake | keep-alive req/s @${KEEPALIVE_CONNS} | p99 ms | µs CPU per request | 1 MiB MiB/s @${BULK_CONNS} | ms CPU per MiB | errors |`,
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map((r) => {
      const b = r === base ? undefined : base;
      return `| ${r.target} | ${fig(r.rate.handshake, 0, b?.rate.handshake)} | ${fig(r.cpu.handshake, 0, b?.cpu.handshake)} | ${fig(r.rate.resumed, 0, b?.rate.resumed)} | ${fig(r.cpu.resumed, 0, b?.cpu.resumed)} | ${fig(r.rate.keepalive, 0, b?.rate.keepalive)} | ${fig(r.p99, 1)} | ${fig(r.cpu.keepalive, 0, b?.cpu.keepalive)} | ${fig(r.rate.bulk, 0, b?.rate.bulk)} | ${fig(r.cpu.bulk, 2, b?.cpu.bulk)} | ${r.errors} |`;
    }),
    `(medians of ${ROUNDS} interleaved round(s), ratios to proxy-chain (TLS) in parentheses; ${SECONDS} s per measurement after ${WARMUP_MS / 1000} s warm-up; CPU is the proxy's user + system time from /proc/PID/stat; ${new Date().toISOString()})`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

process.on('SIGINT', () => {
  for (const c of children) c.kill('SIGKILL');
  process.exit(130);
});

await main();
