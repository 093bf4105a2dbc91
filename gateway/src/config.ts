import { z } from 'zod';
import { baseEnv, cidrList, parseConfig, port, relayUrlEnv, type Env } from '#common/config.ts';
import { parseCidr } from '#common/cidr.ts';
import { PROXY_PROTOCOL_MODES } from './proxy/proxy-protocol.ts';

/**
 * The PROXY protocol on the plan's port (docs/adr/0102), for a gateway run outside Kubernetes:
 * set, it replaces spec.proxyProtocol (of every gateway `npm start` runs).
 */
export const proxyProtocolEnv = {
  PROXYFLEET_GATEWAY_PROXY_PROTOCOL: z.enum(PROXY_PROTOCOL_MODES).optional(),
  /** The balancers whose headers are believed, comma-separated ranges. */
  PROXYFLEET_GATEWAY_PROXY_PROTOCOL_TRUSTED_CIDRS: cidrList.refine(
    (list) => list.every((c) => parseCidr(c) !== undefined),
    'comma-separated address ranges, a.b.c.d/n or x::/n',
  ),
};

/** optional and required need trusted ranges (a refinement of a schema holding proxyProtocolEnv). */
export const proxyProtocolNeedsTrust: [
  (c: {
    PROXYFLEET_GATEWAY_PROXY_PROTOCOL?: string;
    PROXYFLEET_GATEWAY_PROXY_PROTOCOL_TRUSTED_CIDRS: string[];
  }) => boolean,
  { message: string; path: string[] },
] = [
  (c: {
    PROXYFLEET_GATEWAY_PROXY_PROTOCOL?: string;
    PROXYFLEET_GATEWAY_PROXY_PROTOCOL_TRUSTED_CIDRS: string[];
  }) =>
    (c.PROXYFLEET_GATEWAY_PROXY_PROTOCOL ?? 'off') === 'off' ||
    c.PROXYFLEET_GATEWAY_PROXY_PROTOCOL_TRUSTED_CIDRS.length > 0,
  {
    message: 'PROXYFLEET_GATEWAY_PROXY_PROTOCOL optional or required needs the balancers it trusts',
    path: ['PROXYFLEET_GATEWAY_PROXY_PROTOCOL_TRUSTED_CIDRS'],
  },
];

export const gatewayEnv = {
  /** A YAML file holding one ProxyGateway object (the operator mounts it from the CR). */
  PROXYFLEET_GATEWAY_CONFIG: z.string().min(1),
  /** Ranges exempt from the destination guard (tests and demos). */
  PROXYFLEET_GATEWAY_ALLOW_CIDRS: cidrList,
  PROXYFLEET_HEALTH_PORT: port(9090),
  /** Overrides spec.port (0 = any free port; tests). */
  PROXYFLEET_GATEWAY_PORT: z.coerce.number().int().min(0).max(65_535).optional(),
  /** Benchmark only: "bare" turns authentication and metering off (docs/benchmarks.md). */
  PROXYFLEET_GATEWAY_FEATURES: z.enum(['full', 'bare']).default('full'),
  /** Benchmark only: "off" sends every CONNECT head through node:http (docs/adr/0027). */
  PROXYFLEET_GATEWAY_CONNECT_FAST_PATH: z.enum(['on', 'off']).default('on'),
  /** Address the proxy listens on. */
  PROXYFLEET_GATEWAY_HOST: z.string().default('0.0.0.0'),
  /** Open customer connections of the process (default: half the open-file limit less 1024). */
  PROXYFLEET_GATEWAY_MAX_CONNECTIONS: z.preprocess(
    (v) => (v === '' ? undefined : v),
    z.coerce.number().int().min(1).optional(),
  ),
  /** Connections not yet authenticated, per source address. */
  PROXYFLEET_GATEWAY_MAX_UNAUTHENTICATED_PER_SOURCE: z.coerce.number().int().min(1).default(256),
  /**
   * Failed logins per source address within a minute before that address is answered 429 for a
   * while. Raise it where many customers share one address (a NAT, or the load-test fleet, whose
   * clients all come from 127.0.0.1).
   */
  PROXYFLEET_GATEWAY_AUTH_FAILURES_PER_MINUTE: z.coerce.number().int().min(1).default(20),
  /**
   * Share of access-log lines (one per request, tunnel and refusal) logged at info, 0 to 1; the
   * provider-side refusals always are, and every line is at debug (docs/gateway.md).
   */
  PROXYFLEET_GATEWAY_ACCESS_LOG_SAMPLE: z.coerce.number().min(0).max(1).default(0.01),
  /**
   * TLS on the plan's port (docs/adr/0071): a PEM certificate chain and its private key. Both or
   * neither; read again every PROXYFLEET_GATEWAY_TLS_RELOAD_SECONDS and replaced when they change.
   */
  PROXYFLEET_GATEWAY_TLS_CERT: z.string().min(1).optional(),
  PROXYFLEET_GATEWAY_TLS_KEY: z.string().min(1).optional(),
  PROXYFLEET_GATEWAY_TLS_RELOAD_SECONDS: z.coerce.number().int().min(1).max(3600).default(10),
  /**
   * Seconds between usage flushes (one round trip each, docs/gateway.md): a crash leaves up to
   * this long of the pod's traffic unbilled; longer costs the database less per pod.
   */
  PROXYFLEET_GATEWAY_FLUSH_SECONDS: z.coerce.number().min(0.5).max(60).default(2),
  /** Identifies this pod in usage batches and leases; the pod name in Kubernetes. */
  PROXYFLEET_GATEWAY_ID: z.string().min(1).optional(),
  ...proxyProtocolEnv,
};

export const gatewaySchema = z
  .object({ ...baseEnv, ...relayUrlEnv, ...gatewayEnv })
  .refine(
    (c) => (c.PROXYFLEET_GATEWAY_TLS_CERT === undefined) === (c.PROXYFLEET_GATEWAY_TLS_KEY === undefined),
    {
      message: 'set both PROXYFLEET_GATEWAY_TLS_CERT and PROXYFLEET_GATEWAY_TLS_KEY, or neither',
      path: ['PROXYFLEET_GATEWAY_TLS_KEY'],
    },
  )
  .refine(...proxyProtocolNeedsTrust);
export const loadGatewayConfig = (env?: Env) => parseConfig(gatewaySchema, env);
