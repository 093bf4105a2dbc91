// The NetworkPolicy of a ProxyGateway's pods (docs/adr/0120, addendum): desired.ts adds it for a
// gateway whose pods are not hostNetwork (NetworkPolicy does not apply to the node's network
// namespace) when the operator is configured with one (PROXYFLEET_GATEWAY_NETWORK_POLICY, which
// the chart renders from its values). A pure function of the CR and those options.
//
// In: the public port from anywhere (customers, load balancers; TLS is served on the same port),
// the health port from `healthFrom` (empty: anywhere, as the kubelet's probes come from node
// addresses that no policy can name portably). Out: DNS, the rules the chart renders (the
// database or its PgBouncer, the relay, each peer qualified with its namespace), the internet on
// any port except the cluster's own ranges, and the ranges the destination guard exempts
// (PROXYFLEET_GATEWAY_ALLOW_CIDRS), which may lie inside those ranges.
import { isIP } from 'node:net';
import { z } from 'zod';
import type { ProxyGateway } from '../crds/types.generated.ts';
import { healthPort } from './placement.ts';

const cidr = z.string().refine((s) => {
  const [address, prefix, ...rest] = s.split('/');
  const family = isIP(address ?? '');
  const bits = Number(prefix);
  return (
    rest.length === 0 &&
    family !== 0 &&
    /^[0-9]{1,3}$/.test(prefix ?? '') &&
    bits <= (family === 4 ? 32 : 128)
  );
}, 'must be a CIDR range (10.0.0.0/8, fd00::/8)');

const portSchema = z
  .object({
    protocol: z.enum(['TCP', 'UDP', 'SCTP']).optional(),
    port: z.union([z.number().int().min(1).max(65_535), z.string().min(1)]).optional(),
    endPort: z.number().int().min(1).max(65_535).optional(),
  })
  .strict();
/** A NetworkPolicyPeer, passed through as the chart rendered it (the API server validates it). */
const peerSchema = z.record(z.string(), z.unknown());

export const gatewayNetworkPolicySchema = z
  .object({
    /** Egress rules beside DNS and the internet: the database (or PgBouncer) and the relay. */
    egress: z
      .array(z.object({ to: z.array(peerSchema).optional(), ports: z.array(portSchema).optional() }).strict())
      .default([]),
    /** The cluster's pod and Service ranges: excluded from the egress to the internet. */
    clusterCidrs: z.array(cidr).default([]),
    /** Peers admitted to the health port; empty: any. */
    healthFrom: z.array(peerSchema).default([]),
  })
  .strict();

/** The operator's options for the gateways' NetworkPolicy; absent: none is written (and an owned one removed). */
export type GatewayNetworkPolicyOptions = z.infer<typeof gatewayNetworkPolicySchema>;

/** PROXYFLEET_GATEWAY_NETWORK_POLICY: JSON of GatewayNetworkPolicyOptions; unset or empty: off. */
export const gatewayNetworkPolicyEnv = z
  .string()
  .optional()
  .transform((s, ctx) => {
    if (s === undefined || s.trim() === '') return undefined;
    try {
      return JSON.parse(s) as unknown;
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: `not JSON: ${(err as Error).message}` });
      return z.NEVER;
    }
  })
  .pipe(gatewayNetworkPolicySchema.optional());

const tcp = (port: number) => ({ protocol: 'TCP', port });
const family = (range: string) => (range.includes(':') ? 6 : 4);

/** The internet on any port, without the cluster's ranges: one rule, an ipBlock per address family. */
function internet(clusterCidrs: readonly string[]) {
  const block = (all: string, v: 4 | 6) => {
    const except = clusterCidrs.filter((c) => family(c) === v);
    return { ipBlock: { cidr: all, ...(except.length > 0 ? { except } : {}) } };
  };
  return { to: [block('0.0.0.0/0', 4), block('::/0', 6)] };
}

/** The policy's spec for this gateway's pods (`selector`: the Deployment's own matchLabels). */
export function gatewayNetworkPolicySpec(
  pgw: ProxyGateway,
  selector: Record<string, string>,
  policy: GatewayNetworkPolicyOptions,
  allowCidrs: readonly string[] = [],
) {
  const health = { ports: [tcp(healthPort(pgw))] };
  return {
    podSelector: { matchLabels: selector },
    policyTypes: ['Ingress', 'Egress'],
    ingress: [
      { ports: [tcp(pgw.spec.port)] },
      policy.healthFrom.length > 0 ? { from: policy.healthFrom, ...health } : health,
    ],
    egress: [
      { ports: [{ protocol: 'UDP', port: 53 }, tcp(53)] },
      ...policy.egress,
      internet(policy.clusterCidrs),
      ...(allowCidrs.length > 0 ? [{ to: allowCidrs.map((c) => ({ ipBlock: { cidr: c } })) }] : []),
    ],
  };
}
