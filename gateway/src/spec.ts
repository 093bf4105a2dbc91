// The ProxyGateway spec as the gateway reads it: from the YAML the operator mounts (one object),
// or from dev's local YAML (a list). crds/proxygateway.yaml is the source of truth for the shape;
// a test checks this schema accepts what the CRD's examples hold.
import { readFile } from 'node:fs/promises';
import { parseAllDocuments } from 'yaml';
import { z } from 'zod';

export { PRODUCTS as PLANS, type Product as Plan } from '#common/products.ts';
import { PRODUCTS } from '#common/products.ts';
import { parseCidr } from '#common/cidr.ts';
import { PROXY_PROTOCOL_MODES, type ProxyProtocolMode } from './proxy/proxy-protocol.ts';
import { MAX_THROTTLE_BYTES_PER_SECOND, MIN_THROTTLE_BYTES_PER_SECOND } from '#common/throttle.ts';

const lowerName = z.string().regex(/^[a-z0-9]+$/, 'lowercase letters and digits, no spaces');

export const exitSchema = z
  .object({
    name: z.string().min(1),
    /** A local source address to bind outgoing connections to. */
    sourceAddress: z.string().optional(),
    /** An upstream HTTP proxy to chain through, http://[user:pass@]host:port. */
    upstream: z.object({ url: z.string().url() }).optional(),
    /** Lowercase country code, or "*" to accept any targeting. */
    country: z.union([z.literal('*'), z.string().regex(/^[a-z]{2}$/)]),
    state: lowerName.optional(),
    city: lowerName.optional(),
  })
  .refine((e) => !(e.sourceAddress && e.upstream), 'an exit has a sourceAddress or an upstream, not both');
export type ExitSpec = z.infer<typeof exitSchema>;

export const proxyGatewaySpecSchema = z.object({
  plan: z.enum(PRODUCTS),
  port: z.number().int().min(1).max(65_535),
  advertisedHost: z.string().min(1),
  exits: z.array(exitSchema).min(1),
  session: z
    .object({
      defaultMinutes: z.number().int().min(1).default(10),
      maxMinutes: z.number().int().min(1).default(1440),
    })
    .default({ defaultMinutes: 10, maxMinutes: 1440 }),
  timeouts: z
    .object({
      headersSeconds: z.number().int().min(1).default(10),
      connectSeconds: z.number().int().min(1).default(10),
      idleSeconds: z.number().int().min(1).default(300),
      maxLifetimeSeconds: z.number().int().min(1).default(86_400),
    })
    .default({ headersSeconds: 10, connectSeconds: 10, idleSeconds: 300, maxLifetimeSeconds: 86_400 }),
  limits: z
    .object({
      maxConnectionsPerAccount: z.number().int().min(1).default(1000),
    })
    .default({ maxConnectionsPerAccount: 1000 }),
  /**
   * TLS on the plan's port (docs/adr/0071, 0072). The certificate comes from the process's
   * environment (PROXYFLEET_GATEWAY_TLS_CERT/_KEY; in Kubernetes from spec.tls.secretName, which
   * only the operator reads); refuseCredentialsInClear answers 407 to credentials not sent over TLS.
   */
  tls: z.object({ refuseCredentialsInClear: z.boolean().default(false) }).optional(),
  /**
   * The PROXY protocol on the plan's port (docs/adr/0102): `optional` reads a header when one comes
   * from a trusted source, `required` refuses connections without one; a header from a source
   * outside trustedCidrs is refused in both. Absent: off.
   */
  proxyProtocol: z
    .object({
      mode: z.enum(PROXY_PROTOCOL_MODES).default('off'),
      trustedCidrs: z
        .array(z.string().refine((c) => parseCidr(c) !== undefined, 'an address range, a.b.c.d/n or x::/n'))
        .default([]),
    })
    .refine((p) => p.mode === 'off' || p.trustedCidrs.length > 0, {
      message: 'optional and required need trustedCidrs: the balancers whose headers are believed',
      path: ['trustedCidrs'],
    })
    .optional(),
  /** The plan's default bandwidth cap per account, fleet-wide (docs/adr/0035); absent: none. */
  throttle: z
    .object({
      bytesPerSecond: z.number().int().min(MIN_THROTTLE_BYTES_PER_SECOND).max(MAX_THROTTLE_BYTES_PER_SECOND),
    })
    .optional(),
});
export type ProxyGatewaySpec = z.infer<typeof proxyGatewaySpecSchema>;

export const proxyGatewaySchema = z.object({
  apiVersion: z.literal('proxyfleet.io/v1alpha1'),
  kind: z.literal('ProxyGateway'),
  metadata: z.object({ name: z.string().min(1) }).loose(),
  spec: proxyGatewaySpecSchema.loose(),
});
export type ProxyGateway = z.infer<typeof proxyGatewaySchema>;

/**
 * The operator keeps upstream URLs with credentials out of the ConfigMap: such an exit has
 * `upstream: { urlFile }`, a file of a mounted Secret holding the URL, read here into `url`.
 */
async function readUpstreamUrlFiles(value: unknown): Promise<void> {
  const exits = (value as { spec?: { exits?: unknown } }).spec?.exits;
  if (!Array.isArray(exits)) return;
  for (const exit of exits as Array<{ upstream?: { url?: unknown; urlFile?: unknown } } | null>) {
    const upstream = exit?.upstream;
    if (upstream && typeof upstream.urlFile === 'string' && upstream.url === undefined) {
      upstream.url = (await readFile(upstream.urlFile, 'utf8')).trim();
    }
  }
}

/**
 * The gateway with the environment's PROXY protocol in place of its spec's
 * (PROXYFLEET_GATEWAY_PROXY_PROTOCOL and _TRUSTED_CIDRS); unchanged when the mode is unset.
 */
export function withProxyProtocolEnv(
  gateway: ProxyGateway,
  env: {
    PROXYFLEET_GATEWAY_PROXY_PROTOCOL?: ProxyProtocolMode | undefined;
    PROXYFLEET_GATEWAY_PROXY_PROTOCOL_TRUSTED_CIDRS: string[];
  },
): ProxyGateway {
  const mode = env.PROXYFLEET_GATEWAY_PROXY_PROTOCOL;
  if (mode === undefined) return gateway;
  const proxyProtocol = { mode, trustedCidrs: env.PROXYFLEET_GATEWAY_PROXY_PROTOCOL_TRUSTED_CIDRS };
  return { ...gateway, spec: { ...gateway.spec, proxyProtocol } };
}

/** Reads every ProxyGateway document in a YAML file; fails naming the document and field. */
export async function readProxyGateways(file: string): Promise<ProxyGateway[]> {
  const docs = parseAllDocuments(await readFile(file, 'utf8'));
  const out: ProxyGateway[] = [];
  for (const [i, doc] of docs.entries()) {
    if (doc.errors.length) throw new Error(`${file} document ${i + 1}: ${doc.errors[0]!.message}`);
    const value: unknown = doc.toJSON();
    if (value == null) continue;
    await readUpstreamUrlFiles(value);
    const parsed = proxyGatewaySchema.safeParse(value);
    if (!parsed.success) {
      const problems = parsed.error.issues.map((p) => `${p.path.join('.')}: ${p.message}`).join('; ');
      throw new Error(`${file} document ${i + 1}: ${problems}`);
    }
    out.push(parsed.data);
  }
  return out;
}
