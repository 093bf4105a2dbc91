// `npm run loadtest:db`: what N gateway pods cost PostgreSQL, measured (docs/scaling.md). A private
// PostgreSQL (initdb here, fsync on, never the machine's shared server) behind PgBouncer in
// transaction mode, as deployed (docs/adr/0068), and N simulated pods (db-load/pod.ts) that ask
// it what a gateway asks, through the gateway's own classes, at the rates the fleet measured: lease
// draws per (customer, pod), a usage flush every 2 s, a heartbeat every 5 s, the change feed's
// LISTEN session with its heartbeat and ack, a credential refresh per change; plus the worker's
// fold and reaper, admin changes at the fleet's rate, and one hot customer whose traffic reaches
// every pod. For each N (cumulative: 100, then 300, then 1,000 pods by default) it reports
// PostgreSQL's and PgBouncer's CPU, transactions per second, p50/p99 of each call, connections,
// and the first N at which a lease draw's p99 passes 50 ms. Bounded: settle + measure seconds per
// step, and a deadline for the whole run.
//   --pods 100,300,1000  --measure 30  --settle 10  --rate 1000000 (bytes/s per budget)
//   --lease-rate 0.05 (draws/s per budget)  --changes 0.74 (admin changes/s)  --regulars 2
//   (customers per pod besides the hot one)  --pool-size 3 (per pod)  --server-pool 20 (PgBouncer)
//   --listen pgbouncer|direct (the LISTEN sessions through PgBouncer's session pool, or not)
//   --feed relay|listen (relay, the default: two change relays, each its own process with the one
//   LISTEN, and the pods on their streams, docs/adr/0105; listen: one LISTEN session per pod)
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { Registry } from 'prom-client';
import { resetProxyPassword } from '#common/accounts/accounts.ts';
import { migrate } from '#common/db/migrate.ts';
import { createPool, DEFAULT_QUERY_TIMEOUT_MS, statementTimeoutFor } from '#common/db/pool.ts';
import { createLogger } from '#common/logger.ts';
import { accountWithBandwidth, TEST_CREDENTIALS_KEY } from '#test/fixtures.ts';
import { PgCluster } from '#test/pg-cluster.ts';
import { startEntrypoint, stopProcess } from '#test/process.ts';
import { POOLED_DATABASE, SESSION_DATABASE, startProxyfleetBouncer } from '#test/pgbouncer.ts';
import { createGatewayMetrics } from '../gateway/src/metrics.ts';
import { JobRunner } from '../worker/src/jobs.ts';
import { balanceSweepJob } from '../worker/src/jobs/auto-refill.ts';
import { maintenanceJob } from '../worker/src/jobs/maintenance.ts';
import { balanceStripesJob, leaseReaperJob, usageFoldJob } from '../worker/src/jobs/usage.ts';
import { REPO_ROOT } from './fleet/fleet.ts';
import {
  backends,
  bouncerPool,
  bouncerTotals,
  Calls,
  lockWaiters,
  processCpuSeconds,
  statementTimes,
  topStatements,
  transactions,
  treeCpuSeconds,
} from './db-load/measure.ts';
import { FanoutTimer } from './db-load/fanout.ts';
import { SimPod, type PodCalls } from './db-load/pod.ts';

