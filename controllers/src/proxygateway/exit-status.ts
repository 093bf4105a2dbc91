// A ProxyGateway's exits as its pods see them (docs/adr/0117), pure: each gateway pod writes its
// exits' health on its heartbeat (gateway_heartbeats.exits, migrations/0175); the reconciler reads
// the fresh rows of this gateway's pods (exit-reports.ts) and status.ts puts what is computed here
// in the status: status.exits, the Exits column (exitsReady), failedExits and the condition
// ExitAddressMissing.
import type { ConditionInput } from '../runtime/conditions.ts';
import { rfc3339 } from '../runtime/status.ts';
import type { ProxyGateway, ProxyGatewayStatus } from '../crds/types.generated.ts';

export type ExitStatus = NonNullable<ProxyGatewayStatus['exits']>[number];
type SpecExit = ProxyGateway['spec']['exits'][number];

/** One pod's heartbeat row: the pod, and its exits as written (jsonb, read as it comes). */
export interface PodExits {
  pod: string;
  exits: unknown;
}

/** One exit on one pod (gateway/src/proxy/exits.ts, ExitReport). */
interface Report {
  s: 'ok' | 'failing' | 'missing';
  ls?: number;
  lf?: number;
  e?: string;
}

/**
 * A status time is moved only when the pods' time is this much later: a busy exit succeeds every
 * second, and a status that changed at each refresh would be written (and watched) every 10 s.
 */
export const TIME_STEP_SECONDS = 60;

/** Conditions name at most this many missing addresses (the rest are counted). */
const MAX_NAMED = 5;

const STATES = new Set(['ok', 'failing', 'missing']);

/** A pod's reports by exit name; entries that are not reports are skipped (null: none sent). */
function reportsOf(raw: unknown): Map<string, Report> | undefined {
  if (!Array.isArray(raw)) return undefined;
  const out = new Map<string, Report>();
  for (const r of raw as unknown[]) {
    const o = r as Record<string, unknown> | null;
    if (typeof o?.n !== 'string' || typeof o.s !== 'string' || !STATES.has(o.s)) continue;
    const report: Report = { s: o.s as Report['s'] };
    if (typeof o.ls === 'number') report.ls = o.ls;
    if (typeof o.lf === 'number') report.lf = o.lf;
    if (typeof o.e === 'string') report.e = o.e;
    out.set(o.n, report);
  }
  return out;
}

/** Where the exit leaves: its source address, its upstream's host:port (no credentials), or the default route. */
export function exitTarget(exit: SpecExit): string {
  if (exit.sourceAddress) return exit.sourceAddress;
  if (!exit.upstream) return 'default route';
  try {
    const url = new URL(exit.upstream.url);
    return `${url.hostname}:${url.port || (url.protocol === 'https:' ? 443 : 80)}`;
  } catch {
    return 'upstream (URL not readable)';
  }
}

export interface ExitsSummary {
  exits: ExitStatus[];
  /** Exits ok on at least one pod / all exits. */
  exitsReady: string;
  /** Exits failing or missing on at least one pod. */
  failedExits: number;
  condition: ConditionInput;
}

/**
 * The exits of `spec` as the reporting pods see them. `previous` (the status as it is) keeps its
 * times while the pods' are less than TIME_STEP_SECONDS later. A pod that reports nothing (an
 * earlier release) is not counted; an exit a pod does not report (a spec it has not loaded yet)
 * is not counted on that pod.
 */
export function summarizeExits(
  spec: readonly SpecExit[],
  pods: readonly PodExits[],
  previous: readonly ExitStatus[] = [],
): ExitsSummary {
  const reporting = pods.map((p) => reportsOf(p.exits)).filter((r) => r !== undefined);
  const before = new Map(previous.map((e) => [e.name, e]));
  const missing: string[] = [];
  let ready = 0;
  let failed = 0;
  const exits = spec.map((exit) => {
    const pods = { ok: 0, failing: 0, missing: 0 };
    let ls = 0;
    let lf = 0;
    let error = '';
    for (const reports of reporting) {
      const r = reports.get(exit.name);
      if (!r) continue;
      pods[r.s]++;
      if ((r.ls ?? 0) > ls) ls = r.ls!;
      if ((r.lf ?? 0) > lf) [lf, error] = [r.lf!, r.e ?? ''];
    }
    if (pods.ok > 0) ready++;
    if (pods.failing + pods.missing > 0) failed++;
    if (pods.missing > 0)
      missing.push(`${exitTarget(exit)} (exit ${exit.name}) on ${pods.missing}/${reporting.length} pods`);
    const status: ExitStatus = { name: exit.name, target: exitTarget(exit), pods };
    const old = before.get(exit.name);
    const success = stepped(old?.lastSuccess, ls);
    if (success) status.lastSuccess = success;
    const failure = stepped(old?.lastFailure, lf);
    if (failure) status.lastFailure = failure;
    // The error goes with the failure time shown.
    const shownError = failure === old?.lastFailure ? old?.lastError : error;
    if (failure && shownError) status.lastError = shownError;
    return status;
  });
  return {
    exits,
    exitsReady: `${ready}/${spec.length}`,
    failedExits: failed,
    condition: missingCondition(missing, reporting.length),
  };
}

/** The time to show: the pods' (epoch seconds), unless the shown one is less than a step older. */
function stepped(shown: string | undefined, seconds: number): string | undefined {
  if (seconds === 0) return shown;
  if (shown !== undefined && seconds * 1000 - Date.parse(shown) < TIME_STEP_SECONDS * 1000) return shown;
  return rfc3339(new Date(seconds * 1000));
}

function missingCondition(missing: readonly string[], reporting: number): ConditionInput {
  if (reporting === 0)
    return {
      type: 'ExitAddressMissing',
      status: 'Unknown',
      reason: 'NoReports',
      message: 'no gateway pod reports its exits (none running, or pods of an earlier release)',
    };
  if (missing.length === 0)
    return {
      type: 'ExitAddressMissing',
      status: 'False',
      reason: 'AddressesPresent',
      message: "every exit's source address is on its pods' interfaces",
    };
  const named = missing.slice(0, MAX_NAMED).join(', ');
  const more = missing.length > MAX_NAMED ? ` and ${missing.length - MAX_NAMED} more exits` : '';
  return {
    type: 'ExitAddressMissing',
    status: 'True',
    reason: 'AddressMissing',
    message: `source address on no interface of the pod, the exit skipped there: ${named}${more}`,
  };
}
