// sub_users and sub_user_products (migrations/0085): list, read, create under the per-account cap,
// update, delete, and usage over time. The cap is counted under the account row's lock, so two
// concurrent creations cannot both take the last place. Passwords are sealed as proxy_credentials'
// are (readable again, with a sha256 for the gateways). A username clash with any account's proxy
// credentials or sub-users is the database's (unique index and the proxy_username_free trigger).
import { isDeepStrictEqual } from 'node:util';
import { AppError } from '#common/errors.ts';
import { sqlState, SQLSTATE, withTransaction, type Pool, type PoolClient } from '#common/db/pool.ts';
import { BYTES_PER_GB, PRODUCTS, type Product } from '#common/products.ts';
import { lockAccountForAudit, recordAudit, type AuditActor } from '#common/audit/record.ts';
import { newProxyPassword, newProxyUsername, seal, sha256, unseal } from '#common/secrets.ts';
import type { SubUser, SubUserCreate, SubUserUpdate, SubUserUsage, SubUserUsageQuery } from './schemas.ts';

interface Row {
  id: string;
  name: string;
  username: string;
  password_enc: Buffer;
  status: 'active' | 'suspended';
  max_connections: number | null;
  bytes_per_second: number | null;
  created_at: Date;
  updated_at: Date;
  products: { product: Product; limit: number | null; used: number; requests: number }[] | null;
}

const SELECT = `SELECT s.id, s.name, s.username, s.password_enc, s.status, s.max_connections, s.bytes_per_second,
                       s.created_at, s.updated_at,
                       (SELECT jsonb_agg(jsonb_build_object('product', p.product, 'limit', p.limit_bytes,
                                                            'used', p.used_bytes, 'requests', p.requests_count))
                          FROM sub_user_products p WHERE p.sub_user_id = s.id) AS products
                  FROM sub_users s`;

const gb = (bytes: number) => Number((bytes / BYTES_PER_GB).toFixed(3));

/** What a sub-user's owner sets (not its usage or times): what an audited update compares. */
const settingsOf = (u: SubUser | undefined) =>
  u && {
    name: u.name,
    username: u.username,
    password: u.password,
    status: u.status,
    maxConnections: u.maxConnections,
    bytesPerSecond: u.bytesPerSecond,
    limits: PRODUCTS.map((product) => u.products[product].limitBytes),
  };

