// `npm run loadtest -- --scenario failover` (and `--smoke`, which .ci/run runs): the fleet on a
// primary PostgreSQL with a synchronous streaming replica, both private clusters made here with
// initdb and pg_basebackup, every process through PgBouncer (docs/adr/0068, 0069). k6 drives
// customers through every gateway and the API while
//   1. failover: the primary is stopped hard (immediate), the replica promoted and PgBouncer
//      re-pointed at it (RELOAD, RECONNECT);
//   2. switchover: a new replica is made of the new primary; PgBouncer pauses the transaction
//      pool, the primary stops cleanly (its WAL reaches the replica), the replica is promoted,
//      PgBouncer re-pointed and resumed.
// Each phase is judged through k6, Prometheus and the database (failover-checks.ts). The clusters,
// PgBouncer and the fleet live in one temporary directory, removed at the end (--keep keeps it).
// --async: no synchronous standby, to measure what an asynchronous failover loses.
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PgCluster } from '#test/pg-cluster.ts';
import { POOLED_DATABASE } from '#test/pgbouncer.ts';
import { REPO_ROOT, startFleet, type Fleet } from '../fleet/fleet.ts';
import { Prometheus } from '../prom.ts';
import {
  batchShapes,
  dbQuery,
  judgeBilledOnce,
  judgeBoughtOnce,
  judgeLeases,
  judgeServesAgain,
  settle,
} from './failover-checks.ts';
import { AdminApiError, admin, customer, type Account } from '../run/clients.ts';
import { sleep } from '../run/context.ts';
import { metric, runK6, type Summary } from '../run/k6.ts';
import { Report } from './report.ts';

export interface FailoverOptions {
  smoke: boolean;
  keep: boolean;
  async: boolean;
  /** The k6 binary (loadtest/run.ts checked it is there). */
  k6: string;
}

/**
 * Between the primary's stop and the promotion: what a failover manager takes to notice (Patroni,
 * CloudNativePG: seconds). Scripted here, so that customers meet a database that is away.
 */
const DETECTION_MS = 5_000;
/** The goal: customers served again within this long after the promotion (ADR 0069). */
const REFUSAL_AFTER_PROMOTION_MS = 10_000;
/** k6 moved vs billed, advanced (docs/loadtest.md: k6 counts bytes when read or written). */
const BILLING_TOLERANCE = 0.01;
const PURCHASE_BYTES = 1_000_000;
const REFILL = { initial: 20_000_000, threshold: 10_000_000, refill: 20_000_000 };

interface Phase {
  name: 'failover' | 'switchover';
  /** The database change, `at` seconds after k6 starts; returns its timestamps (ms). */
  act(): Promise<Record<string, number>>;
}

export async function runFailover(opts: FailoverOptions): Promise<number> {
  const profile = opts.smoke
    ? { duration: 24, at: 8, scale: 2, size: 16_384 }
    : { duration: 60, at: 20, scale: 3, size: 65_536 };
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const resultsDir = path.join(
    REPO_ROOT,
    'loadtest/results',
    `failover-${opts.smoke ? 'smoke-' : ''}${stamp}`,
  );
  await mkdir(resultsDir, { recursive: true });
  const report = new Report(`failover${opts.smoke ? ' smoke' : ''}`, resultsDir);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'proxyfleet-failover-'));
  const clusters: PgCluster[] = [];
  let fleet: Fleet | undefined;
  const cleanup = async () => {
    await fleet?.stop();
    for (const c of clusters) await c.remove().catch(() => undefined);
    if (!opts.keep) await rm(dir, { recursive: true, force: true });
    else report.say(`directory kept: ${dir}`);
  };
  const onSignal = () => void cleanup().then(() => process.exit(130));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    report.say(`${opts.smoke ? 'smoke' : 'full'} run, results in ${path.relative(REPO_ROOT, resultsDir)}`);
    const primary = await PgCluster.init(dir, 'pg1', { max_connections: 200 });
    clusters.push(primary);
    const replica = await PgCluster.replicaOf(primary, dir, 'pg2');
    clusters.push(replica);
    if (!opts.async) await primary.setSynchronousStandbys('pg2');
    report.say(
      `primary pg1 on ${primary.port}, ${opts.async ? 'asynchronous' : 'synchronous'} replica pg2 on ${replica.port}`,
    );
    fleet = await startFleet({
      basePort: Number(process.env.FLEET_BASE_PORT ?? 18300),
      databaseUrl: primary.url(),
      dir: path.join(dir, 'fleet'),
      pgbouncer: true,
      // Each process keeps its own LISTEN here: the scenario's figures and its twenty runs of
      // docs/adr/0095 are of that path; the fleet scenario runs the relay.
      relay: false,
      // A kept run is one to read: at info the gateways also log the cuts that follow a denial
      // from the database (at warn only the outage's), which is what a failure is explained by.
      ...(opts.keep ? { logLevel: 'info' } : {}),
      onStep: (line) => report.say(line),
    });
    return await scenario(fleet, profile, report, opts, { primary, replica, dir, clusters });
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await cleanup();
  }
}

