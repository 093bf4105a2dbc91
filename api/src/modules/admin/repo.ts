import { withTransaction, type Pool, type PoolClient } from '#common/db/pool.ts';
import { lockAccountForAudit, recordAudit, type AuditActor } from '#common/audit/record.ts';
import type { AccountStatus } from '#common/accounts/accounts.ts';
import type { IspProxyRow } from '#api/modules/proxies/repo.ts';
import type { Product } from '#common/products.ts';

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
  actor?: AuditActor,
): Promise<IspProxyRow> {
  return withTransaction(pool, async (client) => {
    const { rows } = await client.query<IspProxyRow>(
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
    const row = rows[0]!;
    if (actor)
      await recordAudit(client, {
        accountId,
        actor,
        action: 'isp_proxy.added',
        target: { type: 'isp_proxy', id: row.id },
        details: ispProxyDetails(row),
      });
    return row;
  });
}

/** What the audit log says of an ISP proxy: where it is, never its password. */
const ispProxyDetails = (r: { host: string; port: number; username: string; country: string }) => ({
  host: r.host,
  port: r.port,
  username: r.username,
  country: r.country,
});

export async function deleteIspProxy(
  pool: Pool,
  accountId: string,
  proxyId: string,
  actor?: AuditActor,
): Promise<boolean> {
  return withTransaction(pool, async (client) => {
    if (actor && !(await lockAccountForAudit(client, accountId))) return false;
    const { rows } = await client.query<{ host: string; port: number; username: string; country: string }>(
      'DELETE FROM isp_proxies WHERE id = $1 AND account_id = $2 RETURNING host, port, username, country',
      [proxyId, accountId],
    );
    if (rows[0] && actor)
      await recordAudit(client, {
        accountId,
        actor,
        action: 'isp_proxy.removed',
        target: { type: 'isp_proxy', id: proxyId },
        details: ispProxyDetails(rows[0]),
      });
    return rows.length === 1;
  });
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
  actor?: AuditActor,
): Promise<void> {
  await withTransaction(pool, async (client) => {
    let before: number | null = null;
    if (actor) {
      await lockAccountForAudit(client, accountId);
      // The throttle's rows are written only under the account's lock here and by operators:
      // a second writer waits on the FOR UPDATE below, so the comparison holds.
      const { rows } = await client.query<{ bps: string }>(
        `SELECT bytes_per_second::text AS bps FROM account_throttles WHERE account_id = $1 AND product = $2 FOR UPDATE`,
        [accountId, product],
      );
      before = rows[0] ? Number(rows[0].bps) : null;
    }
    await writeThrottle(client, accountId, product, bytesPerSecond);
    if (actor && before !== bytesPerSecond)
      await recordAudit(client, {
        accountId,
        actor,
        action: 'throttle.updated',
        target: { type: 'product', id: product },
        details: { product, bytesPerSecond },
      });
  });
}

async function writeThrottle(
  pool: PoolClient,
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
