// `npm run bench:gateway`: one run, on this machine, against one local origin, of
//   direct (no proxy), proxyfleet's gateway (everything on), the same gateway with auth and
//   metering off ("bare"), proxy-chain with an equivalent auth callback, and squid and tinyproxy
//   (no auth) when installed;
// measuring keep-alive 1 KiB req/s and p99 at 50 connections, CONNECT tunnels/s at 50 concurrent
// (one request per tunnel), MiB/s of 1 MiB downloads at 8 connections, each with the proxy's own
// CPU per unit of work, and memory per 1,000 idle tunnels as the slope of RSS between 2,000 and
// 6,000 tunnels (fresh process each). Each process is separate: origin, proxy, and this load
// generator (raw sockets, minimal parsing). DATABASE_URL: a server to create a scratch database
// on; unset: an embedded PostgreSQL in a temporary directory. All proxies run side by side and
// take turns: BENCH_ROUNDS (default 3) rounds, rotating order, medians reported. BENCH_SECONDS:
// seconds per measurement per round (default 2). BENCH_PROFILE=1: the node proxies run with
// --cpu-prof (profiles in /tmp/pf-bench-prof). BENCH_GATEWAY_NODE_ARGS='--flag ...': one more target,
// the full gateway started with those node/V8 flags. The report gives each proxy's share of CPU
// outside its main thread (GC helper threads: a CPU profile only samples the main thread).
// Tunnels also go through a PROXY-protocol balancer (a v2 header each): the header's CPU per tunnel.
// `--smoke` (or BENCH_SMOKE=1, run by .ci/run): one short round (about a minute), the idle slope
// between 100 and 300 tunnels; it prints the table and fails on any error in any phase of our
// gateway. It asserts no speed.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createLogger } from '#common/logger.ts';
import { raiseFileLimit } from '../gateway/src/proxy/limits.ts';
import { buildProxyHeader } from '../gateway/src/proxy/proxy-header.ts';
import { installed, SQUID, startSquid, startTinyproxy, TINYPROXY } from './bench-proxies.ts';
import {
  benchDatabase,
  children,
  measureWindow,
  median,
  p99,
  requestLoop,
  sleep,
  startBenchGateway,
  startProcess,
  stopChild,
} from './bench-support.ts';

const SMOKE = process.argv.includes('--smoke') || process.env.BENCH_SMOKE === '1';
const SECONDS = Number(process.env.BENCH_SECONDS ?? (SMOKE ? 1 : 2));
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (SMOKE ? 1 : 3));
const WARMUP_MS = SMOKE ? 500 : 1_000;
const KEEPALIVE_CONNS = 50;
const CONNECT_CONCURRENCY = Number(process.env.BENCH_CONNECT_CONCURRENCY ?? 50);
const BULK_CONNS = 8;
/** Memory per idle tunnel: the slope of RSS between these two counts of open tunnels. */
const IDLE_LOW = SMOKE ? 100 : 2_000;
const IDLE_HIGH = SMOKE ? 300 : 6_000;
/** The canned origin's 1 KiB response, head included (loadtest/bench-origin.ts). */
const ORIGIN_1K_RESPONSE_BYTES =
  Buffer.byteLength(
    'HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 1024\r\n\r\n',
  ) + 1024;
const logger = createLogger('bench', 'warn');
const PROXY_V2 = 'gateway (full, PROXY v2)';

interface Target {
  name: string;
  port: number;
  /** Proxy-Authorization value, or undefined for the direct target. */
  auth: string | undefined;
  pid: number | undefined;
  /** Scenarios the target can run (default all): tinyproxy closes every plain connection after one answer. */
  scenarios?: readonly string[];
  /** Bytes each tunnel's connection starts with before its CONNECT (a PROXY protocol header). */
  header?: Buffer;
  stop(): Promise<void>;
}

async function rssKiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
}

// ---- load generators -------------------------------------------------------------------------

function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ port, host: '127.0.0.1', noDelay: true });
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