function toSubUser(row: Row, credentialsKey: Buffer): SubUser {
  const products = {} as SubUser['products'];
  for (const product of PRODUCTS) {
    const p = row.products?.find((x) => x.product === product);
    const limit = p?.limit ?? null;
    const used = Number(p?.used ?? 0);
    products[product] = {
      limitGb: limit === null ? null : gb(Number(limit)),
      limitBytes: limit === null ? null : Number(limit),
      usedBytes: used,
      usedGb: gb(used),
      requests: Number(p?.requests ?? 0),
    };
  }
  return {
    id: row.id,
    name: row.name,
    username: row.username,
    password: unseal(credentialsKey, row.password_enc),
    status: row.status,
    maxConnections: row.max_connections,
    bytesPerSecond: row.bytes_per_second === null ? null : Number(row.bytes_per_second),
    products,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** The account's sub-users, oldest first; undefined when the account does not exist. */
export async function listSubUsers(
  pool: Pool,
  accountId: string,
  credentialsKey: Buffer,
): Promise<SubUser[] | undefined> {
  const { rows } = await pool.query<Row & { account: boolean }>(
    `SELECT true AS account, x.* FROM accounts a
       LEFT JOIN LATERAL (${SELECT} WHERE s.account_id = a.id) x ON true
      WHERE a.id = $1 ORDER BY x.created_at, x.id`,
    [accountId],
  );
  if (rows.length === 0) return undefined;
  return rows.filter((r) => r.id !== null).map((r) => toSubUser(r, credentialsKey));
}

/** The account's sub-users' ids and names, oldest first (pickers: no password unsealed, no usage read). */
export async function subUserNames(pool: Pool, accountId: string): Promise<{ id: string; name: string }[]> {
  const { rows } = await pool.query<{ id: string; name: string }>(
    'SELECT id, name FROM sub_users WHERE account_id = $1 ORDER BY created_at, id',
    [accountId],
  );
  return rows;
}

/** One sub-user of the account; undefined when the account has none with that id. */
export async function getSubUser(
  db: Pool | PoolClient,
  accountId: string,
  id: string,
  credentialsKey: Buffer,
): Promise<SubUser | undefined> {
  const { rows } = await db.query<Row>(`${SELECT} WHERE s.account_id = $1 AND s.id = $2`, [accountId, id]);
  return rows[0] && toSubUser(rows[0], credentialsKey);
}

/** The proxy username and password of one sub-user of the account (proxy strings). */
export async function readSubUserCredentials(
  pool: Pool,
  accountId: string,
  id: string,
  credentialsKey: Buffer,
): Promise<{ username: string; password: string }> {
  const { rows } = await pool.query<{ username: string; password_enc: Buffer }>(
    'SELECT username, password_enc FROM sub_users WHERE account_id = $1 AND id = $2',
    [accountId, id],
  );
  const row = rows[0];
  if (!row) throw new AppError('SUB_USER_NOT_FOUND');
  return { username: row.username, password: unseal(credentialsKey, row.password_enc) };
}

/** Whether the account has a sub-user with this id. */
export async function subUserExists(pool: Pool, accountId: string, id: string): Promise<boolean> {
  const { rowCount } = await pool.query('SELECT 1 FROM sub_users WHERE account_id = $1 AND id = $2', [
    accountId,
    id,
  ]);
  return rowCount === 1;
}

/** A unique violation as the customer's error: the name within the account, or the username anywhere. */
function clash(err: unknown): unknown {
  if (sqlState(err) !== SQLSTATE.UNIQUE_VIOLATION) return err;
  const constraint = (err as { constraint?: string }).constraint;
  if (constraint === 'sub_users_account_id_name_key') return new AppError('SUB_USER_NAME_TAKEN');
  return new AppError('PROXY_USERNAME_TAKEN');
}

/** usage_fold upserts a sub-user's product rows sorted by (sub_user_id, product): the same order. */
const PRODUCTS_BY_NAME = [...PRODUCTS].sort();

async function setLimits(
  client: PoolClient,
  accountId: string,
  id: string,
  limits: Partial<Record<Product, number | null | undefined>>,
): Promise<void> {
  for (const product of PRODUCTS_BY_NAME) {
    const value = limits[product];
    if (value === undefined) continue;
    // A row stays once it exists (it carries what was used); null only removes the limit.
    await client.query(
      `INSERT INTO sub_user_products AS p (sub_user_id, account_id, product, limit_bytes) VALUES ($1, $2, $3, $4)
       ON CONFLICT (sub_user_id, product) DO UPDATE SET limit_bytes = EXCLUDED.limit_bytes, updated_at = now()`,
      [id, accountId, product, value === null ? null : Math.round(value * BYTES_PER_GB)],
    );
  }
}

export function createSubUser(
  pool: Pool,
  accountId: string,
  input: SubUserCreate,
  limit: number,
  credentialsKey: Buffer,
  actor?: AuditActor,
): Promise<SubUser> {
  return withTransaction(pool, async (client) => {
    const locked = await client.query('SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE', [accountId]);
    if (locked.rowCount !== 1) throw new AppError('ACCOUNT_NOT_FOUND');
    const { rows: count } = await client.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM sub_users WHERE account_id = $1',
      [accountId],
    );
    if ((count[0]?.n ?? 0) >= limit) throw new AppError('SUB_USER_LIMIT', { limit });
    const password = input.password ?? newProxyPassword();
    let id: string;
    try {
      const { rows } = await client.query<{ id: string }>(
        `INSERT INTO sub_users (account_id, name, username, password_enc, password_sha256, status,
                                max_connections, bytes_per_second)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
        [
          accountId,
          input.name,
          input.username ?? newProxyUsername(),
          seal(credentialsKey, password),
          sha256(password),
          input.status ?? 'active',
          input.maxConnections ?? null,
          input.bytesPerSecond ?? null,
        ],
      );
      id = rows[0]!.id;
    } catch (err) {
      throw clash(err);
    }
    await setLimits(client, accountId, id, input.trafficLimits ?? {});
    const created = (await getSubUser(client, accountId, id, credentialsKey))!;
    if (actor)
      await recordAudit(client, {
        accountId,
        actor,
        action: 'sub_user.created',
        target: { type: 'sub_user', id },
        details: subUserDetails({ ...input, name: created.name, username: created.username }),
      });
    return created;
  });
}

/**
 * What the audit log says of a sub-user change: the fields given, never a password (only that one
 * was set or reset).
 */
function subUserDetails(input: SubUserCreate | SubUserUpdate): Record<string, unknown> {
  const { password, ...rest } = input as SubUserUpdate;
  const details: Record<string, unknown> = { ...rest };
  delete details.resetPassword;
  if (password !== undefined) details.passwordChanged = true;
  if ((input as SubUserUpdate).resetPassword) details.passwordChanged = true;
  return details;
}

/**
 * Changes the fields given; undefined when the account has no sub-user with that id. Takes turns
 * with createSubUser on the account row first: a rename holding the new name while its limit row
 * waited for the key share of the account, which a creation of that name held locked while it
 * waited for the name, deadlocked (40P01, a 500); now the later of the two meets the name taken.
 * NO KEY UPDATE: rows referencing the account (a gateway's leases and usage) may still be written.
 */
export function updateSubUser(
  pool: Pool,
  accountId: string,
  id: string,
  patch: SubUserUpdate,
  credentialsKey: Buffer,
  actor?: AuditActor,
): Promise<SubUser | undefined> {
  return withTransaction(pool, async (client) => {
    const account = await client.query('SELECT 1 FROM accounts WHERE id = $1 FOR NO KEY UPDATE', [accountId]);
    if (account.rowCount !== 1) return undefined;
    const sets: string[] = [];
    const values: unknown[] = [accountId, id];
    const set = (column: string, value: unknown) => {
      values.push(value);
      sets.push(`${column} = $${values.length}`);
    };
    if (patch.name !== undefined) set('name', patch.name);
    if (patch.username !== undefined) set('username', patch.username);
    if (patch.status !== undefined) set('status', patch.status);
    if (patch.maxConnections !== undefined) set('max_connections', patch.maxConnections);
    if (patch.bytesPerSecond !== undefined) set('bytes_per_second', patch.bytesPerSecond);
    const password = patch.password ?? (patch.resetPassword ? newProxyPassword() : undefined);
    if (password !== undefined) {
      set('password_enc', seal(credentialsKey, password));
      set('password_sha256', sha256(password));
    }
    // The row is locked without the key lock first, then the limits are written, then the row (a
    // rename takes the key lock): usage_fold holds the sub-user's product rows when it needs the
    // key share of the sub-user's row (the usage rows it inserts), so holding the key lock while
    // waiting for a product row deadlocked with it (40P01, a 500). Only limits (or nothing)
    // changed: the row is not rewritten, so gateways are not told of an 'account' change for
    // nothing (a limit change is announced by sub_user_products' trigger).
    const found = await client.query(
      'SELECT 1 FROM sub_users WHERE account_id = $1 AND id = $2 FOR NO KEY UPDATE',
      [accountId, id],
    );
    if (found.rowCount !== 1) return undefined;
    const before = actor ? await getSubUser(client, accountId, id, credentialsKey) : undefined;
    await setLimits(client, accountId, id, patch.trafficLimits ?? {});
    if (sets.length) {
      try {
        await client.query(
          `UPDATE sub_users SET ${[...sets, 'updated_at = now()'].join(', ')} WHERE account_id = $1 AND id = $2`,
          values,
        );
      } catch (err) {
        throw clash(err);
      }
    }
    const updated = await getSubUser(client, accountId, id, credentialsKey);
    // Only a change is audited (docs/security.md "Audit log"): the same settings again write nothing.
    if (updated && actor && !isDeepStrictEqual(settingsOf(before), settingsOf(updated)))
      await recordAudit(client, {
        accountId,
        actor,
        action: 'sub_user.updated',
        target: { type: 'sub_user', id },
        details: subUserDetails(patch),
      });
    return updated;
  });
}

/**
 * Deletes one sub-user of the account; false when there is none with that id. The delete reaches
 * the sub-user's leases (ON DELETE SET NULL) and usage rows through its foreign keys, which a
 * gateway's flush (usage_record) and the fold (usage_fold) lock before they need the sub-user's row
 * (the key share of the rows they insert): deleting first and cascading after, the two deadlocked
 * (40P01, a 500). So the delete takes them in the writers' order: the sub-user's row without the
 * key lock (that serialises it with updateSubUser and lets the writers' key share through), its
 * leases by id, its product rows, and only then the key lock that the DELETE takes.
 */
export function deleteSubUser(
  pool: Pool,
  accountId: string,
  id: string,
  actor?: AuditActor,
): Promise<boolean> {
  return withTransaction(pool, async (client) => {
    if (actor && !(await lockAccountForAudit(client, accountId))) return false;
    const found = await client.query<{ name: string; username: string }>(
      'SELECT name, username FROM sub_users WHERE account_id = $1 AND id = $2 FOR NO KEY UPDATE',
      [accountId, id],
    );
    if (found.rowCount !== 1) return false;
    await client.query('SELECT 1 FROM bandwidth_leases WHERE sub_user_id = $1 ORDER BY id FOR UPDATE', [id]);
    await client.query('SELECT 1 FROM sub_user_products WHERE sub_user_id = $1 ORDER BY product FOR UPDATE', [
      id,
    ]);
    const { rowCount } = await client.query('DELETE FROM sub_users WHERE account_id = $1 AND id = $2', [
      accountId,
      id,
    ]);
    if (rowCount === 1 && actor)
      await recordAudit(client, {
        accountId,
        actor,
        action: 'sub_user.deleted',
        target: { type: 'sub_user', id },
        details: { name: found.rows[0]!.name, username: found.rows[0]!.username },
      });
    return rowCount === 1;
  });
}

/** Hourly usage of one sub-user over the last days; undefined when the account has no such sub-user. */
export async function readSubUserUsage(
  pool: Pool,
  accountId: string,
  id: string,
  query: SubUserUsageQuery,
): Promise<SubUserUsage | undefined> {
  const { rows } = await pool.query<{
    from: Date;
    hours: { hour: string; product: Product; bytesUp: number; bytesDown: number; requests: number }[];
  }>(
    `WITH w AS (SELECT date_trunc('hour', now()) - make_interval(hours => $3 * 24 - 1) AS from)
     SELECT w.from,
            coalesce((SELECT jsonb_agg(jsonb_build_object(
                               'hour', to_char(h.hour AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                               'product', h.product, 'bytesUp', h.bytes_up, 'bytesDown', h.bytes_down,
                               'requests', h.requests) ORDER BY h.hour, h.product)
                        FROM sub_user_usage_hourly h WHERE h.sub_user_id = s.id AND h.hour >= w.from),
                     '[]'::jsonb) AS hours
       FROM sub_users s, w WHERE s.account_id = $1 AND s.id = $2`,
    [accountId, id, query.days],
  );
  const row = rows[0];
  if (!row) return undefined;
  const totals = new Map<Product, { bytesUp: number; bytesDown: number; requests: number }>();
  for (const h of row.hours) {
    const t = totals.get(h.product) ?? { bytesUp: 0, bytesDown: 0, requests: 0 };
    t.bytesUp += Number(h.bytesUp);
    t.bytesDown += Number(h.bytesDown);
    t.requests += Number(h.requests);
    totals.set(h.product, t);
  }
  return {
    success: true,
    subUserId: id,
    from: row.from.toISOString(),
    totals: PRODUCTS.filter((p) => totals.has(p)).map((product) => ({ product, ...totals.get(product)! })),
    hours: row.hours.map((h) => ({
      ...h,
      bytesUp: Number(h.bytesUp),
      bytesDown: Number(h.bytesDown),
      requests: Number(h.requests),
    })),
  };
}
