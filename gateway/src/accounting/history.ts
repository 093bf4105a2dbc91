// Usage history with outcomes (docs/adr/0103): per account, sub-user and UTC hour, the bytes of
// billed lines, the requests and how each ended, tallied in memory at the access log's completion
// points (no database write per request) and added to usage_history_hourly and _daily on the
// ledger's usage flush, in one statement of its own that billing never waits for (like the target
// statistics, docs/adr/0026).
//
// Bounded memory: at most `maxEntries` (account, sub-user, hour) entries between two flushes; past
// it a new key is dropped and counted.
import type { Logger } from '#common/logger.ts';
import type { Pool } from '#common/db/pool.ts';
import type { Plan } from '../spec.ts';
import { Statistics } from './statistics.ts';

/**
 * The counts of one entry, in the order usage_history_record reads them
 * (migrations/functions/usage/usage_history_record.sql). The outcomes (from `succeeded` to
 * `other`) add up to `requests`; the status classes count plain HTTP answers relayed from the origin.
 */
export const USAGE_HISTORY_COLUMNS = [
  'bytesUp',
  'bytesDown',
  'requests',
  'succeeded',
  'refusedNoBandwidth',
  'refusedBadCredentials',
  'refusedThrottled',
  'refusedTargetNotAllowed',
  'refusedNoExit',
  'upstreamConnectError',
  'upstreamTimeout',
  'other',
  'status2xx',
  'status3xx',
  'status4xx',
  'status5xx',
] as const;
export type UsageHistoryColumn = (typeof USAGE_HISTORY_COLUMNS)[number];
type Outcome = Exclude<UsageHistoryColumn, 'bytesUp' | 'bytesDown' | 'requests' | `status${string}`>;

const at = (column: UsageHistoryColumn) => USAGE_HISTORY_COLUMNS.indexOf(column);
const BYTES_UP = at('bytesUp');
const BYTES_DOWN = at('bytesDown');
const REQUESTS = at('requests');
const SUCCEEDED = at('succeeded');
const OTHER = at('other');
const STATUS_2XX = at('status2xx');

/**
 * The refusal table's reasons (proxy/refusals.ts) by outcome; a reason not named here (the
 * provider's side: billing_unavailable, bandwidth_held; a malformed request; the answer `cut`
 * short; `client_abandoned`) is `other`. Credential errors are only ever counted for an account
 * when the username named it (wrong_password): an unknown username belongs to no one.
 */
export const OUTCOME_OF_REASON: Readonly<Record<string, Outcome>> = {
  no_bandwidth: 'refusedNoBandwidth',
  sub_user_limit: 'refusedNoBandwidth',
  wrong_password: 'refusedBadCredentials',
  connection_limit: 'refusedThrottled',
  port_prohibited: 'refusedTargetNotAllowed',
  destination_prohibited: 'refusedTargetNotAllowed',
  no_exit: 'refusedNoExit',
  destination_refused: 'upstreamConnectError',
  exit_failed: 'upstreamConnectError',
  dns_error: 'upstreamConnectError',
  destination_timeout: 'upstreamTimeout',
  exit_timeout: 'upstreamTimeout',
};
const INDEX_OF_REASON = new Map(
  Object.entries(OUTCOME_OF_REASON).map(([reason, outcome]) => [reason, at(outcome)]),
);

/** Entries one gateway keeps between two flushes, all accounts together. */
export const DEFAULT_MAX_HISTORY_ENTRIES = 50_000;
const HOUR_MS = 3_600_000;

interface Entry {
  account_id: string;
  product: Plan;
  hour: string;
  sub_user: string;
  counts: number[];
}

export interface HistoryTallyOptions {
  pool: Pool;
  plan: Plan;
  logger: Logger;
  maxEntries?: number;
}

export class HistoryTally extends Statistics<Entry> {
  private entries = new Map<string, Entry>();
  private readonly plan: Plan;
  private readonly maxEntries: number;
  /** Completions dropped because the cap was reached (since start). */
  dropped = 0;
  /** The current hour, ISO 8601, and when it ends: formatting a date per completion costs 1 µs. */
  private hour = '';
  private hourEnds = 0;

  constructor(opts: HistoryTallyOptions) {
    super(opts.pool, opts.logger, 'usage history');
    this.plan = opts.plan;
    this.maxEntries = opts.maxEntries ?? DEFAULT_MAX_HISTORY_ENTRIES;
  }

  /**
   * A line of the access log for `accountId` (its sub-user `subUser`, '' for the account's own):
   * `status` answered (0: none), `reason` (undefined: completed normally), `http` whether it was a
   * plain HTTP request (its status is the origin's), `billed` whether its bytes are billed.
   */
  add(
    accountId: string,
    subUser: string,
    http: boolean,
    status: number,
    reason: string | undefined,
    up: number,
    down: number,
    billed: boolean,
    now = Date.now(),
  ): void {
    if (now >= this.hourEnds || now < this.hourEnds - HOUR_MS) {
      const start = Math.floor(now / HOUR_MS) * HOUR_MS;
      this.hour = new Date(start).toISOString();
      this.hourEnds = start + HOUR_MS;
    }
    const key = `${accountId} ${subUser} ${this.hour}`;
    let entry = this.entries.get(key);
    if (!entry) {
      if (this.entries.size >= this.maxEntries) {
        this.dropped++;
        return;
      }
      const counts = new Array<number>(USAGE_HISTORY_COLUMNS.length).fill(0);
      entry = { account_id: accountId, product: this.plan, hour: this.hour, sub_user: subUser, counts };
      this.entries.set(key, entry);
    }
    const c = entry.counts;
    c[REQUESTS]! += 1;
    if (billed) {
      c[BYTES_UP]! += up;
      c[BYTES_DOWN]! += down;
    }
    const outcome = reason === undefined ? SUCCEEDED : (INDEX_OF_REASON.get(reason) ?? OTHER);
    c[outcome]! += 1;
    // The origin's answer, relayed (a refusal's status is the gateway's own, not a class here).
    if (http && billed && status >= 200 && status < 600) c[STATUS_2XX + Math.floor(status / 100) - 2]! += 1;
  }

  get size(): number {
    return this.entries.size;
  }

  protected take(): Entry[] {
    const rows = [...this.entries.values()];
    this.entries = new Map();
    return rows;
  }

  protected async write(rows: Entry[]): Promise<void> {
    await this.pool.query('SELECT usage_history_record($1::jsonb)', [JSON.stringify(rows)]);
  }
}