interface LoadResult {
  count: number;
  bodyBytes: number;
  latencies: number[];
  seconds: number;
  /** CPU seconds the proxy process used in the measured seconds. */
  cpu: number;
  /**
   * Of those, its main thread's; the rest is V8's GC helper threads (concurrent marking and
   * sweeping) and libuv's pool, which CPU profiles (main thread only) do not see.
   */
  cpuMain: number;
  errors: number;
}

const emptyResult = (seconds: number): LoadResult => ({
  count: 0,
  bodyBytes: 0,
  latencies: [],
  seconds,
  cpu: 0,
  cpuMain: 0,
  errors: 0,
});

function requestText(target: Target, originPort: number, pathName: string): Buffer {
  return Buffer.from(
    target.auth
      ? `GET http://127.0.0.1:${originPort}${pathName} HTTP/1.1\r\nHost: 127.0.0.1:${originPort}\r\nProxy-Authorization: ${target.auth}\r\n\r\n`
      : `GET ${pathName} HTTP/1.1\r\nHost: 127.0.0.1:${originPort}\r\n\r\n`,
  );
}

/** `conns` keep-alive connections each sending one request after the other. */
async function keepAlive(
  target: Target,
  originPort: number,
  conns: number,
  pathName: string,
  seconds: number,
): Promise<LoadResult> {
  const request = requestText(target, originPort, pathName);
  const result = emptyResult(seconds);
  const sockets = await Promise.all(Array.from({ length: conns }, () => connect(target.port)));
  const loop = requestLoop(sockets, request, result);
  ({
    seconds: result.seconds,
    cpu: result.cpu,
    cpuMain: result.cpuMain,
  } = await measureWindow(WARMUP_MS, seconds, loop.measuring, target.pid));
  loop.stop();
  return result;
}

/** `concurrency` loops of: new connection, CONNECT (proxies), one 1 KiB request, close. */
async function tunnels(
  target: Target,
  originPort: number,
  concurrency: number,
  seconds: number,
): Promise<LoadResult> {
  const result = emptyResult(seconds);
  const get = Buffer.from(`GET /1k HTTP/1.1\r\nHost: 127.0.0.1:${originPort}\r\n\r\n`);
  const connectHead = Buffer.concat([
    target.header ?? Buffer.alloc(0),
    Buffer.from(
      `CONNECT 127.0.0.1:${originPort} HTTP/1.1\r\nHost: 127.0.0.1:${originPort}\r\nProxy-Authorization: ${target.auth}\r\n\r\n`,
    ),
  ]);
  let measuring = false;
  let running = true;
  const once = () =>
    new Promise<void>((resolve) => {
      const started = performance.now();
      const socket = net.connect({
        port: target.auth ? target.port : originPort,
        host: '127.0.0.1',
        noDelay: true,
      });
      let phase: 'connect' | 'request' = target.auth ? 'connect' : 'request';
      let head = '';
      const done = (ok: boolean) => {
        if (measuring && ok) {
          result.count++;
          result.latencies.push(performance.now() - started);
        } else if (!ok) result.errors++;
        socket.resetAndDestroy();
        resolve();
      };
      socket.on('error', () => done(false));
      socket.once('connect', () => socket.write(phase === 'connect' ? connectHead : get));
      let got = 0;
      socket.on('data', (chunk: Buffer) => {
        if (phase === 'connect') {
          head += chunk.toString('latin1');
          const end = head.indexOf('\r\n\r\n');
          if (end < 0) return;
          // (tinyproxy answers CONNECT with HTTP/1.0.)
          if (!/^HTTP\/1\.[01] 200/.test(head)) return done(false);
          phase = 'request';
          socket.write(get);
          got = head.length - end - 4;
          return;
        }
        got += chunk.length;
        if (got >= ORIGIN_1K_RESPONSE_BYTES) done(true);
      });
    });
  const loops = Array.from({ length: concurrency }, async () => {
    while (running) await once();
  });
  ({
    seconds: result.seconds,
    cpu: result.cpu,
    cpuMain: result.cpuMain,
  } = await measureWindow(WARMUP_MS, seconds, (on) => (measuring = on), target.pid));
  running = false;
  await Promise.all(loops);
  return result;
}

interface IdleResult {
  /** MiB of RSS per 1,000 idle tunnels, between IDLE_LOW and IDLE_HIGH open tunnels. */
  mibPer1000: number;
  /** Tunnels not answered 200 within 10 s. */
  errors: number;
}

