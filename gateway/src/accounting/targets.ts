// Target statistics (docs/adr/0026): bytes and requests per registrable domain, per account and
// UTC day, tallied in memory at each completed request or tunnel (the access log's completion
// point, with the same socket counters billing reads) and added to target_usage on the ledger's
// usage flush, in a statement of their own that billing never waits for.
//
// Per sub-user (docs/adr/0037): each row names the sub-user that sent the traffic, '' for the
// account's own credentials and IP allowlist.
//
// Bounded memory: at most `perAccount` domains per account and day between two flushes, its
// sub-users' (sub-user, domain) entries counted with its own (the rest fold into OTHER, one per
// sub-user) and at most `maxEntries` entries in all (past it, a new key is dropped and
// counted). Only the registrable domain is kept (tldts, the public suffix list): never a path, a
// query or the full host name.
import { getDomain } from 'tldts';
import { isIP } from 'node:net';
import type { Logger } from '#common/logger.ts';
import type { Pool } from '#common/db/pool.ts';
import type { Plan } from '../spec.ts';
import { Statistics } from './statistics.ts';

/** Where the domains past a cap are added up (parentheses cannot occur in a host name). */
export const OTHER = '(other)';
/** Domains per account and day one gateway keeps between two flushes. */
export const DEFAULT_DOMAINS_PER_ACCOUNT = 100;
/** Domains per account, product and day the database keeps (target_usage_record's p_cap). */
export const DEFAULT_DOMAINS_PER_DAY = 200;
/** Entries one gateway keeps between two flushes, all accounts together. */
export const DEFAULT_MAX_ENTRIES = 50_000;
/** The longest host name (RFC 1035 section 2.3.4); longer is not a name and counts as OTHER. */
const MAX_NAME = 253;

export interface TargetRow {
  account_id: string;
  product: Plan;
  day: string;
  /** The sub-user's id, '' for the account's own traffic (migrations/0085). */
  sub_user: string;
  domain: string;
  bytes: number;
  requests: number;
}

export interface TargetTallyOptions {
  pool: Pool;
  plan: Plan;
  logger: Logger;
  perAccount?: number;
  perDay?: number;
  maxEntries?: number;
}

/**
 * The registrable domain of a host (`a.b.example.co.uk` -> `example.co.uk`); an IP address is kept
 * as the address (it has no domain; brackets dropped); a name with no registrable domain
 * (`localhost`, a public suffix) is kept whole, lower-cased.
 */
export function registrableDomain(host: string): string {
  const name = host
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '')
    .toLowerCase();
  if (!name || name.length > MAX_NAME || /[/?#\s()]/.test(name)) return OTHER;
  if (isIP(name)) return name;
  return getDomain(name, { allowPrivateDomains: false }) ?? name;
}

const DAY_MS = 86_400_000;
/** Host names whose domain is remembered (the lookup is most of the cost of a completion). */
const DOMAIN_CACHE = 10_000;

export class TargetTally extends Statistics<TargetRow> {
  private entries = new Map<string, TargetRow>();
  /** Distinct domains per account and day since the last drain. */
  private domains = new Map<string, number>();
  private readonly opts: Required<Omit<TargetTallyOptions, 'pool' | 'logger'>>;
  /** Completions dropped because the gateway-wide cap was reached (since start). */
  dropped = 0;
  /** The current UTC day and when it ends: formatting a date per completion cost 1 µs. */
  private day = '';
  private dayEnds = 0;
  private readonly domainOf = new Map<string, string>();

  constructor(opts: TargetTallyOptions) {
    super(opts.pool, opts.logger, 'target statistics');
    this.opts = {
      perAccount: opts.perAccount ?? DEFAULT_DOMAINS_PER_ACCOUNT,
      perDay: opts.perDay ?? DEFAULT_DOMAINS_PER_DAY,
      maxEntries: opts.maxEntries ?? DEFAULT_MAX_ENTRIES,
      plan: opts.plan,
    };
  }

  /**
   * A request or tunnel of `accountId` (of its sub-user `subUser`, '' or undefined for the
   * account's own) to `host` completed having moved `bytes` (up + down). The per-account cap counts
   * the account's domains and its sub-users' together, so sub-users do not multiply it.
   */
  add(accountId: string, host: string, bytes: number, now = Date.now(), subUser = ''): void {
    if (now >= this.dayEnds || now < this.dayEnds - DAY_MS) {
      this.day = new Date(now).toISOString().slice(0, 10);
      this.dayEnds = (Math.floor(now / DAY_MS) + 1) * DAY_MS;
    }
    const day = this.day;
    let domain = this.domainOf.get(host);
    if (domain === undefined) {
      if (this.domainOf.size >= DOMAIN_CACHE) this.domainOf.clear();
      domain = registrableDomain(host);
      this.domainOf.set(host, domain);
    }
    let key = `${accountId} ${subUser} ${day} ${domain}`;
    let entry = this.entries.get(key);
    if (!entry) {
      const scope = `${accountId} ${day}`;
      const seen = this.domains.get(scope) ?? 0;
      if (domain !== OTHER && seen >= this.opts.perAccount) {
        domain = OTHER;
        key = `${accountId} ${subUser} ${day} ${OTHER}`;
        entry = this.entries.get(key);
      }
      if (!entry) {
        if (this.entries.size >= this.opts.maxEntries) {
          this.dropped++;
          return;
        }
        entry = {
          account_id: accountId,
          product: this.opts.plan,
          day,
          sub_user: subUser,
          domain,
          bytes: 0,
          requests: 0,
        };
        this.entries.set(key, entry);
        if (domain !== OTHER) this.domains.set(scope, seen + 1);
      }
    }
    entry.bytes += bytes;
    entry.requests += 1;
  }

  /** Entries held now (tests; the bound). */
  get size(): number {
    return this.entries.size;
  }

  protected take(): TargetRow[] {
    const rows = [...this.entries.values()];
    this.entries = new Map();
    this.domains = new Map();
    return rows;
  }

  protected async write(rows: TargetRow[]): Promise<void> {
    await this.pool.query('SELECT target_usage_record($1::jsonb, $2)', [
      JSON.stringify(rows),
      this.opts.perDay,
    ]);
  }
}
