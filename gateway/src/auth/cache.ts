// Every customer's proxy credentials and account status, in memory: loaded at start, kept current
// by the change feed (LISTEN/NOTIFY plus change_log catch-up after a reconnect), or both from the
// change relay's stream, whose changes carry the rows (docs/adr/0105). While the
// database is unreachable the cache keeps what it has, so known customers keep being served
// (docs/adr/0021).
import type { Change } from '#common/db/changes.ts';
import type { Pool } from '#common/db/pool.ts';
import { loadCredentialRows, type CredentialRow } from '#common/db/change-rows.ts';
import { AllowlistIndex, type AllowEntry } from './allowlist.ts';

export interface CachedAccount {
  accountId: string;
  username: string;
  passwordSha256: Buffer;
  status: 'active' | 'suspended';
  /** Bandwidth caps set for this account, bytes per second per product (docs/adr/0035). */
  throttles?: Readonly<Record<string, number>> | null;
  /** Source ranges that authenticate as this account without a password (docs/adr/0036). */
  allowlist?: readonly AllowEntry[];
  /**
   * Set on a sub-user's entry (docs/adr/0037): `accountId` is then its account's, `username` and
   * `passwordSha256` its own, and `status` 'suspended' when either is suspended.
   */
  subUser?: SubUserFacts;
  /** The account's sub-users (on the account's own entry only). */
  subUsers?: readonly CachedAccount[];
}

interface SubUserFacts {
  id: string;
  /** Concurrent connections across the fleet (null: the plan's per-account cap only). */
  maxConnections: number | null;
  /** Bandwidth cap across the fleet, bytes per second (null: none of its own). */
  bytesPerSecond: number | null;
}

export class CredentialCache {
  private readonly byUsername = new Map<string, CachedAccount>();
  private readonly usernameOf = new Map<string, string>();
  /** Sub-users' entries by id (the ledger asks each tick for every live sub-user budget's cap). */
  private readonly subUserById = new Map<string, CachedAccount>();
  private readonly allowlist = new AllowlistIndex();
  /** Allowlist entries gone in the last apply(), per account (drainRemovedEntries). */
  private removedEntries = new Map<string, Set<string>>();
  /** Sub-users whose live connections must end, found by the last apply() calls (drainRevokedSubUsers). */
  private revokedSubUsers = new Map<string, Set<string>>();
  /** Accounts whose own credentials changed, found by the last apply() calls (drainRevokedOwn). */
  private revokedOwn = new Set<string>();
  private readonly pool: Pool;
  /** Bumped on every change: callers caching verified credentials compare it. */
  generation = 0;

  constructor(pool: Pool) {
    this.pool = pool;
  }

  get(username: string): CachedAccount | undefined {
    return this.byUsername.get(username);
  }

  /** The account whose allowlist entry of `product` covers `address` (longest prefix), with the entry. */
  allowed(product: string, address: string): { account: CachedAccount; entry: AllowEntry } | undefined {
    const entry = this.allowlist.find(product, address);
    const account = entry && this.byAccount(entry.accountId);
    return account && entry && { account, entry };
  }

  /**
   * The allowlist entries removed or changed by the apply() calls since the last drain, per account:
   * connections admitted through them are cut (server.ts).
   */
  drainRemovedEntries(): Map<string, Set<string>> {
    const out = this.removedEntries;
    this.removedEntries = new Map();
    return out;
  }

  /**
   * The sub-users deleted, suspended or given a new username or password by the apply() calls
   * since the last drain, per account: their live connections are cut (server.ts). A whole account
   * revoked by apply() is not repeated here (its cut covers its sub-users).
   */
  drainRevokedSubUsers(): Map<string, Set<string>> {
    const out = this.revokedSubUsers;
    this.revokedSubUsers = new Map();
    return out;
  }

  /**
   * The accounts whose own username or password the apply() calls since the last drain changed
   * (still active): the connections admitted with the account's own credentials end (server.ts).
   */
  drainRevokedOwn(): Set<string> {
    const out = this.revokedOwn;
    this.revokedOwn = new Set();
    return out;
  }

  /** A sub-user's own bandwidth cap, bytes per second (undefined: none, or not known). */
  subUserThrottle(accountId: string, subUserId: string): number | undefined {
    const sub = this.subUserById.get(subUserId);
    return sub?.accountId === accountId ? (sub.subUser?.bytesPerSecond ?? undefined) : undefined;
  }

  /** The account's bandwidth cap override for a product, bytes per second (undefined: none). */
  throttle(accountId: string, product: string): number | undefined {
    return this.byAccount(accountId)?.throttles?.[product];
  }

  private byAccount(accountId: string): CachedAccount | undefined {
    const username = this.usernameOf.get(accountId);
    return username === undefined ? undefined : this.byUsername.get(username);
  }

  get size(): number {
    return this.byUsername.size;
  }

  async loadAll(): Promise<void> {
    for (const row of await loadCredentialRows(this.pool)) this.put(row);
    this.generation++;
  }

