import { describe, expect, it } from '@jest/globals';
import { useTestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import type { AppError } from '../errors.ts';
import { hashApiKey, issueApiKey, API_KEY_PATTERN } from '../secrets.ts';
import { createNamedKey, listKeys, MAX_NAMED_KEYS, regeneratePrimaryKey, revokeKey } from './keys.ts';

describe('API keys in the database', () => {
  const fx = useTestDatabase();

  /** A key row written straight to the table, past keys.ts: the database's own checks judge it. */
  const insertKeyBehindTheApi = (accountId: string, kind: string, name: string) => {
    const issued = issueApiKey();
    return fx.db.pool.query(
      `INSERT INTO api_keys (account_id, kind, name, key_hash, prefix, last4) VALUES ($1, $2, $3, $4, $5, $6)`,
      [accountId, kind, name, issued.hash, issued.prefix, issued.last4],
    );
  };

  it('stores only the sha256 of a key, with a display prefix', async () => {
    const account = await accountWithBandwidth(fx.db.pool);
    expect(account.apiKey).toMatch(API_KEY_PATTERN);
    const { rows } = await fx.db.pool.query('SELECT * FROM api_keys WHERE account_id = $1', [account.id]);
    expect(rows).toHaveLength(1);
    expect(rows[0].key_hash.equals(hashApiKey(account.apiKey))).toBe(true);
    expect(JSON.stringify(rows[0])).not.toContain(account.apiKey.slice(9));
    expect(account.apiKey.startsWith(rows[0].prefix)).toBe(true);
  });

  it('holds the limit of 10 active named keys when 20 are inserted at once', async () => {
    const account = await accountWithBandwidth(fx.db.pool);
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) => createNamedKey(fx.db.pool, account.id, `integration-${i}`)),
    );
    const ok = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r) => r.status === 'rejected');
    expect(ok).toHaveLength(MAX_NAMED_KEYS);
    expect(refused).toHaveLength(20 - MAX_NAMED_KEYS);
    for (const r of refused) expect((r.reason as AppError).code).toBe('NAMED_KEY_LIMIT');
    const active = (await listKeys(fx.db.pool, account.id)).filter((k) => k.kind === 'named' && !k.revokedAt);
    expect(active).toHaveLength(MAX_NAMED_KEYS);
  });

  it('holds the limit in the database itself, below the application code', async () => {
    const account = await accountWithBandwidth(fx.db.pool);
    for (let i = 0; i < MAX_NAMED_KEYS; i++) await createNamedKey(fx.db.pool, account.id, `k${i}`);
    await expect(insertKeyBehindTheApi(account.id, 'named', 'raw')).rejects.toMatchObject({ code: 'PF001' });
  });

  it('frees a slot when a named key is revoked', async () => {
    const account = await accountWithBandwidth(fx.db.pool);
    const keys = [];
    for (let i = 0; i < MAX_NAMED_KEYS; i++) keys.push(await createNamedKey(fx.db.pool, account.id, `k${i}`));
    await expect(createNamedKey(fx.db.pool, account.id, 'eleventh')).rejects.toMatchObject({
      code: 'NAMED_KEY_LIMIT',
    });
    expect(await revokeKey(fx.db.pool, account.id, keys[0]!.id)).toBe(true);
    expect(await revokeKey(fx.db.pool, account.id, keys[0]!.id)).toBe(false);
    await expect(createNamedKey(fx.db.pool, account.id, 'eleventh')).resolves.toMatchObject({
      name: 'eleventh',
    });
  });

  it('keeps one active primary key, also when regenerated concurrently', async () => {
    const account = await accountWithBandwidth(fx.db.pool);
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, () => regeneratePrimaryKey(fx.db.pool, account.id)),
    );
    expect(results.every((r) => r.status === 'fulfilled')).toBe(true);
    const { rows } = await fx.db.pool.query(
      `SELECT count(*)::int AS n FROM api_keys WHERE account_id = $1 AND kind = 'primary' AND revoked_at IS NULL`,
      [account.id],
    );
    expect(rows[0].n).toBe(1);
  });

  it('refuses a second active primary key at the database', async () => {
    const account = await accountWithBandwidth(fx.db.pool);
    await expect(insertKeyBehindTheApi(account.id, 'primary', 'primary')).rejects.toMatchObject({
      code: '23505',
    });
  });

  it('refuses a duplicate active name', async () => {
    const account = await accountWithBandwidth(fx.db.pool);
    await createNamedKey(fx.db.pool, account.id, 'ci');
    await expect(createNamedKey(fx.db.pool, account.id, 'ci')).rejects.toMatchObject({
      code: 'KEY_NAME_TAKEN',
    });
  });

  it('records every key change in change_log for the caches', async () => {
    const account = await accountWithBandwidth(fx.db.pool);
    const key = await createNamedKey(fx.db.pool, account.id, 'watched');
    await revokeKey(fx.db.pool, account.id, key.id);
    const { rows } = await fx.db.pool.query(
      `SELECT kind, subject FROM change_log WHERE account_id = $1 AND kind = 'api_key' ORDER BY id`,
      [account.id],
    );
    const hash = hashApiKey(key.apiKey).toString('hex');
    expect(rows.filter((r) => r.subject === hash)).toHaveLength(2);
  });
});