async function scenario(
  fleet: Fleet,
  profile: { duration: number; at: number; scale: number; size: number },
  report: Report,
  opts: FailoverOptions,
  db: { primary: PgCluster; replica: PgCluster; dir: string; clusters: PgCluster[] },
): Promise<number> {
  const p = fleet.ports;
  const prom = new Prometheus(fleet.prometheusUrl);
  const originHttp = `http://origin.localhost:${p.originHttp}`;
  const originHttps = `https://origin.localhost:${p.originHttps}`;
  const email = (who: string) => `${who}-${Date.now()}@loadtest.example`;
  // A and C: plenty (served from leases and outage credit throughout); R: a small balance that
  // auto-refills; N1, N2: newcomers whose first request comes during the phase; P: bought by the runner.
  const A = await customer(fleet, email('a'), { basic: 50e9 });
  const C = await customer(fleet, email('c'), { advanced: 50e9 });
  const R = await customer(fleet, email('r'), { basic: REFILL.initial });
  await admin(fleet, 'PUT', `/admin/v1/accounts/${R.id}/auto-refill/basic`, {
    enabled: true,
    thresholdGb: REFILL.threshold / 1e9,
    refillGb: REFILL.refill / 1e9,
    maxRefillsPerMonth: 100,
  });
  const N = [
    await customer(fleet, email('n1'), { basic: 1e9 }),
    await customer(fleet, email('n2'), { basic: 1e9 }),
  ];
  const P = await customer(fleet, email('p'), {});
  await gatewaysKnowEverything(fleet);
  const purchaseKeys: string[] = [];
  const k6Moved = { advanced: 0 };

  const runPhase = async (phase: Phase, newcomer: Account): Promise<void> => {
    const pidsBefore = fleet.pids();
    const env = {
      DURATION: String(profile.duration),
      SCALE: String(profile.scale),
      SIZE: String(profile.size),
      ORIGIN_HTTP: originHttp,
      ORIGIN_HTTPS: originHttps,
    };
    const cred = (a: Account, suffix = '') =>
      `${encodeURIComponent(a.proxyUsername)}:${encodeURIComponent(a.proxyPassword + suffix)}`;
    const started = Date.now();
    const basic = runK6(
      { k6: opts.k6, resultsDir: report.dir },
      'failover.js',
      {
        ...env,
        MODE: 'basic',
        HTTP_PROXY: `http://127.0.0.1:${p.basic}`,
        HTTPS_PROXY: `http://${cred(A)}@127.0.0.1:${p.basic}`,
        API_URL: fleet.apiUrl,
        A_KEY: A.apiKey,
        A_USER: A.proxyUsername,
        A_PASS: A.proxyPassword,
        R_USER: R.proxyUsername,
        R_PASS: R.proxyPassword,
        N_USER: newcomer.proxyUsername,
        N_PASS: newcomer.proxyPassword,
        NEWCOMER_START: String(profile.at + (phase.name === 'failover' ? 1 : 0)),
      },
      `${phase.name}-basic`,
    );
    const advancedProxy = `http://${cred(C)}@127.0.0.1:${p.advanced}`;
    const advanced = runK6(
      { k6: opts.k6, resultsDir: report.dir },
      'failover.js',
      { ...env, MODE: 'advanced', HTTP_PROXY: advancedProxy, HTTPS_PROXY: advancedProxy },
      `${phase.name}-advanced`,
    );
    // The runner buys for P once a second, each purchase with its own Idempotency-Key, retried
    // with that key until it is answered 201.
    let buying = true;
    let retries = 0;
    const buyer = (async () => {
      for (let i = 0; buying; i++) {
        const key = `${phase.name}-${i}-${started}`;
        purchaseKeys.push(key);
        for (;;) {
          try {
            await admin(
              fleet,
              'POST',
              `/admin/v1/accounts/${P.id}/purchases`,
              { product: 'basic', gb: PURCHASE_BYTES / 1e9 },
              { 'Idempotency-Key': key },
            );
            break;
          } catch (err) {
            if (err instanceof AdminApiError && err.status < 500) throw err;
            retries++;
            await sleep(200);
          }
        }
        await sleep(1000);
      }
    })();
    await sleep(Math.max(0, started + profile.at * 1000 - Date.now()));
    report.say(`${phase.name}: now`);
    const times = await phase.act();
    report.say(
      `${phase.name}: done (${Object.entries(times)
        .map(([k, v]) => `${k} +${v - times.start!} ms`)
        .join(', ')})`,
    );
    const [b, a] = await Promise.all([basic, advanced]);
    buying = false;
    await buyer;
    const end = Date.now() / 1000;
    report.say(
      `${phase.name}: k6 done (exit ${b.code} / ${a.code}); waiting for the last flushes and the fold`,
    );
    const billed = await settle(fleet, prom);
    judgeAnswers(report, phase.name, [b.summary, a.summary], times);
    await listFailures(report, phase.name, times);
    const range = `${Math.ceil(Date.now() / 1000 - started / 1000) + 5}s`;
    const reasons = await prom.query(
      `sum by (reason) (increase(proxyfleet_gateway_refusals_total{status_class!="none"}[${range}])) > 0`,
    );
    const allowed = phase.name === 'failover' ? ['billing_unavailable'] : [];
    const other = reasons.filter((s) => !allowed.includes(s.labels.reason ?? ''));
    report.judge(
      `${phase.name}: Prometheus: the gateways refused only with 503 billing_unavailable${phase.name === 'switchover' ? ' (none here)' : ''}, never 402`,
      other.length === 0,
      reasons.map((s) => `${s.labels.reason} ${Math.round(s.value)}`).join(', ') || 'no refusal',
    );
    report.figure(
      `${phase.name}: usage flushes that failed and were retried (Prometheus)`,
      Math.round(await prom.scalar(`sum(increase(proxyfleet_gateway_usage_flush_failures_total[${range}]))`)),
    );
    report.figure(
      `${phase.name}: API answers 5xx (Prometheus)`,
      Math.round(
        await prom.scalar(
          `sum(increase(proxyfleet_api_request_duration_seconds_count{status_class="5xx"}[${range}]))`,
        ),
      ),
    );
    report.figure(`${phase.name}: purchases retried through the outage`, retries);
    await judgeBilledOnce(report, fleet, billed, phase.name, opts.async);
    k6Moved.advanced += metric(a.summary, 'data_sent') + metric(a.summary, 'data_received');
    const [c] = await dbQuery<{ used: string }>(
      fleet,
      "SELECT used_bytes::text AS used FROM balances WHERE account_id = $1 AND product = 'advanced'",
      [C.id],
    );
    const diff = (Number(c?.used) - k6Moved.advanced) / k6Moved.advanced;
    report.judge(
      `${phase.name}: bytes billed = bytes k6 moved (advanced, so far)`,
      Math.abs(diff) <= BILLING_TOLERANCE,
      `billed to C ${c?.used}, k6 moved ${k6Moved.advanced} (${(diff * 100).toFixed(4)} %, tolerance ${BILLING_TOLERANCE * 100} %)`,
    );
    await judgeBoughtOnce(
      report,
      fleet,
      phase.name,
      { account: P, keys: purchaseKeys, bytes: PURCHASE_BYTES },
      { account: R, ...REFILL },
    );
    await judgeLeases(report, fleet, phase.name);
    report.figure(
      `${phase.name}: a new customer served by every gateway after, ms`,
      await judgeServesAgain(report, fleet, phase.name, pidsBefore, originHttp),
    );
    report.figure(`${phase.name}: phase ended`, new Date(end * 1000).toISOString());
  };

  // 1. Failover: the primary stopped hard, the replica promoted, PgBouncer re-pointed.
  await runPhase(
    {
      name: 'failover',
      async act() {
        const start = Date.now();
        await db.primary.stop('immediate');
        const stopped = Date.now();
        await sleep(DETECTION_MS);
        await db.replica.promote();
        const promoted = Date.now();
        await fleet.repointDatabase({ host: '127.0.0.1', port: db.replica.port });
        return { start, stopped, promoted, repointed: Date.now() };
      },
    },
    N[0]!,
  );

  // 2. Switchover to a new replica of the new primary: planned, graceful.
  const next = await PgCluster.replicaOf(db.replica, db.dir, 'pg3');
  db.clusters.push(next);
  if (!opts.async) await db.replica.setSynchronousStandbys('pg3');
  report.say(`replica pg3 on ${next.port} streams from the new primary pg2`);
  await runPhase(
    {
      name: 'switchover',
      async act() {
        const bouncer = fleet.pgbouncer!;
        const start = Date.now();
        // Transactions in flight finish; new ones wait in PgBouncer until RESUME.
        await bouncer.pause(POOLED_DATABASE);
        const paused = Date.now();
        // A clean stop sends every WAL record to the replica before the primary exits.
        await db.replica.stop('fast');
        const stopped = Date.now();
        await next.promote();
        const promoted = Date.now();
        await fleet.repointDatabase({ host: '127.0.0.1', port: next.port });
        await bouncer.resume(POOLED_DATABASE);
        return { start, paused, stopped, promoted, resumed: Date.now() };
      },
    },
    N[1]!,
  );
  report.figure('usage batch shapes (both phases)', await batchShapes(fleet));
  return (await report.finish({ profile, async: opts.async })) ? 0 : 1;
}

