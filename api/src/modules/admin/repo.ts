import type { Pool } from '#common/db/pool.ts';
import type { AccountStatus } from '#common/accounts/accounts.ts';
import type { IspProxyRow } from '../proxies/repo.ts';
import { BYTES_PER_GB, type Product } from '#common/products.ts';
import type { AlertsUpdate } from './schemas.ts';

export interface AccountSummaryRow {
  id: string;
  email: string;
  status: AccountStatus;
  created_at: Date;
}

export async function listAccounts(
  pool: Pool,
  q: { limit: number; offset: number; email?: string | undefined },
): Promise<AccountSummaryRow[]> {
  const { rows } = await pool.query<AccountSummaryRow>(
    `SELECT id, email, status, created_at FROM accounts
      WHERE ($3::text IS NULL OR lower(email) = lower($3)) ORDER BY created_at, id LIMIT $1 OFFSET $2`,
    [q.limit, q.offset, q.email ?? null],
  );
  return rows;
}

export async function accountExists(pool: Pool, id: string): Promise<boolean> {
  const { rowCount } = await pool.query('SELECT 1 FROM accounts WHERE id = $1', [id]);
  return rowCount === 1;
}

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

export interface AlertsRow {
  lowBandwidth: boolean;
  newInvoice: boolean;
  serverAlerts: boolean;
  lowBandwidthPercent: number;
  lowBandwidthFloorGb: number | null;
}

/** The alert settings as the APIs show them (GB, 9 decimals at most). */
export const ALERT_COLUMNS = `low_bandwidth AS "lowBandwidth", new_invoice AS "newInvoice", server_alerts AS "serverAlerts",
  low_bandwidth_percent AS "lowBandwidthPercent",
  round(low_bandwidth_floor_bytes / 1e9, 9)::float8 AS "lowBandwidthFloorGb"`;

/** Updates the given switches; undefined when the account does not exist (createAccount makes the row). */
export async function updateAlerts(
  pool: Pool,
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

const ISP_COLUMNS = `id, host, port, username, password_enc, country, city, isp, status, expires_at, created_at,
  (expires_at IS NOT NULL AND expires_at <= now()) AS expired`;

export async function insertIspProxy(
  pool: Pool,
  accountId: string,
  p: {
    host: string;
    port: number;
    username: string;
    passwordEnc: Buffer;
    country: string;
    city?: string | undefined;
    isp?: string | undefined;
    status: string;
    expiresAt?: string | undefined;
  },
): Promise<IspProxyRow> {
  const { rows } = await pool.query<IspProxyRow>(
    `INSERT INTO isp_proxies (account_id, host, port, username, password_enc, country, city, isp, status, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING ${ISP_COLUMNS}`,
    [
      accountId,
      p.host,
      p.port,
      p.username,
      p.passwordEnc,
      p.country,
      p.city ?? null,
      p.isp ?? null,
      p.status,
      p.expiresAt ?? null,
    ],
  );
  return rows[0]!;
}

export async function deleteIspProxy(pool: Pool, accountId: string, proxyId: string): Promise<boolean> {
  const { rowCount } = await pool.query('DELETE FROM isp_proxies WHERE id = $1 AND account_id = $2', [
    proxyId,
    accountId,
  ]);
  return rowCount === 1;
}

/**
 * Sets or removes (null) an account's bandwidth cap on a product (account_throttles,
 * migrations/0083); its trigger announces an account change, which the gateways follow.
 */
export async function putThrottle(
  pool: Pool,
  accountId: string,
  product: Product,
  bytesPerSecond: number | null,
): Promise<void> {
  if (bytesPerSecond === null) {
    await pool.query('DELETE FROM account_throttles WHERE account_id = $1 AND product = $2', [
      accountId,
      product,
    ]);
    return;
  }
  await pool.query(
    `INSERT INTO account_throttles (account_id, product, bytes_per_second) VALUES ($1, $2, $3)
     ON CONFLICT (account_id, product)
       DO UPDATE SET bytes_per_second = EXCLUDED.bytes_per_second, updated_at = now()
       WHERE account_throttles.bytes_per_second <> EXCLUDED.bytes_per_second`,
    [accountId, product, bytesPerSecond],
  );
}