const { values: args } = parseArgs({
  options: {
    pods: { type: 'string', default: '100,300,1000' },
    measure: { type: 'string', default: '30' },
    settle: { type: 'string', default: '10' },
    rate: { type: 'string', default: '1000000' },
    'lease-rate': { type: 'string', default: '0.05' },
    changes: { type: 'string', default: '0.74' },
    regulars: { type: 'string', default: '2' },
    'pool-size': { type: 'string', default: '3' },
    'server-pool': { type: 'string', default: '20' },
    listen: { type: 'string', default: 'pgbouncer' },
    feed: { type: 'string', default: 'relay' },
  },
});
const steps = args.pods.split(',').map(Number);
const opt = {
  measure: Number(args.measure),
  settle: Number(args.settle),
  rate: Number(args.rate),
  leaseRate: Number(args['lease-rate']),
  changes: Number(args.changes),
  regularsPerPod: Number(args.regulars),
  poolSize: Number(args['pool-size']),
  serverPool: Number(args['server-pool']),
  /** Where the LISTEN sessions go: PgBouncer's session pool, or PostgreSQL directly. */
  listen: args.listen,
  /** Where the pods take their changes: two change relays, or a LISTEN session each. */
  feed: args.feed,
};
if (opt.feed !== 'relay' && opt.feed !== 'listen') throw new Error('--feed is relay or listen');
if (opt.listen !== 'pgbouncer' && opt.listen !== 'direct') throw new Error('--listen is pgbouncer or direct');
if (!steps.every((n, i) => Number.isInteger(n) && n > 0 && (i === 0 || n > steps[i - 1]!)))
  throw new Error(`--pods must be increasing positive integers: ${args.pods}`);
const maxPods = steps.at(-1)!;
/** The breaking point: a lease draw's p99 past this (docs/scaling.md). */
const LEASE_P99_LIMIT_MS = 50;
const DEADLINE_MS = (180 + steps.length * (opt.settle + opt.measure + 240)) * 1000;
const DATABASE = 'proxyfleet';
/** A regular customer's traffic reaches this many pods. */
const PODS_PER_REGULAR = 4;