/**
 * Which requests were not answered 200 in a phase and why (k6's `FAILED` lines, failover.js),
 * each timed from the phase's database events, so that a failure can be explained.
 */
async function listFailures(
  report: Report,
  phase: Phase['name'],
  times: Record<string, number>,
): Promise<void> {
  const failed: { at: number; [k: string]: unknown }[] = [];
  for (const mode of ['basic', 'advanced']) {
    const log = await readFile(path.join(report.dir, `k6-${phase}-${mode}.log`), 'utf8').catch(() => '');
    // k6 writes `msg="FAILED {...}"`, the JSON quoted as a string (a Proxy-Status holds quotes).
    for (const m of log.matchAll(/msg="FAILED ((?:[^"\\]|\\.)*)"/g)) {
      try {
        failed.push(JSON.parse(JSON.parse(`"${m[1]!}"`) as string) as { at: number });
      } catch {
        // a line k6 cut: counted by the summaries anyway
      }
    }
  }
  failed.sort((x, y) => x.at - y.at);
  const events = Object.entries(times).filter(([k]) => k !== 'start');
  const line = (f: { at: number }) => {
    const rel = events.map(([k, t]) => `${k} ${f.at - t >= 0 ? '+' : ''}${f.at - t} ms`).join(', ');
    const { at, ...rest } = f;
    return `${new Date(at).toISOString()} (${rel}): ${JSON.stringify(rest)}`;
  };
  // Every answer that is neither 200 nor 503 in full; the 503s (expected in a failover) by
  // scenario, with the first and last of each.
  for (const f of failed.filter((x) => x.status !== 503)) report.say(`${phase}: failed ${line(f)}`);
  const by503 = new Map<string, { at: number }[]>();
  for (const f of failed.filter((x) => x.status === 503)) {
    const key = String(f.scenario);
    by503.set(key, [...(by503.get(key) ?? []), f]);
  }
  for (const [scenario, list] of by503) {
    report.say(`${phase}: ${list.length} answered 503 in ${scenario}, first ${line(list[0]!)}`);
    if (list.length > 1) report.say(`${phase}:   last ${line(list.at(-1)!)}`);
  }
}

