// One owner per plan endpoint (gateway_endpoints, one row per plan). The first ProxyGateway to
// claim a plan's row owns it; another ProxyGateway of the same plan cannot overwrite it (it is
// reported PlanConflict) until the owner is deleted and releases the row. Without this, a tenant
// creating a ProxyGateway of a plan in their own namespace would redirect every customer's
// generated proxies to their host.
import type { Pool } from '#common/db/pool.ts';
import {
  gatewayEndpointValues,
  UPSERT_GATEWAY_ENDPOINT,
  type GatewayEndpoint,
} from '#common/gateway-endpoints.ts';

export type ClaimResult = { claimed: true } | { claimed: false; owner: string };

/** Inserts or updates the plan's row only when it is free or already ours (one statement, race-free). */
export async function claimGatewayEndpoint(
  pool: Pool,
  endpoint: GatewayEndpoint,
  source: string,
): Promise<ClaimResult> {
  const { rows } = await pool.query<{ source: string }>(
    `${UPSERT_GATEWAY_ENDPOINT}, updated_at = now()
       WHERE gateway_endpoints.source = EXCLUDED.source
     RETURNING source`,
    gatewayEndpointValues(endpoint, source),
  );
  if (rows.length > 0) return { claimed: true };
  const owner = await pool.query<{ source: string }>('SELECT source FROM gateway_endpoints WHERE plan = $1', [
    endpoint.plan,
  ]);
  // Released between the two statements: the next reconcile claims it.
  return { claimed: false, owner: owner.rows[0]?.source ?? 'nobody (released just now)' };
}

/** Releases the plan's row if this source owns it (a ProxyGateway being deleted, or changing plan). */
export async function releaseGatewayEndpoints(pool: Pool, source: string, keepPlan?: string): Promise<void> {
  await pool.query('DELETE FROM gateway_endpoints WHERE source = $1 AND plan IS DISTINCT FROM $2', [
    source,
    keepPlan ?? null,
  ]);
}