/**
 * Opens IDLE_LOW, then IDLE_HIGH CONNECT tunnels and keeps them idle; returns the slope of the
 * proxy's RSS between the two counts. (Growth over the first 1,000 mostly measured the heap
 * settling after warm-up: 0.63x of proxy-chain's where the slope was 1.06-1.21x.)
 */
async function idleTunnelMemory(target: Target, originPort: number): Promise<IdleResult> {
  let errors = 0;
  const open = async (): Promise<net.Socket | undefined> => {
    let s: net.Socket;
    try {
      s = await connect(target.port);
    } catch {
      errors++;
      return undefined;
    }
    s.on('error', () => undefined);
    s.write(
      `CONNECT 127.0.0.1:${originPort} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${target.auth}\r\n\r\n`,
    );
    const head = await new Promise<string>((resolve) => {
      const timer = setTimeout(() => resolve(''), 10_000);
      s.once('data', (c: Buffer) => {
        clearTimeout(timer);
        resolve(c.toString('latin1'));
      });
      s.once('close', () => resolve(''));
    });
    if (!/^HTTP\/1\.[01] 200/.test(head)) {
      errors++;
      s.destroy();
      return undefined;
    }
    return s;
  };
  const sockets: net.Socket[] = [];
  const openUpTo = async (n: number) => {
    while (sockets.length < n) {
      const batch = await Promise.all(Array.from({ length: Math.min(100, n - sockets.length) }, open));
      for (const s of batch) if (s) sockets.push(s);
      if (errors > 100) throw new Error(`${target.name}: ${errors} idle tunnels refused`);
    }
  };
  // Warm the process (code paths, pools) before measuring.
  await openUpTo(20);
  await openUpTo(IDLE_LOW);
  await sleep(2_000);
  const low = await rssKiB(target.pid!);
  await openUpTo(IDLE_HIGH);
  await sleep(2_000);
  const high = await rssKiB(target.pid!);
  for (const s of sockets) s.destroy();
  return { mibPer1000: (high - low) / 1024 / ((IDLE_HIGH - IDLE_LOW) / 1000), errors };
}

// ---- targets ---------------------------------------------------------------------------------

async function startGatewayTarget(
  name: string,
  databaseUrl: string,
  auth: string,
  features: 'full' | 'bare',
  dir: string,
  connectFastPath = true,
  nodeArgs: readonly string[] = [],
  env: Record<string, string> = {},
  cwd?: string,
): Promise<Target> {
  const args = [...nodeArgs];
  if (process.env.BENCH_PROFILE === '1') args.unshift('--cpu-prof', '--cpu-prof-dir=/tmp/pf-bench-prof');
  const { child, port } = await startBenchGateway(
    dir,
    databaseUrl,
    features,
    {
      PROXYFLEET_GATEWAY_FEATURES: features,
      PROXYFLEET_GATEWAY_CONNECT_FAST_PATH: connectFastPath ? 'on' : 'off',
      // Without authentication no connection ever leaves its source's unauthenticated cap (256):
      // the bare gateway's cap is lifted so that the idle phase can hold its 6,000 tunnels.
      ...(features === 'bare' ? { PROXYFLEET_GATEWAY_MAX_UNAUTHENTICATED_PER_SOURCE: '1000000' } : {}),
      ...env,
    },
    args,
    cwd,
  );
  return { name, port, auth, pid: child.pid, stop: () => stopChild(child) };
}

async function startProxyChainTarget(user: string, pass: string, auth: string): Promise<Target> {
  const args = ['loadtest/bench-proxy-chain.ts', `${user}:${pass}`];
  if (process.env.BENCH_PROFILE === '1') args.unshift('--cpu-prof', '--cpu-prof-dir=/tmp/pf-bench-prof');
  const { child, match } = await startProcess(args, {}, /^(\d+)\n/);
  return { name: 'proxy-chain', port: Number(match[1]), auth, pid: child.pid, stop: () => stopChild(child) };
}

// ---- report ----------------------------------------------------------------------------------

