// The fleet scenario's assertions (scenarios/fleet.ts ran the traffic): k6 thresholds, bytes
// billed against bytes moved, refusals, revocation on every process, sticky sessions, B's
// overspend after the SIGKILL, the dashboard's queries; and the run's figures for the report.
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { z } from 'zod';
import { FLUSH_MS } from '../../gateway/src/accounting/ledger.ts';
import { overspendBound } from '../../gateway/src/accounting/policy.ts';
import { REPO_ROOT, type Fleet } from '../fleet/fleet.ts';
import type { Prometheus } from '../prom.ts';
import { fetchThroughProxy, type Account } from '../run/clients.ts';
import { quantile, sleep, type RunContext } from '../run/context.ts';
import type { DbSnapshot } from '../run/db-cost.ts';
import { metric, type Summary } from '../run/k6.ts';
import type { FleetProfile } from './fleet-profile.ts';

/** p99 of the time from the admin call's answer until a process refuses the revoked credential. */
const REVOCATION_P99_MS = 100;
/**
 * The smoke runs on a busy 2-core CI machine with few samples (p99 is the maximum): there a p99
 * over 100 ms is a warning, and only a credential still accepted after 1 s fails the run.
 */
const SMOKE_REVOCATION_MS = 1000;
/**
 * Bytes billed may differ from the bytes k6 moved by this share (docs/loadtest.md: k6 counts a
 * connection's bytes when it reads or writes them, the gateway when they are delivered).
 */
const BILLING_TOLERANCE = 0.01;
/**
 * How a gateway refuses E's old password: wrong_password, or unknown_user while its credential
 * cache drops the changed account and reads it again (fail closed, a few milliseconds).
 */
const OLD_PASSWORD_REASONS = ['wrong_password', 'unknown_user'];

export interface FleetRun {
  profile: FleetProfile;
  prom: Prometheus;
  basic: { code: number; summary: Summary | undefined };
  advanced: { code: number; summary: Summary | undefined };
  /** Bytes this runner moved through the advanced gateway itself (billed too). */
  advancedProbeBytes: number;
  runStart: number;
  runEnd: number;
  apiLatencies: number[];
  gatewayLatencies: number[];
  A: Account;
  B: Account;
  originHttp: string;
  killedAt: number;
  before: DbSnapshot;
  after: DbSnapshot;
  connections: Record<string, number>;
  restartMs: number;
  allKnownMs: number;
}

