// Each plan's public gateway address (migrations/0003). Written by the operator and by dev,
// read by proxy generation.
import type { Pool } from './db/pool.ts';
import type { Product } from './products.ts';

export interface GatewayEndpoint {
  plan: Product;
  host: string;
  port: number;
  /** The plan's gateways serve TLS on the port (migrations/0115, docs/adr/0083); false when unset. */
  tls?: boolean;
  /** They refuse credentials sent in clear (migrations/0125, docs/adr/0096); false when unset. */
  refuseCredentialsInClear?: boolean;
  /**
   * Where its exits let traffic out (migrations/0140): each exit's country ("*": any), state and
   * city. Unset or null: not said, and generate refuses no target for the plan.
   */
  locations?: ServedLocation[] | null;
}

/** One exit's place, as the ProxyGateway's spec.exits gives it. */
export interface ServedLocation {
  country: string;
  state?: string;
  city?: string;
}

/** The places of a ProxyGateway's exits (spec.exits), for its endpoint row. */
export const exitLocations = (exits: readonly ServedLocation[]): ServedLocation[] =>
  exits.map((e) => ({
    country: e.country,
    ...(e.state ? { state: e.state } : {}),
    ...(e.city ? { city: e.city } : {}),
  }));

/** Default ports: basic and advanced from the spec (section 5); the rest chosen in docs/adr/0003. */
export const DEFAULT_GATEWAY_PORTS: Readonly<Record<Product, number>> = {
  basic: 12321,
  advanced: 61236,
  light: 10080,
  mobile: 10081,
  datacenter: 10082,
};

/**
 * The insert of a plan's row and the start of its update (every column but source), which
 * upsertGatewayEndpoint and the operator's claim (controllers/src/proxygateway/endpoint.ts) finish
 * each their own way; its parameters are gatewayEndpointValues.
 */
export const UPSERT_GATEWAY_ENDPOINT = `INSERT INTO gateway_endpoints (plan, host, port, tls, refuse_credentials_in_clear, source, locations)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (plan) DO UPDATE SET host = EXCLUDED.host, port = EXCLUDED.port, tls = EXCLUDED.tls,
       refuse_credentials_in_clear = EXCLUDED.refuse_credentials_in_clear, locations = EXCLUDED.locations`;

export const gatewayEndpointValues = (endpoint: GatewayEndpoint, source: string): unknown[] => [
  endpoint.plan,
  endpoint.host,
  endpoint.port,
  endpoint.tls ?? false,
  endpoint.refuseCredentialsInClear ?? false,
  source,
  endpoint.locations ? JSON.stringify(endpoint.locations) : null,
];

export async function upsertGatewayEndpoint(
  pool: Pool,
  endpoint: GatewayEndpoint,
  source: string,
): Promise<void> {
  await pool.query(
    `${UPSERT_GATEWAY_ENDPOINT}, source = EXCLUDED.source, updated_at = now()`,
    gatewayEndpointValues(endpoint, source),
  );
}

export async function readGatewayEndpoint(
  pool: Pool,
  plan: Product,
): Promise<Required<GatewayEndpoint> | undefined> {
  const { rows } = await pool.query<Required<GatewayEndpoint>>(
    `SELECT plan, host, port, tls, refuse_credentials_in_clear AS "refuseCredentialsInClear", locations
       FROM gateway_endpoints WHERE plan = $1`,
    [plan],
  );
  return rows[0];
}

/** The plans whose gateways serve TLS (the https:// form works for them), in plan order. */
export async function plansServingTls(pool: Pool): Promise<Product[]> {
  const { rows } = await pool.query<{ plan: Product }>(
    'SELECT plan FROM gateway_endpoints WHERE tls ORDER BY plan',
  );
  return rows.map((r) => r.plan);
}
