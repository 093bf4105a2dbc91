import { describe, expect, it } from '@jest/globals';
import { useTestDatabase } from '#test/db.ts';
import { exampleEmail, TEST_CREDENTIALS_KEY } from '#test/fixtures.ts';
import { sha256 } from '../secrets.ts';
import { createAccount, readProxyCredentials, resetProxyPassword, setAccountStatus } from './accounts.ts';
import { recordPurchase } from '../billing/purchases.ts';

describe('accounts', () => {
  const fx = useTestDatabase();
  /** A purchase of basic bandwidth under an idempotency key (an order of the shop). */
  const order = (accountId: string, bytes: number, idempotencyKey: string) =>
    recordPurchase(fx.db.pool, { accountId, product: 'basic', bytes, idempotencyKey });

  it('creates an account with the spec default alert settings and retrievable proxy credentials', async () => {
    const account = await createAccount(fx.db.pool, { email: exampleEmail() }, TEST_CREDENTIALS_KEY);
    expect(account.status).toBe('active');
    const { rows } = await fx.db.pool.query('SELECT * FROM alert_settings WHERE account_id = $1', [
      account.id,
    ]);
    expect(rows[0]).toMatchObject({ low_bandwidth: true, new_invoice: true, server_alerts: false });
    const creds = await readProxyCredentials(fx.db.pool, account.id, TEST_CREDENTIALS_KEY);
    expect(creds).toEqual({ username: account.proxyUsername, password: account.proxyPassword });
    const stored = await fx.db.pool.query(
      'SELECT password_enc, password_sha256 FROM proxy_credentials WHERE account_id = $1',
      [account.id],
    );
    expect(stored.rows[0].password_enc.includes(Buffer.from(account.proxyPassword))).toBe(false);
    expect(stored.rows[0].password_sha256.equals(sha256(account.proxyPassword))).toBe(true);
  });

  it('refuses a second account with the same email, whatever its case', async () => {
    const email = exampleEmail();
    await createAccount(fx.db.pool, { email }, TEST_CREDENTIALS_KEY);
    await expect(
      createAccount(fx.db.pool, { email: email.toUpperCase() }, TEST_CREDENTIALS_KEY),
    ).rejects.toMatchObject({
      code: 'EMAIL_TAKEN',
    });
  });

  it('issues an invoice and queues one new-invoice email per purchase; a retried purchase buys once', async () => {
    const account = await createAccount(fx.db.pool, { email: exampleEmail() }, TEST_CREDENTIALS_KEY);
    const first = await order(account.id, 500_000_000, 'order-1');
    const retry = await order(account.id, 500_000_000, 'order-1');
    await recordPurchase(fx.db.pool, { accountId: account.id, product: 'basic', bytes: 1_500_000_000 });
    expect(retry.id).toBe(first.id);
    const balance = await fx.db.pool.query(
      'SELECT total_bytes FROM balances WHERE account_id = $1 AND product = $2',
      [account.id, 'basic'],
    );
    expect(balance.rows[0].total_bytes).toBe(2_000_000_000);
    const mails = await fx.db.pool.query(`SELECT kind FROM email_outbox WHERE account_id = $1`, [account.id]);
    expect(mails.rows).toEqual([{ kind: 'new_invoice' }, { kind: 'new_invoice' }]);
  });

  it('scopes a purchase idempotency key to its account', async () => {
    const a = await createAccount(fx.db.pool, { email: exampleEmail() }, TEST_CREDENTIALS_KEY);
    const b = await createAccount(fx.db.pool, { email: exampleEmail() }, TEST_CREDENTIALS_KEY);
    const first = await order(a.id, 1_000, 'shared-key');
    const second = await order(b.id, 2_000, 'shared-key');
    expect(second.id).not.toBe(first.id);
    expect(second.accountId).toBe(b.id);
    const balance = await fx.db.pool.query('SELECT total_bytes FROM balances WHERE account_id = $1', [b.id]);
    expect(balance.rows[0].total_bytes).toBe(2_000);
  });

  it('queues no invoice email when the account turned that alert off', async () => {
    const account = await createAccount(fx.db.pool, { email: exampleEmail() }, TEST_CREDENTIALS_KEY);
    await fx.db.pool.query('UPDATE alert_settings SET new_invoice = false WHERE account_id = $1', [
      account.id,
    ]);
    await recordPurchase(fx.db.pool, { accountId: account.id, product: 'mobile', bytes: 1 });
    const mails = await fx.db.pool.query(`SELECT 1 FROM email_outbox WHERE account_id = $1`, [account.id]);
    expect(mails.rowCount).toBe(0);
  });

  it('never lets a balance go negative', async () => {
    const account = await createAccount(fx.db.pool, { email: exampleEmail() }, TEST_CREDENTIALS_KEY);
    await recordPurchase(fx.db.pool, { accountId: account.id, product: 'light', bytes: 10 });
    await expect(
      fx.db.pool.query('UPDATE balances SET total_bytes = total_bytes - 11 WHERE account_id = $1', [
        account.id,
      ]),
    ).rejects.toMatchObject({ code: '23514' });
  });

  it('announces suspension and password resets in change_log', async () => {
    const account = await createAccount(fx.db.pool, { email: exampleEmail() }, TEST_CREDENTIALS_KEY);
    expect(await setAccountStatus(fx.db.pool, account.id, 'suspended')).toBe(true);
    const password = await resetProxyPassword(fx.db.pool, account.id, TEST_CREDENTIALS_KEY);
    expect(password).not.toBe(account.proxyPassword);
    const { rows } = await fx.db.pool.query(
      'SELECT kind, subject FROM change_log WHERE account_id = $1 ORDER BY id',
      [account.id],
    );
    expect(rows).toEqual(
      expect.arrayContaining([
        { kind: 'account', subject: 'suspended' },
        { kind: 'proxy_credentials', subject: account.proxyUsername },
      ]),
    );
  });
});