export async function judgeFleetRun(fleet: Fleet, ctx: RunContext, run: FleetRun): Promise<string[][]> {
  const { smoke, say, judge } = ctx;
  const { profile, prom, basic, advanced, advancedProbeBytes, runStart, runEnd } = run;
  const { apiLatencies, gatewayLatencies, A, B, originHttp, killedAt, before, after, connections } = run;
  const { restartMs, allKnownMs } = run;
  const p = fleet.ports;
  const at = Date.now() / 1000;
  const range = `${Math.ceil(at - runStart) + 5}s`;

  // 1. k6 thresholds.
  judge(
    'k6 thresholds (basic: keep-alive, sticky, CONNECT, API, revoked key, exhaustion)',
    basic.code === 0,
    `k6 exit ${basic.code}`,
  );
  judge('k6 thresholds (advanced: plain and TLS)', advanced.code === 0, `k6 exit ${advanced.code}`);
  if (!basic.summary || !advanced.summary) {
    judge('k6 summaries written', false, 'a k6 summary is missing');
    return [];
  }

  // 2. Bytes billed vs bytes k6 moved (advanced: nothing disturbed it).
  const k6Advanced = metric(advanced.summary, 'data_sent') + metric(advanced.summary, 'data_received');
  const billedAdvanced = await prom.scalar('sum(proxyfleet_gateway_billed_bytes_total{plan="advanced"})', at);
  const expected = k6Advanced + advancedProbeBytes;
  const diff = (billedAdvanced - expected) / expected;
  judge(
    'bytes billed = bytes k6 moved (advanced)',
    Math.abs(diff) <= BILLING_TOLERANCE,
    `billed ${billedAdvanced}, k6 ${k6Advanced} + probes ${advancedProbeBytes} = ${expected} (${(diff * 100).toFixed(3)} %, tolerance ${BILLING_TOLERANCE * 100} %)`,
  );
  const k6BasicBytes = metric(basic.summary, 'data_sent') + metric(basic.summary, 'data_received');
  const billedBasic = await prom.scalar(
    `sum(increase(proxyfleet_gateway_billed_bytes_total{plan="basic"}[${range}]))`,
    at,
  );

  // 3. No refusal the scenario did not cause. The fleet is fresh, so any counter above zero moved
  // during the run; max_over_time also sees a series whose first scrape already shows its final
  // value (increase() would call that 0) and the counts of the gateway killed mid-run.
  // status_class="none" is a request the client abandoned before any answer (reason
  // client_abandoned): nothing was refused, so it is a figure, not a failure (k6 gives up on a
  // request when a gateway behind HAProxy is killed, or when this busy machine is slow).
  const refusals = await prom.query(
    `sum by (instance_name, plan, reason, status_class) (max_over_time(proxyfleet_gateway_refusals_total{status_class!="none"}[${range}])) > 0`,
    at,
  );
  const abandoned = await prom.scalar(
    `sum(max_over_time(proxyfleet_gateway_refusals_total{status_class="none"}[${range}]))`,
    at,
  );
  say(`requests the client abandoned before an answer: ${abandoned}`);
  const authFailures = await prom.query(
    `sum by (instance_name, plan, reason) (max_over_time(proxyfleet_gateway_auth_failures_total[${range}])) > 0`,
    at,
  );
  const apiAuthFailures = await prom.query(
    `sum by (instance_name, reason) (max_over_time(proxyfleet_api_auth_failures_total[${range}])) > 0`,
    at,
  );
  const exitFailures = await prom.query(
    `sum by (instance_name, plan, reason) (max_over_time(proxyfleet_gateway_exit_failures_total[${range}])) > 0`,
    at,
  );
  const unexpected = [
    ...refusals
      .filter(
        (s) =>
          !(s.labels.reason === 'no_bandwidth' && s.labels.plan === 'basic') &&
          !OLD_PASSWORD_REASONS.includes(s.labels.reason ?? ''),
      )
      .map((s) => `refusal ${JSON.stringify(s.labels)} x${s.value}`),
  ];
  // When each unexpected refusal first appeared, in seconds after k6 started (for the diagnosis).
  for (const s of refusals.filter(
    (x) => x.labels.reason !== 'no_bandwidth' && !OLD_PASSWORD_REASONS.includes(x.labels.reason ?? ''),
  )) {
    const selector = Object.entries(s.labels)
      .map(([k, v]) => `${k}="${v}"`)
      .join(',');
    const first = await prom.scalar(
      `min_over_time(timestamp(proxyfleet_gateway_refusals_total{${selector}} > 0)[${range}:1s])`,
      at,
    );
    unexpected.push(
      `(${s.labels.reason} on ${s.labels.instance_name} first seen ${(first - runStart).toFixed(1)} s after k6 started; SIGKILL at ${profile.killAt} s)`,
    );
  }
  unexpected.push(
    ...authFailures
      .filter((s) => !OLD_PASSWORD_REASONS.includes(s.labels.reason ?? ''))
      .map((s) => `gateway auth ${JSON.stringify(s.labels)}`),
    ...apiAuthFailures
      .filter((s) => s.labels.reason !== 'revoked')
      .map((s) => `api auth ${JSON.stringify(s.labels)}`),
    ...exitFailures.map((s) => `exit failure ${JSON.stringify(s.labels)}`),
  );
  // In the smoke, on a busy CI machine, a handful (under 0.5 % of requests) is a warning: the full
  // run tolerates none.
  const unexpectedCount = refusals
    .filter(
      (x) => x.labels.reason !== 'no_bandwidth' && !OLD_PASSWORD_REASONS.includes(x.labels.reason ?? ''),
    )
    .reduce((n, x) => n + x.value, 0);
  const requests = metric(basic.summary, 'http_reqs') + metric(advanced.summary, 'http_reqs');
  judge(
    'no refusal the scenario did not cause',
    unexpected.length === 0,
    unexpected.length
      ? `${unexpectedCount} of ${requests} requests: ${unexpected.join('; ')}`
      : 'only no_bandwidth (B), wrong_password or unknown_user (E) and revoked (D)',
    smoke &&
      unexpectedCount <= 0.005 * requests &&
      exitFailures.length === 0 &&
      authFailures.every((x) => OLD_PASSWORD_REASONS.includes(x.labels.reason ?? '')),
  );

  // 4. Revocation seen by every process.
  const apiP99 = quantile(apiLatencies, 0.99);
  const gwP99 = quantile(gatewayLatencies, 0.99);
  judge(
    `revoked API key refused by both APIs within ${REVOCATION_P99_MS} ms at p99`,
    apiP99 <= REVOCATION_P99_MS,
    `${apiLatencies.length} samples, p50 ${quantile(apiLatencies, 0.5)} ms, p99 ${apiP99} ms, max ${Math.max(...apiLatencies)} ms`,
    smoke && apiP99 <= SMOKE_REVOCATION_MS,
  );
  judge(
    `reset proxy password refused by all 4 gateways within ${REVOCATION_P99_MS} ms at p99`,
    gwP99 <= REVOCATION_P99_MS,
    `${gatewayLatencies.length} samples, p50 ${quantile(gatewayLatencies, 0.5)} ms, p99 ${gwP99} ms, max ${Math.max(...gatewayLatencies)} ms`,
    smoke && gwP99 <= SMOKE_REVOCATION_MS,
  );
  const revokedBy = await prom.query(
    `sum by (instance_name) (max_over_time(proxyfleet_api_auth_failures_total{reason="revoked"}[${range}])) > 0`,
    at,
  );
  judge(
    'Prometheus: every API process refused a revoked key',
    revokedBy.length === 2,
    revokedBy.map((s) => s.labels.instance_name).join(', '),
  );
  const resetBy = await prom.query(
    `sum by (instance_name) (max_over_time(proxyfleet_gateway_auth_failures_total{reason=~"${OLD_PASSWORD_REASONS.join('|')}"}[${range}])) > 0`,
    at,
  );
  judge(
    'Prometheus: every gateway process refused the old password',
    resetBy.length === 4,
    resetBy.map((s) => s.labels.instance_name).join(', '),
  );

  // 5. Sticky sessions: the same exit from all 3 gateways (direct), and k6's own check via HAProxy.
  const sessions = smoke ? 10 : 40;
  let same = 0;
  const distinct = new Set<string>();
  for (let i = 0; i < sessions; i++) {
    const exits = await Promise.all(
      p.basicGateways.map(async (port) => {
        const r = await fetchThroughProxy(
          port,
          `${A.proxyUsername}:${A.proxyPassword}_country-us_session-check${i}`,
          `${originHttp}/ip`,
        );
        return r;
      }),
    );
    if (exits.every((e) => e && e === exits[0])) same++;
    distinct.add(exits[0] ?? '');
  }
  judge(
    'a sticky session leaves through the same exit from all 3 gateways',
    same === sessions && distinct.size > 1,
    `${same}/${sessions} sessions identical on the 3 gateways; ${distinct.size} distinct exits used; k6 sticky exit changes ${metric(basic.summary, 'sticky_exit_changes')}`,
  );

  // 6. Overspend of B after the SIGKILL.
  const db = new pg.Client({ connectionString: fleet.databaseUrl });
  await db.connect();
  const waitFold = Date.now();
  let balance: { total: number; used: number; leased: number } | undefined;
  while (Date.now() - waitFold < 30_000) {
    const { rows } = await db.query<{ total: string; used: string; leased: string; pending: string }>(
      `SELECT b.total_bytes::text AS total, b.used_bytes::text AS used, b.leased_bytes::text AS leased,
              (SELECT count(*) FROM usage_batches u WHERE u.folded_at IS NULL)::text AS pending
         FROM balances b WHERE b.account_id = $1 AND b.product = 'basic'`,
      [B.id],
    );
    const row = rows[0];
    if (row) balance = { total: Number(row.total), used: Number(row.used), leased: Number(row.leased) };
    if (row && row.pending === '0') break;
    await sleep(1000);
  }
  // Who still holds B's bytes (a pod killed with SIGKILL keeps its leases until the reaper).
  const holders = (
    await db.query<{ g: string; held: string }>(
      `SELECT gateway_id AS g, sum(granted_bytes - charged_bytes)::text AS held FROM bandwidth_leases
        WHERE account_id = $1 AND released_at IS NULL GROUP BY gateway_id ORDER BY gateway_id`,
      [B.id],
    )
  ).rows.map((r) => `${r.g} ${r.held}`);
  await db.end();
  const servedB =
    metric(basic.summary, 'data_sent{scenario:exhaust}') +
    metric(basic.summary, 'data_received{scenario:exhaust}');
  // What a SIGKILL costs the bound (docs/gateway.md, "Heartbeats and crashed gateways"): the dead
  // pod's unflushed bytes (up to FLUSH_MS of its traffic, plus one 1 s scrape of lag in this
  // measure) were never billed, and what its lease held unbilled went back to be granted again.
  // Taken from the pod's billed-bytes rate for the whole basic plan just before the kill: an upper
  // bound for B's part.
  const killedRate = await prom.scalar(
    'sum(rate(proxyfleet_gateway_billed_bytes_total{instance_name="gateway-basic-3",plan="basic"}[10s]))',
    killedAt / 1000,
  );
  const crashTerm = Math.round((killedRate * (FLUSH_MS + 1000)) / 1000);
  const bound = overspendBound(3, profile.scale) + crashTerm;
  const got402 = metric(basic.summary, 'gateway_402');
  judge(
    'overspend within the documented bound after the SIGKILL',
    balance !== undefined &&
      servedB <= balance.total + bound &&
      balance.used <= balance.total + bound &&
      got402 > 0,
    `B bought ${balance?.total}, k6 moved ${servedB} (${(servedB - (balance?.total ?? 0)).toString()} beyond), billed ${balance?.used}, still leased ${balance?.leased} (open leases: ${holders.join(', ') || 'none'}); bound ${bound} (3 pods x (256 KiB + ${profile.scale} connections x 224 KiB) + the killed pod's last ${(FLUSH_MS + 1000) / 1000} s at ${Math.round(killedRate)} B/s); ${got402} answers 402`,
  );

  // 7. Every dashboard panel's query returns data during the run.
  const dashboard = z
    .object({
      panels: z.array(
        z.object({ title: z.string(), targets: z.array(z.object({ expr: z.string() })).optional() }),
      ),
    })
    .parse(
      JSON.parse(
        await readFile(path.join(REPO_ROOT, 'charts/proxyfleet/files/proxyfleet-dashboard.json'), 'utf8'),
      ),
    );
  const empty: string[] = [];
  let panelQueries = 0;
  // The fleet has no Kubernetes, so no controller: its panels are checked by the chart's tests only.
  const skipped = dashboard.panels.filter((panel) => panel.title.startsWith('Controller'));
  for (const panel of dashboard.panels) {
    if (skipped.includes(panel)) continue;
    for (const t of panel.targets ?? []) {
      panelQueries++;
      const expr = t.expr.replaceAll('$__rate_interval', '30s').replaceAll('$__range', range);
      const mid = (runStart + runEnd) / 2;
      const found = (await prom.query(expr, mid)).length + (await prom.query(expr, at)).length;
      if (!found) empty.push(`${panel.title}: ${t.expr}`);
    }
  }
  judge(
    'every dashboard panel query returns data',
    empty.length === 0,
    `${empty.length ? `no data: ${empty.join(' | ')}` : `${panelQueries} queries`}; not checked (no controller in the fleet): ${skipped.map((x) => x.title).join(', ')}`,
    smoke,
  );

  // What the run cost the database, per gateway process (docs/scaling.md uses these).
  const seconds = after.at - before.at;
  const perGateway = (a: Record<string, number>, b: Record<string, number>) =>
    Object.fromEntries(
      Object.keys(a)
        .sort()
        .map((g) => [g, Number((((a[g] ?? 0) - (b[g] ?? 0)) / seconds).toFixed(2))]),
    );
  const cost = {
    seconds: Number(seconds.toFixed(1)),
    transactionsPerSecond: Number(((after.commits - before.commits) / seconds).toFixed(1)),
    flushesPerSecondPerGateway: perGateway(after.flushes, before.flushes),
    leasesPerSecondPerGateway: perGateway(after.leases, before.leases),
    changesPerSecond: Number(((after.changes - before.changes) / seconds).toFixed(2)),
    listeners: Object.entries(connections)
      .filter(([app]) => app.endsWith('-listen'))
      .reduce((n, [, c]) => n + c, 0),
    connections,
    gatewayRequestsPerSecond: Number((metric(basic.summary, 'http_reqs') / profile.duration).toFixed(1)),
  };
  await writeFile(path.join(ctx.resultsDir, 'database-cost.json'), JSON.stringify(cost, null, 2));
  say(`database cost: ${JSON.stringify(cost)}`);

  const rows = [
    ['bytes billed, advanced (Prometheus)', billedAdvanced],
    ['bytes k6 moved, advanced', k6Advanced],
    ['bytes billed, basic (increase, SIGKILL in the range)', Math.round(billedBasic)],
    ['bytes k6 moved, basic (includes refused requests)', k6BasicBytes],
    [
      'plain requests + tunnels (k6, both)',
      metric(basic.summary, 'http_reqs') + metric(advanced.summary, 'http_reqs'),
    ],
    ['http_req_duration p95 ms (basic)', metric(basic.summary, 'http_req_duration', 'p(95)')],
    ['http_req_duration p95 ms (advanced)', metric(advanced.summary, 'http_req_duration', 'p(95)')],
    ['failed requests (basic, SIGKILL)', metric(basic.summary, 'http_req_failed', 'passes')],
    ['revocation p99 ms, API / gateways', `${apiP99} / ${gwP99}`],
    ['gateway-basic-3 SIGKILL to ready again, ms', restartMs],
    ['new customers accepted by every gateway after, ms', allKnownMs],
    ['B overspend bytes (k6 moved - bought)', servedB - (balance?.total ?? 0)],
    ['database transactions/s (whole fleet)', cost.transactionsPerSecond],
    ['usage flushes/s per gateway', JSON.stringify(cost.flushesPerSecondPerGateway)],
    ['lease grants/s per gateway', JSON.stringify(cost.leasesPerSecondPerGateway)],
    ['change_log rows/s (NOTIFY) x listeners', `${cost.changesPerSecond} x ${cost.listeners}`],
    ['database connections mid-run by process kind', JSON.stringify(cost.connections)],
  ] as const;
  return rows.map(([k, v]) => [k, String(v)]);
}
