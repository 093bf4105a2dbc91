// Account lifecycle, shared by the admin API, the gateway's tests and the dev seed: create an
// account with its primary key, proxy credentials and alert settings; buy bandwidth (a purchase
// always issues an invoice, and queues the new-invoice email when that alert is on); suspend.
import { AppError } from '../errors.ts';
import { SQLSTATE, sqlState, withTransaction, type Pool, type PoolClient } from '../db/pool.ts';
import { newProxyPassword, newProxyUsername, seal, sha256, unseal } from '../secrets.ts';
import type { Product } from '../products.ts';
import { insertPrimaryKey } from './keys.ts';

export type AccountStatus = 'active' | 'suspended';

export interface NewAccount {
  id: string;
  email: string;
  status: AccountStatus;
  apiKey: string;
  proxyUsername: string;
  proxyPassword: string;
}

export async function createAccount(
  pool: Pool,
  input: { email: string },
  credentialsKey: Buffer,
): Promise<NewAccount> {
  try {
    return await withTransaction(pool, async (client) => {
      const { rows } = await client.query<{ id: string; email: string; status: AccountStatus }>(
        'INSERT INTO accounts (email) VALUES ($1) RETURNING id, email, status',
        [input.email],
      );
      const account = rows[0]!;
      const key = await insertPrimaryKey(client, account.id);
      const proxyUsername = newProxyUsername();
      const proxyPassword = newProxyPassword();
      await client.query(
        `INSERT INTO proxy_credentials (account_id, username, password_enc, password_sha256) VALUES ($1, $2, $3, $4)`,
        [account.id, proxyUsername, seal(credentialsKey, proxyPassword), sha256(proxyPassword)],
      );
      await client.query('INSERT INTO alert_settings (account_id) VALUES ($1)', [account.id]);
      return { ...account, apiKey: key.apiKey, proxyUsername, proxyPassword };
    });
  } catch (err) {
    if (sqlState(err) === SQLSTATE.UNIQUE_VIOLATION) throw new AppError('EMAIL_TAKEN');
    throw err;
  }
}

export interface Invoice {
  id: string;
  number: number;
  accountId: string;
  purchaseId: string;
  product: Product;
  bytes: number;
  amountCents: number | null;
  currency: string;
  status: 'issued' | 'paid' | 'void';
  issuedAt: Date;
}

export interface PurchaseInput {
  accountId: string;
  product: Product;
  bytes: number;
  source?: 'admin' | 'auto_refill';
  /** A retried call with the same key returns the first call's invoice and buys nothing more. */
  idempotencyKey?: string;
}

/** Buys bandwidth: purchase, invoice (priced), balance and (if on) the new-invoice email, atomically. */
export async function recordPurchase(pool: Pool, input: PurchaseInput): Promise<Invoice> {
  return withTransaction(pool, (client) => recordPurchaseIn(client, input));
}

export async function recordPurchaseIn(client: PoolClient, input: PurchaseInput): Promise<Invoice> {
  // No account row lock: purchase_record (migrations/0060) is also called by a gateway's draw,
  // which holds the balance row lock; the unique idempotency index serialises equal keys.
  const exists = await client.query('SELECT 1 FROM accounts WHERE id = $1', [input.accountId]);
  if (exists.rowCount !== 1) throw new AppError('ACCOUNT_NOT_FOUND');
  try {
    const { rows } = await client.query<InvoiceRow>('SELECT * FROM purchase_record($1, $2, $3, $4, $5)', [
      input.accountId,
      input.product,
      input.bytes,
      input.source ?? 'admin',
      input.idempotencyKey ?? null,
    ]);
    const row = rows[0]!;
    // A retry must be the same purchase: another body under the same key is a client bug.
    if (input.idempotencyKey && (row.product !== input.product || row.bytes !== input.bytes))
      throw new AppError('IDEMPOTENCY_KEY_REUSED');
    return toInvoice(row);
  } catch (err) {
    if (sqlState(err) === SQLSTATE.FOREIGN_KEY_VIOLATION) throw new AppError('ACCOUNT_NOT_FOUND');
    throw err;
  }
}

interface InvoiceRow {
  id: string;
  number: number;
  account_id: string;
  purchase_id: string;
  product: Product;
  bytes: number;
  amount_cents: number | null;
  currency: string;
  status: Invoice['status'];
  issued_at: Date;
}

function toInvoice(row: InvoiceRow): Invoice {
  return {
    id: row.id,
    number: row.number,
    accountId: row.account_id,
    purchaseId: row.purchase_id,
    product: row.product,
    bytes: row.bytes,
    amountCents: row.amount_cents,
    currency: row.currency,
    status: row.status,
    issuedAt: row.issued_at,
  };
}

/** Suspends or reactivates; false when the account does not exist. */
export async function setAccountStatus(
  pool: Pool,
  accountId: string,
  status: AccountStatus,
): Promise<boolean> {
  const { rowCount } = await pool.query('UPDATE accounts SET status = $2, updated_at = now() WHERE id = $1', [
    accountId,
    status,
  ]);
  return rowCount === 1;
}

/** Issues a new proxy password; the old one stops working on every gateway within a second. */
export async function resetProxyPassword(
  pool: Pool,
  accountId: string,
  credentialsKey: Buffer,
): Promise<string> {
  const password = newProxyPassword();
  const { rowCount } = await pool.query(
    `UPDATE proxy_credentials SET password_enc = $2, password_sha256 = $3, updated_at = now() WHERE account_id = $1`,
    [accountId, seal(credentialsKey, password), sha256(password)],
  );
  if (rowCount !== 1) throw new AppError('ACCOUNT_NOT_FOUND');
  return password;
}

export async function readProxyCredentials(
  pool: Pool,
  accountId: string,
  credentialsKey: Buffer,
): Promise<{ username: string; password: string }> {
  const { rows } = await pool.query<{ username: string; password_enc: Buffer }>(
    'SELECT username, password_enc FROM proxy_credentials WHERE account_id = $1',
    [accountId],
  );
  const row = rows[0];
  if (!row) throw new AppError('ACCOUNT_NOT_FOUND');
  return { username: row.username, password: unseal(credentialsKey, row.password_enc) };
}
