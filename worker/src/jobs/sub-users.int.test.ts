// The database side of sub-user limits (migrations/0085, docs/adr/0037): a sub-user's leases hold
// against both the account's balance and the sub-user's limit, its own usage lines count against
// the limit when folded, and usernames are one namespace across accounts and sub-users.
import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { createLogger } from '#common/logger.ts';
import { useTestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { usageFoldJob } from './usage.ts';

const fx = useTestDatabase();
const logger = createLogger('test', 'silent');
const MIN = 262_144;

async function subUser(accountId: string, limits: Record<string, number | null> = {}): Promise<string> {
  const username = 'su' + randomBytes(6).toString('hex');
  const { rows } = await fx.db.pool.query<{ id: string }>(
    `INSERT INTO sub_users (account_id, name, username, password_enc, password_sha256)
     VALUES ($1, $2, $2, '\\x00', $3) RETURNING id`,
    [accountId, username, createHash('sha256').update('pw').digest()],
  );
  const id = rows[0]!.id;
  for (const [product, limit] of Object.entries(limits))
    await fx.db.pool.query(
      'INSERT INTO sub_user_products (sub_user_id, account_id, product, limit_bytes) VALUES ($1, $2, $3, $4)',
      [id, accountId, product, limit],
    );
  return id;
}

interface Grant {
  out_lease_id: string | null;
  out_granted: number;
  out_held: number;
  out_sub_user_limited: boolean;
}

async function acquire(accountId: string, wanted: number, sub?: string, gateway = 'pod-a'): Promise<Grant> {
  const { rows } = await fx.db.pool.query<Grant>('SELECT * FROM lease_acquire($1, $2, $3, $4, $5, $6, $7)', [
    accountId,
    'basic',
    gateway,
    wanted,
    MIN,
    300,
    sub ?? null,
  ]);
  return rows[0]!;
}

async function record(key: string, accountId: string, sub: string, leaseId: string, bytes: number) {
  const line = { account_id: accountId, product: 'basic', bytes_up: 0, bytes_down: bytes, requests: 1 };
  await fx.db.pool.query('SELECT usage_record($1, $2, $3, $4, $5, $6)', [
    key,
    'pod-a',
    JSON.stringify([line]),
    JSON.stringify([{ lease_id: leaseId, bytes }]),
    JSON.stringify([{ lease_id: leaseId, spent: bytes }]),
    JSON.stringify([{ ...line, sub_user_id: sub }]),
  ]);
}

async function used(sub: string) {
  const { rows } = await fx.db.pool.query<{ used_bytes: number; requests_count: number }>(
    `SELECT used_bytes, requests_count FROM sub_user_products WHERE sub_user_id = $1 AND product = 'basic'`,
    [sub],
  );
  return rows[0];
}

describe('sub-user leases and usage', () => {
  // Grants are sized least(wanted, max(MIN, free / (2 x (pods + 1))), free) (migrations/0020):
  // asking for MIN at a time makes every grant MIN until less than MIN is free.
  it('caps a grant at what the limit leaves, counting open leases, and says the limit decided', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 100_000_000 });
    const sub = await subUser(account.id, { basic: 2 * MIN + 1000 });
    expect((await acquire(account.id, MIN, sub)).out_granted).toBe(MIN);
    expect((await acquire(account.id, MIN, sub, 'pod-b')).out_granted).toBe(MIN);
    // 1000 bytes of the limit are left while the two leases are open, although the account has
    // 99 MB free.
    expect((await acquire(account.id, MIN, sub, 'pod-c')).out_granted).toBe(1000);
    const denied = await acquire(account.id, MIN, sub, 'pod-c');
    expect(denied).toMatchObject({ out_lease_id: null, out_granted: 0, out_sub_user_limited: true });
    // What the sub-user's leases hold may come back: the gateway waits for it before refusing.
    expect(Number(denied.out_held)).toBe(2 * MIN + 1000);
    // The account's own credentials are not held back by the sub-user's limit.
    expect((await acquire(account.id, MIN)).out_granted).toBe(MIN);
  });

  it('counts the folded usage of the sub-user, and a raised limit grants again', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 100_000_000 });
    const sub = await subUser(account.id, { basic: MIN });
    const lease = await acquire(account.id, 5_000_000, sub);
    expect(lease.out_granted).toBe(MIN);
    await record('su-k1', account.id, sub, lease.out_lease_id!, MIN);
    await usageFoldJob.run({ pool: fx.db.pool, logger });
    expect(await used(sub)).toEqual({ used_bytes: MIN, requests_count: 1 });
    const { rows } = await fx.db.pool.query<{ used_bytes: number }>(
      `SELECT used_bytes FROM balances WHERE account_id = $1 AND product = 'basic'`,
      [account.id],
    );
    expect(Number(rows[0]!.used_bytes)).toBe(MIN);
    const hourly = await fx.db.pool.query<{ bytes_down: number }>(
      'SELECT bytes_down FROM sub_user_usage_hourly WHERE sub_user_id = $1',
      [sub],
    );
    expect(hourly.rows.map((r) => Number(r.bytes_down))).toEqual([MIN]);
    expect(await acquire(account.id, 5_000_000, sub)).toMatchObject({
      out_granted: 0,
      out_held: 0,
      out_sub_user_limited: true,
    });
    await fx.db.pool.query(
      `UPDATE sub_user_products SET limit_bytes = $2 WHERE sub_user_id = $1 AND product = 'basic'`,
      [sub, MIN + 100_000],
    );
    expect((await acquire(account.id, 5_000_000, sub)).out_granted).toBe(100_000);
  });

  it("never grants a sub-user more than the account's balance", async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: MIN });
    const sub = await subUser(account.id, { basic: 50_000_000 });
    const unlimited = await subUser(account.id);
    expect(await acquire(account.id, 5_000_000, sub)).toMatchObject({
      out_granted: MIN,
      out_sub_user_limited: false,
    });
    expect(await acquire(account.id, 5_000_000, unlimited)).toMatchObject({
      out_granted: 0,
      out_sub_user_limited: false,
    });
  });

  it("denies a sub-user that is not the account's", async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 10_000_000 });
    const other = await accountWithBandwidth(fx.db.pool, { basic: 10_000_000 });
    const theirs = await subUser(other.id);
    expect(await acquire(account.id, 1_000_000, theirs)).toMatchObject({
      out_granted: 0,
      out_lease_id: null,
    });
  });

  it('announces a limit change as a balance change, and not the folds', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 10_000_000 });
    const sub = await subUser(account.id, { basic: 1_000_000 });
    const changes = async () =>
      (
        await fx.db.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM change_log WHERE account_id = $1 AND kind = 'balance'`,
          [account.id],
        )
      ).rows[0]!.n;
    const before = await changes();
    const lease = await acquire(account.id, 500_000, sub);
    await record('su-k2', account.id, sub, lease.out_lease_id!, 1000);
    await usageFoldJob.run({ pool: fx.db.pool, logger });
    const afterFold = await changes();
    await fx.db.pool.query(`UPDATE sub_user_products SET limit_bytes = 2000000 WHERE sub_user_id = $1`, [
      sub,
    ]);
    // The fold's balance update may announce the account's balance (as it always did); the
    // sub-user's used_bytes moving adds nothing, the limit moving adds one.
    expect((await changes()) - afterFold).toBe(1);
    expect(afterFold).toBeGreaterThanOrEqual(before);
  });

  it('keeps proxy usernames unique across accounts and sub-users', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1 });
    const { rows } = await fx.db.pool.query<{ username: string }>(
      'SELECT username FROM proxy_credentials WHERE account_id = $1',
      [account.id],
    );
    const taken = rows[0]!.username;
    await expect(
      fx.db.pool.query(
        `INSERT INTO sub_users (account_id, name, username, password_enc, password_sha256)
         VALUES ($1, 'x', $2, '\\x00', $3)`,
        [account.id, taken, createHash('sha256').update('pw').digest()],
      ),
    ).rejects.toMatchObject({ code: '23505', constraint: 'proxy_username_taken' });
    const sub = await subUser(account.id);
    const { rows: subs } = await fx.db.pool.query<{ username: string }>(
      'SELECT username FROM sub_users WHERE id = $1',
      [sub],
    );
    await expect(
      fx.db.pool.query('UPDATE proxy_credentials SET username = $1 WHERE account_id = $2', [
        subs[0]!.username,
        account.id,
      ]),
    ).rejects.toMatchObject({ code: '23505', constraint: 'proxy_username_taken' });
  });
});