interface Row {
  target: string;
  keepAliveRps: number;
  keepAliveP99Ms: number;
  tunnelsPerSecond: number;
  bulkMiBps: number;
  /** MiB of RSS per 1,000 idle tunnels (slope between IDLE_LOW and IDLE_HIGH). */
  idleMiB: number | undefined;
  /** Errors per phase (all rounds). */
  errors: { ka: number; tu: number; bulk: number; idle: number };
  /** Proxy CPU (median of rounds): microseconds per keep-alive request, per tunnel, milliseconds per MiB. */
  cpu: { ka: number; tu: number; bulk: number };
  /** Share of the proxy's CPU outside its main thread (median of rounds), per scenario. */
  otherThreads: { ka: number; tu: number; bulk: number };
  /** Per round: keep-alive req/s, tunnels/s, bulk MiB/s. */
  rounds: { ka: number[]; tu: number[]; bulk: number[] };
}

async function main(): Promise<void> {
  // The idle phase holds IDLE_HIGH sockets in this process (and twice that in the proxy).
  raiseFileLimit((message) => process.stderr.write(`could not raise the file limit: ${message}\n`));
  const dir = await mkdtemp(path.join(tmpdir(), 'pf-bench-'));
  const db = await benchDatabase(dir, logger);
  const { url: databaseUrl, auth } = db;
  try {
    const { child: originChild, match } = await startProcess(['loadtest/bench-origin.ts'], {}, /^(\d+)\n/);
    const originPort = Number(match[1]);

    const makers: [string, () => Promise<Target>][] = [
      [
        'direct',
        () =>
          Promise.resolve({
            name: 'direct',
            port: originPort,
            auth: undefined,
            pid: undefined,
            stop: () => Promise.resolve(),
          }),
      ],
      ['gateway (full)', () => startGatewayTarget('gateway (full)', databaseUrl, auth, 'full', dir)],
      ['gateway (bare)', () => startGatewayTarget('gateway (bare)', databaseUrl, auth, 'bare', dir)],
      ['proxy-chain', () => startProxyChainTarget(db.user, db.pass, auth)],
      // Behind a PROXY-protocol balancer: each tunnel starts with a v2 header (docs/adr/0102).
      [
        PROXY_V2,
        async () => ({
          ...(await startGatewayTarget(PROXY_V2, databaseUrl, auth, 'full', dir, true, [], {
            PROXYFLEET_GATEWAY_PROXY_PROTOCOL: 'optional',
            PROXYFLEET_GATEWAY_PROXY_PROTOCOL_TRUSTED_CIDRS: '127.0.0.0/8',
          })),
          scenarios: ['connect'],
          header: buildProxyHeader(
            2,
            { address: '203.0.113.7', port: 40_000 },
            { address: '127.0.0.1', port: 12321 },
          ),
        }),
      ],
    ];
    // The full gateway with every CONNECT through node:http (the front end's fast path off): only
    // when BENCH_TARGETS names it (`BENCH_TARGETS=full,node:http`), to measure the fast path.
    if (process.env.BENCH_TARGETS?.split(',').includes('node:http'))
      makers.push([
        'gateway (full, node:http CONNECT)',
        () => startGatewayTarget('gateway (full, node:http CONNECT)', databaseUrl, auth, 'full', dir, false),
      ]);
    // The full gateway started with extra node/V8 flags (`BENCH_GATEWAY_NODE_ARGS='--max-semi-space-size=1'`),
    // side by side with the same gateway without them: a flag's effect measured in the same rounds.
    const nodeArgs = process.env.BENCH_GATEWAY_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
    if (nodeArgs.length) {
      const name = `gateway (full, ${nodeArgs.join(' ')})`;
      makers.push([name, () => startGatewayTarget(name, databaseUrl, auth, 'full', dir, true, nodeArgs)]);
    }
    // The full gateway of another checkout (`BENCH_BASELINE=/tmp/pf-baseline`, node_modules linked
    // in) on the same database: a change's cost in the same rounds as the code before it.
    const baseline = process.env.BENCH_BASELINE;
    if (baseline)
      makers.push([
        'gateway (full, baseline)',
        () =>
          startGatewayTarget(
            'gateway (full, baseline)',
            databaseUrl,
            auth,
            'full',
            dir,
            true,
            [],
            {},
            baseline,
          ),
      ]);
    // No authentication configured: the Proxy-Authorization header the generator sends is ignored.
    if (installed(SQUID))
      makers.push(['squid', async () => ({ name: 'squid', auth, ...(await startSquid(dir)) })]);
    if (installed(TINYPROXY))
      makers.push([
        'tinyproxy',
        async () => ({
          name: 'tinyproxy',
          auth,
          scenarios: ['connect', 'idle'],
          ...(await startTinyproxy(dir)),
        }),
      ]);
    // For profiling one thing: BENCH_TARGETS=full,bare BENCH_SCENARIOS=connect (default: all).
    const onlyTargets = process.env.BENCH_TARGETS?.split(',');
    const scenarios = new Set(
      process.env.BENCH_SCENARIOS?.split(',') ?? ['keepalive', 'connect', 'bulk', 'idle'],
    );
    const chosen = makers.filter(([name]) => !onlyTargets || onlyTargets.some((t) => name.includes(t)));
    // Every proxy runs for the whole measurement, and the targets take turns: ROUNDS rounds of
    // every scenario on every target, the order rotating each round, each figure the median of
    // its rounds. A one-pass run (each target measured once, one after the other) compared
    // targets measured minutes apart, under whatever else the 2 shared cores were doing then
    // (and after the TIME_WAIT sockets the previous target's tunnels left): the same code moved
    // 0.58x-1.48x between consecutive runs.
    process.stderr.write(`starting ${chosen.map(([n]) => n).join(', ')}...\n`);
    const targets = await Promise.all(chosen.map(([, make]) => make()));
    const samples = targets.map(() => ({
      ka: [] as LoadResult[],
      tu: [] as LoadResult[],
      bulk: [] as LoadResult[],
    }));
    // A scenario a target does not run: NaN rates, shown as n/a (a measured 0 stays 0).
    const none = emptyResult(NaN);
    const runs = (t: Target, scenario: string) =>
      scenarios.has(scenario) && (!t.scenarios || t.scenarios.includes(scenario));
    for (let round = 0; round < ROUNDS; round++) {
      process.stderr.write(`round ${round + 1}/${ROUNDS}: keep-alive, CONNECT, bulk...\n`);
      const order = targets.map((_, i) => (i + round) % targets.length);
      for (const i of order)
        samples[i]!.ka.push(
          runs(targets[i]!, 'keepalive')
            ? await keepAlive(targets[i]!, originPort, KEEPALIVE_CONNS, '/1k', SECONDS)
            : none,
        );
      for (const i of order)
        samples[i]!.tu.push(
          runs(targets[i]!, 'connect')
            ? await tunnels(targets[i]!, originPort, CONNECT_CONCURRENCY, SECONDS)
            : none,
        );
      for (const i of order)
        samples[i]!.bulk.push(
          runs(targets[i]!, 'bulk')
            ? await keepAlive(targets[i]!, originPort, BULK_CONNS, '/1m', SECONDS)
            : none,
        );
    }
    await Promise.all(targets.map((t) => t.stop()));
    const rows: Row[] = [];
    for (const [i, [name, make]] of chosen.entries()) {
      let idle: IdleResult | undefined;
      if (targets[i]!.pid !== undefined && runs(targets[i]!, 'idle')) {
        process.stderr.write(`${name}: idle tunnels ${IDLE_LOW} -> ${IDLE_HIGH}...\n`);
        const fresh = await make();
        try {
          idle = await idleTunnelMemory(fresh, originPort);
        } finally {
          await fresh.stop();
        }
      }
      const s = samples[i]!;
      const ka = s.ka.map((r) => r.count / r.seconds);
      const tu = s.tu.map((r) => r.count / r.seconds);
      const bulk = s.bulk.map((r) => r.bodyBytes / r.seconds / 2 ** 20);
      const errors = (rs: LoadResult[]) => rs.reduce((n, r) => n + r.errors, 0);
      rows.push({
        target: name,
        keepAliveRps: median(ka),
        keepAliveP99Ms: median(s.ka.map((r) => p99(r.latencies))),
        tunnelsPerSecond: median(tu),
        bulkMiBps: median(bulk),
        idleMiB: idle?.mibPer1000,
        errors: { ka: errors(s.ka), tu: errors(s.tu), bulk: errors(s.bulk), idle: idle?.errors ?? 0 },
        rounds: { ka, tu, bulk },
        cpu: {
          ka: median(s.ka.map((r) => (r.cpu / r.count) * 1e6)),
          tu: median(s.tu.map((r) => (r.cpu / r.count) * 1e6)),
          bulk: median(s.bulk.map((r) => (r.cpu / (r.bodyBytes / 2 ** 20)) * 1e3)),
        },
        otherThreads: {
          ka: median(s.ka.filter((r) => r.cpu > 0).map((r) => 1 - r.cpuMain / r.cpu)),
          tu: median(s.tu.filter((r) => r.cpu > 0).map((r) => 1 - r.cpuMain / r.cpu)),
          bulk: median(s.bulk.filter((r) => r.cpu > 0).map((r) => 1 - r.cpuMain / r.cpu)),
        },
      });
    }
    await stopChild(originChild);
    const clean = report(rows);
    if (SMOKE && !clean) process.exitCode = 1;
  } finally {
    await Promise.all(children.map(stopChild));
    await db.drop();
    await rm(dir, { recursive: true, force: true });
  }
}

