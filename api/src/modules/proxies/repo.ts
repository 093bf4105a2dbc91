import type { Pool } from '#common/db/pool.ts';
import type { Product } from '#common/products.ts';

/** Purchased minus used bytes for one plan; undefined when none was ever bought. */
export async function remainingBytes(
  pool: Pool,
  accountId: string,
  plan: Product,
): Promise<number | undefined> {
  const { rows } = await pool.query<{ remaining: number }>(
    'SELECT total_bytes - used_bytes AS remaining FROM balances WHERE account_id = $1 AND product = $2',
    [accountId, plan],
  );
  return rows[0]?.remaining;
}

export interface IspProxyRow {
  id: string;
  host: string;
  port: number;
  username: string;
  password_enc: Buffer;
  country: string;
  city: string | null;
  isp: string | null;
  status: 'active' | 'suspended' | 'expired';
  expires_at: Date | null;
  created_at: Date;
  expired: boolean;
  /** Server alerts (docs/alerts.md): the last health check; null when never checked. */
  health_state?: 'unknown' | 'online' | 'offline' | 'error' | null;
  health_checked_at?: Date | null;
  health_changed_at?: Date | null;
  /** The subscription that rents it (docs/billing.md); null when none. */
  rental_id?: string | null;
  rental_status?: 'active' | 'past_due' | 'cancelled' | 'expired' | null;
  rental_paid_until?: Date | null;
}

export async function listIspProxies(pool: Pool, accountId: string): Promise<IspProxyRow[]> {
  const { rows } = await pool.query<IspProxyRow>(
    `SELECT p.id, p.host, p.port, p.username, p.password_enc, p.country, p.city, p.isp, p.status, p.expires_at,
            p.created_at, (p.expires_at IS NOT NULL AND p.expires_at <= now()) AS expired,
            h.state AS health_state, h.checked_at AS health_checked_at, h.changed_at AS health_changed_at,
            s.id AS rental_id, s.status AS rental_status, s.paid_until AS rental_paid_until
       FROM isp_proxies p LEFT JOIN isp_proxy_health h ON h.proxy_id = p.id
       LEFT JOIN subscriptions s ON s.id = p.subscription_id
      WHERE p.account_id = $1 ORDER BY p.created_at, p.id`,
    [accountId],
  );
  return rows;
}
