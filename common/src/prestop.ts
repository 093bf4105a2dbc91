// A pod's preStop (GET /prestop, docs/adr/0094), the gateway's on its health port and the API's
// on its own: readiness goes false at once (health.ts), then the process keeps accepting until its
// Service endpoint is gone from kube-proxy's rules, which it sees as no new connection for a while,
// and only then lets the kubelet send SIGTERM, which closes the listener. A fixed `sleep 5` closed
// it while a loaded node's kube-proxy still sent new connections there: refused at the NodePort.
//
// Sized from kube-proxy's sync: an endpoint change reaches the rules at its next sync, at most
// --iptables-min-sync-period (1 s by default) after the EndpointSlice update, which the
// EndpointSlice controller writes within a second of the pod's deletion; QUIET_MS is three such
// periods. MIN_MS covers a process that had no traffic at all (nothing to see go quiet), MAX_MS
// bounds the wait within the pod's termination grace (the operator's PRE_STOP_SECONDS for the
// gateway; the chart's default 30 s for the API).

import type { Health } from './health.ts';
import type { Logger } from './logger.ts';

export const PRE_STOP = { minMs: 3_000, quietMs: 3_000, maxMs: 15_000, pollMs: 100 };

export interface PreStopResult {
  waitedMs: number;
  /** 'quiet': no new connection for quietMs; 'bound': still connections at maxMs. */
  ended: 'quiet' | 'bound';
}

/** Resolves once no connection arrived for quietMs (and minMs passed), or at maxMs. */
export async function untilQuiet(
  lastConnectionAt: () => number,
  options: typeof PRE_STOP = PRE_STOP,
  now: () => number = () => performance.now(),
): Promise<PreStopResult> {
  const start = now();
  for (;;) {
    const t = now();
    if (t - start >= options.minMs && t - Math.max(lastConnectionAt(), start) >= options.quietMs)
      return { waitedMs: Math.round(t - start), ended: 'quiet' };
    if (t - start >= options.maxMs) return { waitedMs: Math.round(t - start), ended: 'bound' };
    await new Promise((r) => setTimeout(r, options.pollMs));
  }
}

/** Sets the process's preStop (health.ts's /prestop): untilQuiet on its accepted connections, logged. */
export function drainOnPreStop(health: Health, lastConnectionAt: () => number, logger: Logger): void {
  health.setPreStop(async () => {
    const result = await untilQuiet(lastConnectionAt);
    logger.info(result, 'preStop: no new connections');
    return result;
  });
}