const startedAt = Date.now();
const say = (line: string) =>
  process.stdout.write(`[db-load ${((Date.now() - startedAt) / 1000).toFixed(1).padStart(6)}s] ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Warnings and errors of every simulated pod, counted by message (a failed call is one). */
const logged = new Map<string, number>();
const logger = createLogger('db-load', 'warn', {
  write(line: string) {
    const msg = (JSON.parse(line) as { msg?: string }).msg ?? '?';
    logged.set(msg, (logged.get(msg) ?? 0) + 1);
  },
});

async function main(): Promise<number> {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const resultsDir = path.join(REPO_ROOT, 'loadtest/results', `db-load-${stamp}`);
  await mkdir(resultsDir, { recursive: true });
  const dir = await mkdtemp(path.join(os.tmpdir(), 'proxyfleet-db-load-'));
  const deadline = setTimeout(() => {
    say(`deadline of ${DEADLINE_MS / 1000} s passed: stopping`);
    process.kill(process.pid, 'SIGTERM');
  }, DEADLINE_MS);
  deadline.unref();
  const cleanups: (() => Promise<void>)[] = [];
  const cleanup = async () => {
    for (const c of cleanups.reverse()) await c().catch((err: unknown) => say(`cleanup: ${String(err)}`));
    cleanups.length = 0;
    await rm(dir, { recursive: true, force: true });
  };
  process.once('SIGINT', () => void cleanup().then(() => process.exit(130)));
  process.once('SIGTERM', () => void cleanup().then(() => process.exit(143)));
  try {
    const cluster = await PgCluster.init(dir, 'db-load', {
      max_connections: maxPods + 200,
      fsync: 'on',
      shared_buffers: '256MB',
      shared_preload_libraries: 'pg_stat_statements',
    });
    cleanups.push(() => cluster.remove());
    await cluster.query(`CREATE DATABASE ${DATABASE}`);
    const url = cluster.url(DATABASE);
    await migrate(url);
    const pgb = await startProxyfleetBouncer(url, {
      statementTimeoutMs: statementTimeoutFor(DEFAULT_QUERY_TIMEOUT_MS),
      poolSize: opt.serverPool,
      sessionPoolSize: maxPods + 50,
      maxClientConn: maxPods * (opt.poolSize + 1) + 500,
    });
    cleanups.push(() => pgb.bouncer.stop());
    say(
      `PostgreSQL ${cluster.port} (fsync on), PgBouncer ${pgb.bouncer.port} (transaction pool of ${opt.serverPool})`,
    );
    const admin = createPool({
      url: pgb.pooledUrl,
      max: 4,
      applicationName: 'proxyfleet-api',
      logger,
      pooling: 'transaction',
    });
    cleanups.push(() => admin.end());

    const regulars: string[] = [];
    const usernames = new Map<string, string>();
    const regularCount = Math.max(1, Math.ceil((maxPods * opt.regularsPerPod) / PODS_PER_REGULAR));
    const hot = (await accountWithBandwidth(admin, { basic: 1e15 })).id;
    for (let i = 0; i < regularCount; i++) {
      const account = await accountWithBandwidth(admin, { basic: 1e13 });
      regulars.push(account.id);
      usernames.set(account.id, account.proxyUsername);
    }
    say(`customers: 1 hot (on every pod), ${regularCount} others (each on ${PODS_PER_REGULAR} pods)`);

    const registry = new Registry();
    const workerPool = createPool({
      url: pgb.pooledUrl,
      max: 3,
      applicationName: 'proxyfleet-worker',
      logger,
      pooling: 'transaction',
    });
    cleanups.push(() => workerPool.end());
    const fold = new Calls();
    const worker = new JobRunner(
      [usageFoldJob, leaseReaperJob, balanceStripesJob, balanceSweepJob, maintenanceJob].map((job) => ({
        ...job,
        run: (ctx: Parameters<typeof job.run>[0]) => fold.time(() => job.run(ctx)),
      })),
      { pool: workerPool, logger },
      registry,
    );
    worker.start();
    cleanups.push(() => worker.stop());

    const calls: PodCalls = {
      leaseDraw: new Calls(),
      hotLeaseDraw: new Calls(),
      flush: new Calls(),
      heartbeat: new Calls(),
      refresh: new Calls(),
    };
    // The change relays: two processes, as the chart's two replicas, through PgBouncer as the pods.
    const relayUrls: string[] = [];
    if (opt.feed === 'relay')
      for (let i = 0; i < 2; i++) {
        const relay = startEntrypoint('relay/src/main.ts', {
          DATABASE_URL: pgb.pooledUrl,
          PROXYFLEET_DATABASE_SESSION_URL: opt.listen === 'direct' ? url : pgb.sessionUrl,
          PROXYFLEET_DB_POOLING: 'transaction',
          PROXYFLEET_DB_POOL_SIZE: '4',
          PROXYFLEET_RELAY_HOST: '127.0.0.1',
          PROXYFLEET_RELAY_PORT: '0',
          PROXYFLEET_HEALTH_HOST: '127.0.0.1',
          PROXYFLEET_HEALTH_PORT: '0',
        });
        cleanups.push(() => stopProcess(relay));
        const listening = await relay.waitForLog('change relay listening', 120_000);
        relayUrls.push(`ws://127.0.0.1:${String(listening.port)}/changes`);
      }
    if (relayUrls.length) say(`change relays: ${relayUrls.join(', ')}`);
    const fanout = new FanoutTimer();
    const change = new Calls();
    const pods: SimPod[] = [];
    cleanups.push(async () => {
      for (let i = 0; i < pods.length; i += 50) await Promise.all(pods.slice(i, i + 50).map((p) => p.stop()));
    });
    const env = {
      pooledUrl: pgb.pooledUrl,
      sessionUrl: opt.listen === 'direct' ? url : pgb.sessionUrl,
      logger,
      metrics: createGatewayMetrics(registry),
      calls,
      hot,
      regulars,
      regularsPerPod: opt.regularsPerPod,
      rate: opt.rate,
      leaseRate: opt.leaseRate,
      poolSize: opt.poolSize,
      relayUrls,
      usernames,
      onApplied(pod: string, accountId: string, now: number, hash: () => string | undefined) {
        if (fanout.pending(accountId)) fanout.applied(pod, accountId, now, hash());
      },
    };

    // Admin changes at the fleet's rate: a proxy password reset (one change_log row, one NOTIFY).
    // Its fan-out is timed from the commit (the call resolved), and from the request as well.
    let changing = true;
    let quiet = false;
    const changer = (async () => {
      while (changing) {
        await sleep(-Math.log(1 - Math.random()) * (1000 / opt.changes));
        const account = regulars[Math.floor(Math.random() * regulars.length)]!;
        if (!changing || quiet || fanout.pending(account) || pods.length === 0) continue;
        fanout.requested(account, pods.length, performance.now());
        await change
          .time(() => resetProxyPassword(admin, account, TEST_CREDENTIALS_KEY))
          .then(
            (password) => fanout.committed(account, password, performance.now()),
            () => fanout.failed(account),
          );
      }
    })();
    cleanups.push(async () => {
      changing = false;
      await changer;
    });

    const control = new pg.Client({ connectionString: cluster.url(DATABASE) });
    await control.connect();
    cleanups.push(() => control.end());
    await control.query('CREATE EXTENSION pg_stat_statements');
    const postmaster = await cluster.pid();
    const loop = monitorEventLoopDelay({ resolution: 10 });
    loop.enable();
    const rows: Record<string, unknown>[] = [];

    for (const n of steps) {
      // Pods start while the others are quiet (their traffic paused, no admin changes): a step
      // measures N pods in steady state, not N pods starting at once into a loaded database.
      for (const p of pods) p.paused = true;
      quiet = true;
      const rampStart = Date.now();
      let next = pods.length;
      let startFailures = 0;
      while (pods.length < n && startFailures < n) {
        const batch = Array.from({ length: Math.min(25, n - pods.length) }, () => next++);
        for (const result of await Promise.allSettled(batch.map((i) => SimPod.start(i, env)))) {
          if (result.status === 'fulfilled') pods.push(result.value);
          else startFailures++;
        }
      }
      for (const p of pods) p.paused = false;
      quiet = false;
      say(
        `${pods.length} pods started in ${((Date.now() - rampStart) / 1000).toFixed(1)} s (${startFailures} starts failed and were retried); settling ${opt.settle} s`,
      );
      await sleep(opt.settle * 1000);
      for (const c of [...(Object.values(calls) as Calls[]), change, fold]) c.reset();
      fanout.reset();
      logged.clear();
      loop.reset();
      await control.query('SELECT pg_stat_statements_reset()');
      // PgBouncer's admin console answers slowly when it is saturated: a figure it cannot give is 0.
      const noTotals = { xacts: 0, xactMicros: 0, waitMicros: 0 };
      const noPool = { clients: 0, waiting: 0, servers: 0 };
      const bouncerBefore = await bouncerTotals(pgb.bouncer, POOLED_DATABASE).catch(() => noTotals);
      const before = {
        at: Date.now(),
        pg: treeCpuSeconds(postmaster),
        bouncer: processCpuSeconds(pgb.bouncer.pid ?? 0),
        self: process.cpuUsage(),
        tx: await transactions(control, DATABASE),
      };
      // Lock waiters sampled once a second through the window (row locks on hot rows).
      // Which statements wait, and for what (tuple, transactionid, ...): sessions summed over the samples.
      const waits: number[] = [];
      const waitingFor = new Map<string, number>();
      const sampler = setInterval(
        () =>
          void lockWaiters(control, DATABASE).then(
            (by) => {
              waits.push([...by.values()].reduce((a, b) => a + b, 0));
              for (const [what, n] of by) waitingFor.set(what, (waitingFor.get(what) ?? 0) + n);
            },
            () => undefined,
          ),
        1000,
      );
      await sleep((opt.measure * 1000) / 2);
      const conns = await backends(control, DATABASE);
      const pooledPool = await bouncerPool(pgb.bouncer, POOLED_DATABASE).catch(() => noPool);
      const sessionPool = await bouncerPool(pgb.bouncer, SESSION_DATABASE).catch(() => noPool);
      await sleep((opt.measure * 1000) / 2);
      clearInterval(sampler);
      const seconds = (Date.now() - before.at) / 1000;
      const bouncerAfter = await bouncerTotals(pgb.bouncer, POOLED_DATABASE).catch(() => noTotals);
      const xacts = Math.max(1, bouncerAfter.xacts - bouncerBefore.xacts);
      const server = await statementTimes(control, {
        leaseAcquire: '%lease_acquire(%',
        usageRecord: '%usage_record(%',
        heartbeat: '%gateway_heartbeat_v2(%',
        usageFold: '%usage_fold(%',
      });
      const top = await topStatements(control);
      // The hot customer's leases of the window drawn from a stripe (docs/adr/0107), of all.
      const striped = await admin
        .query<{ n: number; of: number }>(
          `SELECT count(*) FILTER (WHERE stripe IS NOT NULL)::int AS n, count(*)::int AS "of"
             FROM bandwidth_leases WHERE account_id = $1 AND created_at >= to_timestamp($2 / 1000.0)`,
          [hot, before.at],
        )
        .then(
          (r) => r.rows[0]!,
          () => ({ n: 0, of: 0 }),
        );
      const self = process.cpuUsage(before.self);
      const draws = new Calls();
      const all = [calls.leaseDraw, calls.hotLeaseDraw];
      for (const c of all) for (const ms of c.all()) draws.add(ms);
      draws.failures = all.reduce((s, c) => s + c.failures, 0);
      const row = {
        pods: pods.length,
        seconds: Math.round(seconds),
        machineLoadAverage: os.loadavg()[0]!.toFixed(1),
        transactionsPerSecond: Math.round(((await transactions(control, DATABASE)) - before.tx) / seconds),
        postgresCpuCores: round2((treeCpuSeconds(postmaster) - before.pg) / seconds),
        pgbouncerCpuCores: round2((processCpuSeconds(pgb.bouncer.pid ?? 0) - before.bouncer) / seconds),
        generatorCpuCores: round2((self.user + self.system) / 1e6 / seconds),
        generatorEventLoopP99Ms: Math.round(loop.percentile(99) / 1e6),
        backends: conns.total,
        listenBackends: conns.listening,
        pgbouncerClients: pooledPool.clients + sessionPool.clients,
        pgbouncerServerConnections: pooledPool.servers,
        pgbouncerWaiting: pooledPool.waiting,
        lockWaitersMean: round2(waits.reduce((a, b) => a + b, 0) / Math.max(1, waits.length)),
        lockWaitersByStatement: Object.fromEntries([...waitingFor].sort((a, b) => b[1] - a[1]).slice(0, 6)),
        pgbouncerAvgTransactionMs: round2(
          (bouncerAfter.xactMicros - bouncerBefore.xactMicros) / xacts / 1000,
        ),
        pgbouncerAvgWaitMs: round2((bouncerAfter.waitMicros - bouncerBefore.waitMicros) / xacts / 1000),
        serverSide: server,
        topStatements: top,
        leaseDraw: draws.summary(seconds),
        hotLeaseDraw: calls.hotLeaseDraw.summary(seconds),
        hotDrawsFromStripes: `${striped.n} of ${striped.of}`,
        flush: calls.flush.summary(seconds),
        heartbeat: calls.heartbeat.summary(seconds),
        refresh: calls.refresh.summary(seconds),
        notificationToEachPod: fanout.fromCommit.each.summary(seconds),
        notificationToAllPods: fanout.fromCommit.all.summary(seconds),
        requestToEachPod: fanout.fromRequest.each.summary(seconds),
        requestToAllPods: fanout.fromRequest.all.summary(seconds),
        adminChange: change.summary(seconds),
        workerJobs: fold.summary(seconds),
        warnings: Object.fromEntries(logged),
      };
      rows.push(row);
      say(JSON.stringify(row));
    }

    const broke = rows.find((r) => (r.leaseDraw as { p99: number }).p99 > LEASE_P99_LIMIT_MS);
    const table = markdown(rows, broke);
    await writeFile(
      path.join(resultsDir, 'results.json'),
      JSON.stringify({ options: opt, steps, rows }, null, 2),
    );
    await writeFile(path.join(resultsDir, 'table.md'), table);
    process.stdout.write(`\n${table}\n`);
    say(
      broke
        ? `breaks at ${String(broke.pods)} pods: lease draw p99 past ${LEASE_P99_LIMIT_MS} ms`
        : `no break up to ${maxPods} pods: lease draw p99 under ${LEASE_P99_LIMIT_MS} ms at every step`,
    );
    say(`results in ${path.relative(REPO_ROOT, resultsDir)}`);
    return 0;
  } finally {
    await cleanup();
  }
}

