import { withTransaction, type Pool, type PoolClient } from '#common/db/pool.ts';
import { isDeepStrictEqual } from 'node:util';
import { lockAccountForAudit, recordAudit, type AuditActor } from '#common/audit/record.ts';
import type { AccountStatus } from '#common/accounts/accounts.ts';
import { BYTES_PER_GB, type Product } from '#common/products.ts';
import type { AlertsUpdate } from './schemas.ts';

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

export interface AlertsRow {
  lowBandwidth: boolean;
  newInvoice: boolean;
  serverAlerts: boolean;
  lowBandwidthPercent: number;
  lowBandwidthFloorGb: number | null;
}

const ALERT_COLUMNS = `low_bandwidth AS "lowBandwidth", new_invoice AS "newInvoice", server_alerts AS "serverAlerts",
  low_bandwidth_percent AS "lowBandwidthPercent",
  round(low_bandwidth_floor_bytes / 1e9, 9)::float8 AS "lowBandwidthFloorGb"`;

/** The account's alert switches; undefined when the account does not exist (createAccount makes the row). */
export async function readAlerts(pool: Pool, accountId: string): Promise<AlertsRow | undefined> {
  const { rows } = await pool.query<AlertsRow>(
    `SELECT ${ALERT_COLUMNS} FROM alert_settings WHERE account_id = $1`,
    [accountId],
  );
  return rows[0];
}

/** Updates the given switches; undefined when the account does not exist. */
export async function updateAlerts(
  pool: Pool,
  accountId: string,
  u: AlertsUpdate,
  actor?: AuditActor,
): Promise<AlertsRow | undefined> {
  return withTransaction(pool, async (client) => {
    if (actor && !(await lockAccountForAudit(client, accountId))) return undefined;
    // Compared under the settings row's lock (taken by a no-op UPDATE first): only a change is audited.
    const before = actor ? await lockedAlerts(client, accountId) : undefined;
    const alerts = await writeAlerts(client, accountId, u);
    if (alerts && actor && !isDeepStrictEqual(before, alerts))
      await recordAudit(client, {
        accountId,
        actor,
        action: 'alerts.updated',
        target: { type: 'account', id: accountId },
        details: { ...u },
      });
    return alerts;
  });
}

async function lockedAlerts(client: PoolClient, accountId: string): Promise<AlertsRow | undefined> {
  const { rows } = await client.query<AlertsRow>(
    `SELECT ${ALERT_COLUMNS} FROM alert_settings WHERE account_id = $1 FOR NO KEY UPDATE`,
    [accountId],
  );
  return rows[0];
}

async function writeAlerts(
  pool: Pool | PoolClient,
  accountId: string,
  u: AlertsUpdate,
): Promise<AlertsRow | undefined> {
  const { rows } = await pool.query<AlertsRow>(
    `UPDATE alert_settings SET low_bandwidth = coalesce($2, low_bandwidth), new_invoice = coalesce($3, new_invoice),
            server_alerts = coalesce($4, server_alerts), low_bandwidth_percent = coalesce($5, low_bandwidth_percent),
            low_bandwidth_floor_bytes = CASE WHEN $6 THEN $7::bigint ELSE low_bandwidth_floor_bytes END,
            updated_at = now()
      WHERE account_id = $1
      RETURNING ${ALERT_COLUMNS}`,
    [
      accountId,
      u.lowBandwidth ?? null,
      u.newInvoice ?? null,
      u.serverAlerts ?? null,
      u.lowBandwidthPercent ?? null,
      u.lowBandwidthFloorGb !== undefined,
      u.lowBandwidthFloorGb == null ? null : Math.round(u.lowBandwidthFloorGb * BYTES_PER_GB),
    ],
  );
  return rows[0];
}

/** Whether the key is the account's active primary or an active named key (undefined: neither). */
export async function activeKeyKind(
  pool: Pool,
  accountId: string,
  keyId: string,
): Promise<'primary' | 'named' | undefined> {
  const { rows } = await pool.query<{ kind: 'primary' | 'named' }>(
    'SELECT kind FROM api_keys WHERE id = $1 AND account_id = $2 AND revoked_at IS NULL',
    [keyId, accountId],
  );
  return rows[0]?.kind;
}

/** The account's bandwidth caps per product, bytes per second (account_throttles, docs/adr/0035). */
export async function readThrottles(pool: Pool, accountId: string): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ product: string; bytes_per_second: number }>(
    'SELECT product, bytes_per_second FROM account_throttles WHERE account_id = $1',
    [accountId],
  );
  return new Map(rows.map((r) => [r.product, r.bytes_per_second]));
}
