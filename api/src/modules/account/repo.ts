import type { Pool } from '#common/db/pool.ts';
import type { AccountStatus } from '#common/accounts/accounts.ts';
import type { Product } from '#common/products.ts';

export interface AccountRecord {
  id: string;
  email: string;
  status: AccountStatus;
  createdAt: Date;
  proxyUsername: string;
  alerts: {
    lowBandwidth: boolean;
    newInvoice: boolean;
    serverAlerts: boolean;
    lowBandwidthPercent: number;
    lowBandwidthFloorGb: number | null;
  };
  autoRefill: {
    product: Product;
    enabled: boolean;
    thresholdBytes: number;
    refillBytes: number;
    maxRefillsPerMonth: number;
  }[];
  throttles: { product: Product; bytesPerSecond: number }[];
  apiKeys: {
    id: string;
    name: string;
    kind: 'primary' | 'named';
    prefix: string;
    last4: string;
    createdAt: string;
  }[];
}

/** The account with its settings and active keys, in one round trip; undefined if it does not exist. */
export async function readAccount(pool: Pool, accountId: string): Promise<AccountRecord | undefined> {
  const { rows } = await pool.query<AccountRecord>(
    `SELECT a.id, a.email, a.status, a.created_at AS "createdAt", c.username AS "proxyUsername",
            json_build_object('lowBandwidth', coalesce(s.low_bandwidth, true), 'newInvoice', coalesce(s.new_invoice, true),
                              'serverAlerts', coalesce(s.server_alerts, false),
                              'lowBandwidthPercent', coalesce(s.low_bandwidth_percent, 10),
                              'lowBandwidthFloorGb', round(s.low_bandwidth_floor_bytes / 1e9, 9)::float8) AS alerts,
            coalesce((SELECT json_agg(json_build_object('product', r.product, 'enabled', r.enabled,
                        'thresholdBytes', r.threshold_bytes, 'refillBytes', r.refill_bytes,
                        'maxRefillsPerMonth', r.max_refills_per_month) ORDER BY r.product)
                        FROM auto_refill_settings r WHERE r.account_id = a.id), '[]'::json) AS "autoRefill",
            coalesce((SELECT json_agg(json_build_object('product', t.product, 'bytesPerSecond', t.bytes_per_second)
                        ORDER BY t.product)
                        FROM account_throttles t WHERE t.account_id = a.id), '[]'::json) AS throttles,
            coalesce((SELECT json_agg(json_build_object('id', k.id, 'name', k.name, 'kind', k.kind, 'prefix', k.prefix,
                        'last4', k.last4, 'createdAt', to_char(k.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
                        ORDER BY k.kind DESC, k.created_at, k.id)
                        FROM api_keys k WHERE k.account_id = a.id AND k.revoked_at IS NULL), '[]'::json) AS "apiKeys"
       FROM accounts a
       LEFT JOIN proxy_credentials c ON c.account_id = a.id
       LEFT JOIN alert_settings s ON s.account_id = a.id
      WHERE a.id = $1`,
    [accountId],
  );
  return rows[0];
}