  /**
   * Applies the credential and account changes of a change-feed batch. Returns the accounts whose
   * live connections must end, their sub-users' included: suspended or credentials removed. A
   * changed username or password of the account ends its own only (drainRevokedOwn). Changes
   * from the relay carry the rows: the cache reads nothing then.
   */
  async apply(changes: Change[]): Promise<Set<string>> {
    const ids = new Set<string>();
    /** The rows the changes carry, the last of each account (null: it has none any more). */
    const carried = new Map<string, CredentialRow | null>();
    let read = false;
    for (const c of changes) {
      if (c.kind !== 'proxy_credentials' && c.kind !== 'account') continue;
      ids.add(c.accountId);
      if (c.credentials === undefined) read = true;
      else carried.set(c.accountId, c.credentials);
    }
    const revoked = new Set<string>();
    if (ids.size === 0) return revoked;
    const before = new Map<string, CachedAccount>();
    for (const id of ids) {
      const entry = this.byAccount(id);
      if (entry) before.set(id, entry);
    }
    // The old entries serve while the refresh is under way: a settings change (an alert toggled, a
    // throttle, an allowlist entry) must not refuse the account's requests for a round trip; the
    // e2e rolling update saw two 407s in that window. Fail closed when the refresh fails (the
    // change feed then replays this batch): a suspension or password reset is not outlived by the
    // old entry; those customers are refused until the replay succeeds.
    let rows: CredentialRow[];
    try {
      rows = read
        ? await loadCredentialRows(this.pool, [...ids])
        : [...carried.values()].filter((r) => r !== null);
    } catch (err) {
      for (const id of ids) this.remove(id);
      this.generation++;
      throw err;
    }
    for (const id of ids) this.remove(id);
    for (const row of rows) this.put(row);
    this.generation++;
    for (const [id, old] of before) {
      const now = this.byAccount(id);
      // An entry is the same only with the same id, range and targeting.
      const kept = new Set((now?.allowlist ?? []).map(entryKey));
      const gone = (old.allowlist ?? []).filter((e) => !kept.has(entryKey(e))).map((e) => e.id);
      addAll(this.removedEntries, id, gone);
      if (!now || now.status !== 'active') {
        revoked.add(id);
        continue;
      }
      // The account's own credentials changed: its own connections end, its sub-users' stay
      // (their credentials still hold, docs/adr/0037).
      if (!sameCredentials(now, old)) this.revokedOwn.add(id);
      const current = new Map((now.subUsers ?? []).map((e) => [e.subUser!.id, e]));
      const cut = new Set<string>();
      for (const sub of old.subUsers ?? []) {
        const e = current.get(sub.subUser!.id);
        if (!e || e.status !== 'active' || !sameCredentials(e, sub)) cut.add(sub.subUser!.id);
      }
      addAll(this.revokedSubUsers, id, cut);
    }
    return revoked;
  }

  private put(row: CredentialRow): void {
    this.remove(row.account_id);
    const entry: CachedAccount = {
      accountId: row.account_id,
      username: row.username,
      passwordSha256: Buffer.from(row.password_sha256, 'hex'),
      status: row.status,
      throttles: row.throttles,
      allowlist: (row.allowlist ?? []).map((e) => ({ ...e, accountId: row.account_id })),
    };
    entry.subUsers = (row.sub_users ?? []).map((s) => ({
      accountId: row.account_id,
      username: s.username,
      passwordSha256: Buffer.from(s.password_sha256, 'hex'),
      status: row.status === 'active' && s.status === 'active' ? 'active' : 'suspended',
      throttles: row.throttles,
      subUser: {
        id: s.id,
        maxConnections: s.max_connections,
        bytesPerSecond: s.bytes_per_second === null ? null : Number(s.bytes_per_second),
      },
    }));
    for (const e of entry.allowlist ?? []) this.allowlist.add(e);
    this.byUsername.set(row.username, entry);
    for (const sub of entry.subUsers) {
      this.byUsername.set(sub.username, sub);
      this.subUserById.set(sub.subUser!.id, sub);
    }
    this.usernameOf.set(row.account_id, row.username);
  }

  private remove(accountId: string): void {
    const username = this.usernameOf.get(accountId);
    if (username !== undefined) {
      const entry = this.byUsername.get(username);
      for (const e of entry?.allowlist ?? []) this.allowlist.remove(e);
      // Only the sub-user entries still this account's: a username moved to another account
      // meanwhile (deleted here, created there in one batch) stays the other's.
      for (const sub of entry?.subUsers ?? []) {
        if (this.byUsername.get(sub.username) === sub) this.byUsername.delete(sub.username);
        if (this.subUserById.get(sub.subUser!.id) === sub) this.subUserById.delete(sub.subUser!.id);
      }
      this.byUsername.delete(username);
      this.usernameOf.delete(accountId);
    }
  }
}

const sameCredentials = (a: CachedAccount, b: CachedAccount) =>
  a.username === b.username && a.passwordSha256.equals(b.passwordSha256);

/** Adds `items` to the set of `key` (none: nothing added). */
function addAll(map: Map<string, Set<string>>, key: string, items: Iterable<string>): void {
  for (const item of items) {
    let set = map.get(key);
    if (!set) map.set(key, (set = new Set()));
    set.add(item);
  }
}

const entryKey = (e: AllowEntry) => `${e.id} ${e.cidr} ${e.targeting ?? ''}`;
