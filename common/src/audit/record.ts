// The audit log's write side (docs/security.md "Audit log", docs/adr/0079): one entry per change
// to an account, written with the SAME client as the change (a client inside the caller's
// transaction, or the pool for a change that is a single statement) so that both commit or roll
// back together. SQL functions write through audit_record (migrations/functions/audit_record.sql),
// as this does.
import type { Pool, PoolClient } from '../db/pool.ts';

export type AuditActorKind = 'api_key' | 'dashboard' | 'admin' | 'system';

/**
 * Who made the change. `id`: the API key's id or display prefix (api_key), the signed-in email
 * (dashboard), what identifies the admin caller (admin), the component's name (system).
 * `ip`: the caller's address where there is one.
 */
export interface AuditActor {
  kind: AuditActorKind;
  id: string;
  ip?: string | null;
}

export interface AuditEntry {
  accountId: string;
  actor: AuditActor;
  /** `<resource>.<verb>`, e.g. `api_key.created`, `two_factor.enabled`, `subscription.renewed`. */
  action: string;
  target?: { type: string; id: string } | null;
  /** What changed. Never a secret: a key, password, token, TOTP secret or recovery code. */
  details?: Record<string, unknown>;
}

/** A pg Pool, or a client inside the caller's transaction. */
export type Queryable = Pool | PoolClient;

/**
 * Takes the account row's KEY SHARE lock, which the entry's foreign key takes when it is written.
 * Call it first in a transaction that locks other rows of the account before it records: the lock
 * order is then the account's row first, as the operations that lock it FOR UPDATE (key and
 * sub-user creation, the allowlist) take it; taken last, a sub-user's deletion deadlocked with
 * them (40P01, a 500; api/src/concurrency.int.test.ts). Returns whether the account exists.
 */
export async function lockAccountForAudit(db: Queryable, accountId: string): Promise<boolean> {
  const { rowCount } = await db.query('SELECT 1 FROM accounts WHERE id = $1 FOR KEY SHARE', [accountId]);
  return rowCount === 1;
}

/** `<resource>.<verb>`, as the table's CHECK has it. */
const ACTION = /^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$/;

/**
 * Names a detail may not have, whatever its value: what a secret is called in this code base.
 * A guard against a careless caller, not a proof: callers choose what they record.
 */
const SECRET_NAMES =
  /^(password|new_?password|token|secret|totp_?secret|recovery_?codes?|api_?key|key|code|credential)$/i;
/** Values that look like a secret this service issues: an API key, a sealed or hashed blob. */
const SECRET_VALUES = [/svc_live_[0-9a-f]{16,}/];

/** Writes one entry; throws (so the caller's transaction rolls back) on a malformed entry. */
export async function recordAudit(db: Queryable, entry: AuditEntry): Promise<void> {
  if (!ACTION.test(entry.action)) throw new Error(`audit action must be <resource>.<verb>: ${entry.action}`);
  const details = entry.details ?? {};
  const leak = findSecret(details);
  if (leak) throw new Error(`audit details for ${entry.action} must not hold a secret (${leak})`);
  await db.query('SELECT audit_record($1, $2, $3, $4, $5, $6, $7, $8)', [
    entry.accountId,
    entry.actor.kind,
    entry.actor.id,
    normaliseIp(entry.actor.ip),
    entry.action,
    entry.target?.type ?? null,
    entry.target?.id ?? null,
    JSON.stringify(details),
  ]);
}

/** The path of the first detail that looks like a secret, or null. */
function findSecret(value: unknown, path = 'details'): string | null {
  if (typeof value === 'string') return SECRET_VALUES.some((p) => p.test(value)) ? path : null;
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) {
      const found = findSecret(v, `${path}[${i}]`);
      if (found) return found;
    }
    return null;
  }
  if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (SECRET_NAMES.test(k)) return `${path}.${k}`;
      const found = findSecret(v, `${path}.${k}`);
      if (found) return found;
    }
  }
  return null;
}

/** An IPv4-mapped IPv6 address (::ffff:1.2.3.4, as Node reports IPv4 peers on a dual socket) as IPv4. */
function normaliseIp(ip: string | null | undefined): string | null {
  if (!ip) return null;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  return mapped ? mapped[1]! : ip;
}