function report(rows: Row[]): boolean {
  const base = rows.find((r) => r.target === 'proxy-chain');
  const full = rows.find((r) => r.target === 'gateway (full)');
  const bare = rows.find((r) => r.target === 'gateway (bare)');
  // Every ratio is this target's figure over proxy-chain's (the goals are written so).
  const ratio = (v: number | undefined, b: number | undefined) =>
    v === undefined || b === undefined || !Number.isFinite(v) || !Number.isFinite(b) || b === 0
      ? ''
      : ` (${(v / b).toFixed(2)}x)`;
  const fig = (v: number | undefined, digits: number, b: number | undefined, direct = false) =>
    v === undefined || !Number.isFinite(v) ? 'n/a' : `${v.toFixed(digits)}${direct ? '' : ratio(v, b)}`;
  const errorText = (e: Row['errors']) =>
    e.ka + e.tu + e.bulk + e.idle === 0 ? '0' : `${e.ka}/${e.tu}/${e.bulk}/${e.idle}`;
  const lines = [
    `| target | keep-alive req/s @${KEEPALIVE_CONNS} | p99 ms | µs CPU per request | CONNECT tunnels/s @${CONNECT_CONCURRENCY} | µs CPU per tunnel | 1 MiB MiB/s @${BULK_CONNS} | ms CPU per MiB | MiB per 1,000 idle tunnels | errors |`,
    '|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map((r) => {
      const d = r.target === 'direct';
      return `| ${r.target} | ${fig(r.keepAliveRps, 0, base?.keepAliveRps, d)} | ${Number.isFinite(r.keepAliveP99Ms) ? r.keepAliveP99Ms.toFixed(1) : 'n/a'} | ${d ? 'n/a' : fig(r.cpu.ka, 0, base?.cpu.ka)} | ${fig(r.tunnelsPerSecond, 0, base?.tunnelsPerSecond, d)} | ${d ? 'n/a' : fig(r.cpu.tu, 0, base?.cpu.tu)} | ${fig(r.bulkMiBps, 0, base?.bulkMiBps, d)} | ${d ? 'n/a' : fig(r.cpu.bulk, 2, base?.cpu.bulk)} | ${fig(r.idleMiB, 1, base?.idleMiB)} | ${errorText(r.errors)} |`;
    }),
    `(medians of ${ROUNDS} interleaved round(s), ratios to proxy-chain in parentheses; ${SECONDS} s per measurement after ${WARMUP_MS / 1000} s warm-up; CPU is the proxy's user + system time from /proc/PID/stat; idle memory is the RSS slope between ${IDLE_LOW} and ${IDLE_HIGH} tunnels; errors: keep-alive/CONNECT/bulk/idle; ${new Date().toISOString()})`,
  ];
  if (full && bare) {
    const pct = (a: number, b: number) => `${((a / b) * 100).toFixed(0)} %`;
    lines.push(
      `full features vs features off: keep-alive ${pct(full.keepAliveRps, bare.keepAliveRps)}, CONNECT ${pct(full.tunnelsPerSecond, bare.tunnelsPerSecond)}, bulk ${pct(full.bulkMiBps, bare.bulkMiBps)}`,
    );
  }
  const proxied = rows.find((r) => r.target === PROXY_V2);
  if (full && proxied)
    lines.push(
      `PROXY protocol v2 header: CPU per tunnel ${proxied.cpu.tu.toFixed(0)} µs against ${full.cpu.tu.toFixed(0)} µs without, ${(((proxied.cpu.tu - full.cpu.tu) / full.cpu.tu) * 100).toFixed(1)} % (goal <= 3 %); per round ${proxied.rounds.tu.map((v, i) => (v / full.rounds.tu[i]!).toFixed(2)).join(' ')} of the tunnels/s`,
    );
  if (full && base) {
    const goal = (label: string, v: number, b: number, op: '<=' | '>=', limit: number) => {
      const r = v / b;
      if (!Number.isFinite(r) || r === 0) return `  ${label}: not measured`;
      const met = op === '<=' ? r <= limit : r >= limit;
      return `  ${label}: ${r.toFixed(2)}x (goal ${op} ${limit}x) ${met ? 'met' : 'NOT met'}`;
    };
    lines.push(
      'goals, gateway (full) against proxy-chain:',
      goal('CPU per keep-alive request', full.cpu.ka, base.cpu.ka, '<=', 0.5),
      goal('CPU per tunnel', full.cpu.tu, base.cpu.tu, '<=', 0.67),
      goal('tunnels per second', full.tunnelsPerSecond, base.tunnelsPerSecond, '>=', 1.5),
      goal('CPU per MiB', full.cpu.bulk, base.cpu.bulk, '<=', 0.83),
      ...(full.idleMiB !== undefined && base.idleMiB !== undefined
        ? [goal('memory per 1,000 idle tunnels', full.idleMiB, base.idleMiB, '<=', 1)]
        : []),
    );
  }
  if (base) {
    lines.push(
      'per round, ratio of throughput to proxy-chain in the same round (keep-alive / CONNECT / bulk):',
    );
    for (const r of rows.filter((r) => r !== base && r.target !== 'direct')) {
      const per = (mine: number[], theirs: number[]) =>
        mine.map((v, i) => (Number.isNaN(v) || !theirs[i] ? 'n/a' : (v / theirs[i]).toFixed(2))).join(' ');
      lines.push(
        `  ${r.target}: ${per(r.rounds.ka, base.rounds.ka)} / ${per(r.rounds.tu, base.rounds.tu)} / ${per(r.rounds.bulk, base.rounds.bulk)}`,
      );
    }
  }
  lines.push(
    "share of each proxy's CPU outside its main thread (node: V8's GC helpers and libuv's pool, which CPU profiles do not see), keep-alive / CONNECT / bulk:",
  );
  const share = (v: number) => (Number.isFinite(v) ? `${(v * 100).toFixed(0)} %` : 'n/a');
  for (const r of rows.filter((r) => r.target !== 'direct'))
    lines.push(
      `  ${r.target}: ${share(r.otherThreads.ka)} / ${share(r.otherThreads.tu)} / ${share(r.otherThreads.bulk)}`,
    );
  process.stdout.write(`${lines.join('\n')}\n`);
  // The smoke's one assertion: our gateway answered everything, in every phase.
  const ours = rows.filter((r) => r.target.startsWith('gateway'));
  const failed = ours.filter((r) => r.errors.ka + r.errors.tu + r.errors.bulk + r.errors.idle > 0);
  for (const r of failed) {
    const e = r.errors;
    process.stderr.write(
      `${r.target}: errors keep-alive ${e.ka}, CONNECT ${e.tu}, bulk ${e.bulk}, idle ${e.idle}\n`,
    );
  }
  return failed.length === 0;
}

process.on('SIGINT', () => {
  for (const c of children) c.kill('SIGKILL');
  process.exit(130);
});

await main();
