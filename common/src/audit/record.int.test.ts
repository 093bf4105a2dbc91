import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { recordAudit, type AuditEntry } from './record.ts';

describe('recordAudit', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db.drop());

  const entry = (accountId: string, over: Partial<AuditEntry> = {}): AuditEntry => ({
    accountId,
    actor: { kind: 'dashboard', id: 'someone@example.test', ip: '::ffff:203.0.113.7' },
    action: 'api_key.created',
    target: { type: 'api_key', id: 'k1' },
    details: { name: 'ci' },
    ...over,
  });

  const rows = async (accountId: string) =>
    (
      await db.pool.query(
        `SELECT actor_kind, actor_id, host(actor_ip) AS ip, action, target_type, target_id, details
           FROM audit_log WHERE account_id = $1 ORDER BY id`,
        [accountId],
      )
    ).rows;

  it('writes the row: actor, IPv4-mapped address as IPv4, action, target and details', async () => {
    const account = await accountWithBandwidth(db.pool);
    await recordAudit(db.pool, entry(account.id));
    await recordAudit(
      db.pool,
      entry(account.id, { actor: { kind: 'system', id: 'auto-refill' }, target: null }),
    );
    expect(await rows(account.id)).toEqual([
      {
        actor_kind: 'dashboard',
        actor_id: 'someone@example.test',
        ip: '203.0.113.7',
        action: 'api_key.created',
        target_type: 'api_key',
        target_id: 'k1',
        details: { name: 'ci' },
      },
      {
        actor_kind: 'system',
        actor_id: 'auto-refill',
        ip: null,
        action: 'api_key.created',
        target_type: null,
        target_id: null,
        details: { name: 'ci' },
      },
    ]);
  });

  it("commits and rolls back with the caller's transaction", async () => {
    const account = await accountWithBandwidth(db.pool);
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query("UPDATE accounts SET email = 'changed-' || email WHERE id = $1", [account.id]);
      await recordAudit(client, entry(account.id));
      await client.query('ROLLBACK');
      expect(await rows(account.id)).toEqual([]);
      const { rows: kept } = await db.pool.query('SELECT email FROM accounts WHERE id = $1', [account.id]);
      expect(kept[0].email).not.toMatch(/^changed-/);

      await client.query('BEGIN');
      await recordAudit(client, entry(account.id));
      expect(await rows(account.id)).toEqual([]); // not visible before commit
      await client.query('COMMIT');
      expect(await rows(account.id)).toHaveLength(1);
    } finally {
      client.release();
    }
  });

  it('refuses details that look like a secret, and a malformed action, writing nothing', async () => {
    const account = await accountWithBandwidth(db.pool);
    await expect(recordAudit(db.pool, entry(account.id, { details: { password: 'x' } }))).rejects.toThrow(
      /must not hold a secret \(details.password\)/,
    );
    await expect(
      recordAudit(db.pool, entry(account.id, { details: { nested: { totpSecret: 'JBSWY3DP' } } })),
    ).rejects.toThrow(/details.nested.totpSecret/);
    await expect(
      recordAudit(db.pool, entry(account.id, { details: { note: account.apiKey } })),
    ).rejects.toThrow(/details.note/);
    await expect(recordAudit(db.pool, entry(account.id, { action: 'ApiKeyCreated' }))).rejects.toThrow(
      /<resource>.<verb>/,
    );
    expect(await rows(account.id)).toEqual([]);
  });

  it('holds the shape in the table too (a SQL caller cannot bypass it)', async () => {
    const account = await accountWithBandwidth(db.pool);
    const call = (kind: string, action: string) =>
      db.pool.query(`SELECT audit_record($1, $2, 'x', NULL, $3, NULL, NULL, '{}')`, [
        account.id,
        kind,
        action,
      ]);
    await expect(call('robot', 'api_key.created')).rejects.toThrow(/audit_log_actor_kind_check/);
    await expect(call('system', 'no-verb')).rejects.toThrow(/audit_log_action_check/);
    await call('system', 'auto_refill.bought');
    expect(await rows(account.id)).toHaveLength(1);
  });

  it('goes with its account', async () => {
    const account = await accountWithBandwidth(db.pool);
    await recordAudit(db.pool, entry(account.id));
    await db.pool.query('DELETE FROM accounts WHERE id = $1', [account.id]);
    expect(await rows(account.id)).toEqual([]);
  });
});