const round2 = (x: number) => Math.round(x * 100) / 100;

function markdown(rows: Record<string, unknown>[], broke: Record<string, unknown> | undefined): string {
  type S = { perSecond: number; p50: number; p99: number; failures: number };
  const call = (name: string) => (r: Record<string, unknown>) => {
    const s = r[name] as S;
    return `${s.perSecond}/s, ${s.p50} / ${s.p99} ms${s.failures ? `, ${s.failures} failed` : ''}`;
  };
  const lines: [string, (r: Record<string, unknown>) => string][] = [
    ['transactions/s', (r) => String(r.transactionsPerSecond)],
    ['PostgreSQL CPU (cores)', (r) => String(r.postgresCpuCores)],
    ['PgBouncer CPU (cores)', (r) => String(r.pgbouncerCpuCores)],
    ['backends waiting for a lock (mean of 1 s samples)', (r) => String(r.lockWaitersMean)],
    [
      'PgBouncer: transaction / wait for a server, mean ms',
      (r) => `${String(r.pgbouncerAvgTransactionMs)} / ${String(r.pgbouncerAvgWaitMs)}`,
    ],
    [
      'in PostgreSQL, mean / max ms: lease_acquire, usage_record',
      (r) => {
        const s = r.serverSide as Record<string, { meanMs: number; maxMs: number }>;
        return `${s.leaseAcquire!.meanMs} / ${s.leaseAcquire!.maxMs}, ${s.usageRecord!.meanMs} / ${s.usageRecord!.maxMs}`;
      },
    ],
    ['lease draw (all): rate, p50 / p99', call('leaseDraw')],
    ['lease draw, hot customer', call('hotLeaseDraw')],
    ['hot customer: leases drawn from a stripe', (r) => String(r.hotDrawsFromStripes)],
    ['usage flush (usage_record)', call('flush')],
    ['heartbeat', call('heartbeat')],
    ['credential refresh per change, each pod', call('refresh')],
    ['change: commit to one pod applied', call('notificationToEachPod')],
    ['change: commit to every pod applied', call('notificationToAllPods')],
    ['change: admin request to every pod applied', call('requestToAllPods')],
    ['worker jobs (fold, reaper, sweep)', call('workerJobs')],
    ['backends (of which LISTEN)', (r) => `${String(r.backends)} (${String(r.listenBackends)})`],
    [
      'PgBouncer clients / server connections',
      (r) => `${String(r.pgbouncerClients)} / ${String(r.pgbouncerServerConnections)}`,
    ],
    [
      'generator CPU (cores) / event loop p99',
      (r) => `${String(r.generatorCpuCores)} / ${String(r.generatorEventLoopP99Ms)} ms`,
    ],
    ['machine load average (2 cores, shared)', (r) => String(r.machineLoadAverage)],
  ];
  return [
    `| | ${rows.map((r) => `${String(r.pods)} pods`).join(' | ')} |`,
    `|---|${rows.map(() => '---').join('|')}|`,
    ...lines.map(([name, f]) => `| ${name} | ${rows.map(f).join(' | ')} |`),
    '',
    broke
      ? `First N with lease draw p99 > ${LEASE_P99_LIMIT_MS} ms: ${String(broke.pods)}`
      : `No N up to ${maxPods} with lease draw p99 > ${LEASE_P99_LIMIT_MS} ms`,
  ].join('\n');
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(
      `db-load failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  },
);
