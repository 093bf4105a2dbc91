// The heartbeats of a ProxyGateway's pods (docs/adr/0117): a gateway pod's id is its name (the
// downward API, pod.ts), and the pods of its Deployment are named by Kubernetes
// `<deployment>-<pod-template-hash>-<5 random>`, the part before the random one cut at 58
// characters. One query per ProxyGateway and refresh: its plan's fresh rows whose id starts with
// the Deployment's name (gateway_heartbeats_plan_beat_idx), the exact shape checked here.
import type { Pool } from '#common/db/pool.ts';
import type { PodExits } from './exit-status.ts';

/** Kubernetes' alphabet for generated name parts (k8s.io/apimachinery rand.String, SafeEncodeString). */
const GENERATED = '[bcdfghjklmnpqrstvwxz2456789]';
const RANDOM_SUFFIX = new RegExp(`^${GENERATED}{5}$`);
/** A generated name's base is cut to this length before the random suffix (names.SimpleNameGenerator). */
const MAX_BASE = 58;
const HASH_THEN_DASH = new RegExp(`^${GENERATED}+-$`);
const HASH_CUT = new RegExp(`^${GENERATED}*-?$`);

/** The prefix every pod name of the Deployment starts with. */
export const podPrefix = (deployment: string) => `${deployment}-`.slice(0, MAX_BASE);

/** Whether `pod` is a name the ReplicaSets of Deployment `deployment` give their pods. */
export function isGatewayPod(pod: string, deployment: string): boolean {
  const base = pod.slice(0, -5);
  if (!RANDOM_SUFFIX.test(pod.slice(-5)) || !base.startsWith(podPrefix(deployment))) return false;
  const hash = base.slice(podPrefix(deployment).length);
  // Cut at MAX_BASE: whatever part of `<hash>-` fits; else the whole hash and its dash.
  return base.length === MAX_BASE ? HASH_CUT.test(hash) : HASH_THEN_DASH.test(hash);
}

/** The exits reported by the pods of `deployment` whose heartbeat is fresh (gateway_dead_after()). */
export async function readPodExits(pool: Pool, plan: string, deployment: string): Promise<PodExits[]> {
  const { rows } = await pool.query<{ gateway_id: string; exits: unknown }>(
    `SELECT gateway_id, exits FROM gateway_heartbeats
      WHERE plan = $1 AND beat_at >= now() - gateway_dead_after() AND starts_with(gateway_id, $2)
      ORDER BY gateway_id`,
    [plan, podPrefix(deployment)],
  );
  return rows
    .filter((r) => isGatewayPod(r.gateway_id, deployment))
    .map((r) => ({ pod: r.gateway_id, exits: r.exits }));
}