/** What customers were answered during a phase (k6), and the refusal window. */
function judgeAnswers(
  report: Report,
  phase: Phase['name'],
  summaries: (Summary | undefined)[],
  times: Record<string, number>,
): void {
  const sum = (name: string) => summaries.reduce((n, s) => n + metric(s, name), 0);
  const byScenario = (name: string, scenarios: string[]) =>
    scenarios.reduce(
      (n, sc) => n + summaries.reduce((m, s) => m + metric(s, `${name}{scenario:${sc}}`), 0),
      0,
    );
  const served = sum('served');
  const r503 = sum('refused_503');
  const r402 = sum('refused_402');
  const unexpected = sum('unexpected');
  const steady = ['keepalive', 'connect', 'plain', 'tls'];
  const steadyRefused = byScenario('refused_503', steady);
  report.judge(
    `${phase}: k6 summaries written`,
    summaries.every(Boolean),
    summaries.map((s) => (s ? 'yes' : 'missing')).join(', '),
  );
  report.judge(
    `${phase}: no customer answered 402`,
    r402 === 0,
    `${r402} answers 402 of ${served + r503 + r402 + unexpected}`,
  );
  report.judge(
    `${phase}: no answer but 200 or 503 (no 5xx other than 503, no request left unanswered)`,
    unexpected === 0,
    `${unexpected} other answers or failures`,
  );
  report.judge(
    `${phase}: customers with leases (A, C) served throughout`,
    steadyRefused === 0,
    `${steadyRefused} refused; ${byScenario('served', steady)} served`,
  );
  const first = Math.min(...summaries.map((s) => metric(s, 'refused_at', 'min') || Infinity));
  const last = Math.max(...summaries.map((s) => metric(s, 'refused_at', 'max') || -Infinity));
  const refusals = `${r503} answers 503 (API ${byScenario('refused_503', ['api'])}, newcomer ${byScenario('refused_503', ['newcomer'])}, R ${byScenario('refused_503', ['refill'])}) of ${served + r503}`;
  if (phase === 'failover') {
    const afterPromotion = r503 ? last - times.promoted! : 0;
    report.judge(
      `failover: customers refused no longer than ${REFUSAL_AFTER_PROMOTION_MS / 1000} s after the promotion`,
      afterPromotion < REFUSAL_AFTER_PROMOTION_MS,
      r503
        ? `${refusals}; first ${first - times.stopped!} ms after the stop, last ${afterPromotion} ms after the promotion (${last - first} ms window; promotion ${times.promoted! - times.stopped!} ms after the stop)`
        : 'no refusal at all',
    );
    report.figure('failover: refusal window, first to last refusal, ms', r503 ? last - first : 0);
    report.figure('failover: last refusal after the promotion, ms', afterPromotion);
    report.figure('failover: stop to promoted, ms', times.promoted! - times.stopped!);
  } else {
    report.judge(
      'switchover: zero failed customer requests',
      r503 + r402 + unexpected === 0,
      `${refusals}; ${served} served`,
    );
    report.figure(
      'switchover: queries held in PgBouncer (PAUSE to RESUME), ms',
      times.resumed! - times.start!,
    );
  }
  report.figure(`${phase}: answers 200 / 503`, `${served} / ${r503}`);
}

/** Waits until every gateway applied the newest change (the customers just created). */
async function gatewaysKnowEverything(fleet: Fleet): Promise<void> {
  const [row] = await dbQuery<{ v: string }>(fleet, 'SELECT coalesce(max(id), 0)::text AS v FROM change_log');
  const newest = Number(row?.v ?? 0);
  const deadline = Date.now() + 15_000;
  for (const health of fleet.ports.gatewayHealth) {
    for (;;) {
      const res = await fetch(`http://127.0.0.1:${health}/readyz`, { signal: AbortSignal.timeout(5000) });
      const body = (await res.json()) as { info?: { cacheVersion?: number } };
      if ((body.info?.cacheVersion ?? 0) >= newest) break;
      if (Date.now() > deadline)
        throw new Error(`the gateway with health port ${health} has not applied change ${newest}`);
      await sleep(20);
    }
  }
}
