// The rows a change makes caches re-read, each loaded by one function: the gateway's credential
// cache and the API's key cache call these on their own (start-up, a change without rows, a key
// not cached), and the change relay calls them once for every process (docs/adr/0105). The rows
// are plain JSON (bytea as hex), so the relay sends them as they are.
import type { AccountStatus } from '../accounts/accounts.ts';
import type { Pool } from './pool.ts';

/** An IP allowlist entry of an account as the credential row carries it (docs/adr/0036). */
export interface AllowlistRow {
  id: string;
  product: string;
  cidr: string;
  targeting: string | null;
}

/** A sub-user as the credential row carries it (docs/adr/0037). */
export interface SubUserRow {
  id: string;
  username: string;
  password_sha256: string;
  status: 'active' | 'suspended';
  max_connections: number | null;
  bytes_per_second: number | string | null;
}

/** An account's proxy credentials and what the gateway enforces for it, one row per account. */
export interface CredentialRow {
  account_id: string;
  username: string;
  /** Hex. */
  password_sha256: string;
  status: 'active' | 'suspended';
  throttles: Record<string, number> | null;
  allowlist: AllowlistRow[] | null;
  sub_users: SubUserRow[] | null;
}

// An override change is announced as an 'account' change (migrations/0083), so it arrives with
// the account's other facts and reaches live budgets on the ledger's next tick.
const CREDENTIALS = `SELECT c.account_id, c.username, encode(c.password_sha256, 'hex') AS password_sha256, a.status,
                       (SELECT jsonb_object_agg(t.product, t.bytes_per_second)
                          FROM account_throttles t WHERE t.account_id = a.id) AS throttles,
                       (SELECT jsonb_agg(jsonb_build_object('id', l.id, 'product', l.product,
                                                            'cidr', l.cidr::text, 'targeting', l.targeting))
                          FROM ip_allowlist l WHERE l.account_id = a.id) AS allowlist,
                       (SELECT jsonb_agg(jsonb_build_object('id', s.id, 'username', s.username,
                                                            'password_sha256', encode(s.password_sha256, 'hex'),
                                                            'status', s.status,
                                                            'max_connections', s.max_connections,
                                                            'bytes_per_second', s.bytes_per_second))
                          FROM sub_users s WHERE s.account_id = a.id) AS sub_users
                  FROM proxy_credentials c JOIN accounts a ON a.id = c.account_id`;

/** The credential rows of these accounts (an account without one: none), or of every account. */
export async function loadCredentialRows(
  pool: Pick<Pool, 'query'>,
  accountIds?: readonly string[],
): Promise<CredentialRow[]> {
  const { rows } = accountIds
    ? await pool.query<CredentialRow>(`${CREDENTIALS} WHERE c.account_id = ANY($1::uuid[])`, [
        [...accountIds],
      ])
    : await pool.query<CredentialRow>(CREDENTIALS);
  return rows;
}

/** An API key as the API's key cache keeps it, by the hex sha256 of the key. */
export interface KeyRow {
  keyId: string;
  accountId: string;
  revoked: boolean;
  status: AccountStatus;
}

/**
 * The rows of these keys by their sha256 (unique index api_keys_hash_key), with their account's
 * status; a hash no key has: none.
 */
export async function loadKeyRows(
  pool: Pick<Pool, 'query'>,
  hashes: readonly Buffer[],
): Promise<(KeyRow & { hash: string })[]> {
  const { rows } = await pool.query<KeyRow & { hash: string }>(
    `SELECT encode(k.key_hash, 'hex') AS hash, k.id AS "keyId", k.account_id AS "accountId",
            k.revoked_at IS NOT NULL AS revoked, a.status
       FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.key_hash = ANY($1::bytea[])`,
    [[...hashes]],
  );
  return rows;
}
