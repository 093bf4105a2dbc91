// What the change feed (changes.ts: this process's own LISTEN) and the change relay's client
// (relay-feed.ts, docs/adr/0105) share: the changes they deliver and the interface the caches
// subscribe to (ChangeSource; changes.ts exports them to the caches), the part of it both keep
// alike (FeedBase), their gauges and their set of applied ids.
import { Gauge, type Registry } from 'prom-client';
import type { CredentialRow, KeyRow } from './change-rows.ts';

/**
 * Above this silence the feed may be dead without knowing it (heartbeat 5 s; acks count as fresh
 * for 15 s): caches fed by it stop answering on their own (FeedBase.trusted).
 */
export const TRUST_SILENCE_MS = 10_000;

/** give_back: a draw was denied while other gateways' leases hold bytes (subject: the product; docs/adr/0073). */
export type ChangeKind = 'api_key' | 'proxy_credentials' | 'account' | 'balance' | 'isp_proxy' | 'give_back';

export interface Change {
  id: number;
  kind: ChangeKind;
  accountId: string;
  subject: string | null;
  /**
   * From the change relay (docs/adr/0105), on 'proxy_credentials' and 'account' changes: the
   * account's credential row as the relay read it after the change (null: it has none any more).
   * Absent: the cache reads it itself.
   */
  credentials?: CredentialRow | null;
  /** From the change relay, on 'api_key' changes: the key's row (null: no such key). */
  apiKey?: KeyRow | null;
}

export type ChangeHandler = (changes: Change[]) => Promise<void> | void;

/**
 * What the caches subscribe to: the change feed (this process's own LISTEN) or the change relay's
 * stream (relay-feed.ts). `snapshots`: start() delivers every account's credential row as
 * changes, so a cache loads nothing itself.
 */
export interface ChangeSource {
  readonly snapshots: boolean;
  onChanges(handler: ChangeHandler): void;
  readonly version: number;
  readonly connected: boolean;
  silenceMs(): number;
  trusted(): boolean;
  start(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The part of a ChangeSource both feeds keep alike: the handlers and how a batch runs through
 * them, the version applied, the connection's state, and when the database was last heard from
 * (by this feed, or by the relay's feed as its beat says), which decides trust.
 */
export abstract class FeedBase {
  protected readonly handlers: ChangeHandler[] = [];
  protected state: 'idle' | 'connecting' | 'connected' | 'closed' = 'idle';
  protected appliedVersion = 0;
  protected lastHeard = 0;

  /** Handlers see every change after start(), in batches, in the order the feed learns of them. */
  onChanges(handler: ChangeHandler): void {
    this.handlers.push(handler);
  }

  /** The highest change_log id applied: the cache version this process reports. */
  get version(): number {
    return this.appliedVersion;
  }

  get connected(): boolean {
    return this.state === 'connected';
  }

  /** Milliseconds since the database was last heard from; Infinity before the first contact. */
  silenceMs(): number {
    return this.lastHeard ? Date.now() - this.lastHeard : Number.POSITIVE_INFINITY;
  }

  /**
   * Whether a cache kept up to date by this feed may answer without asking the database: the
   * feed is connected and the database was heard from within TRUST_SILENCE_MS.
   */
  trusted(): boolean {
    return this.connected && this.silenceMs() < TRUST_SILENCE_MS;
  }

  /**
   * Runs every handler on the batch, each failure told to `failed`; the first is thrown after all
   * ran, so the version does not advance and the batch comes again.
   */
  protected async runHandlers(changes: Change[], failed?: (err: unknown) => void): Promise<void> {
    if (changes.length === 0) return;
    let failure: unknown;
    for (const handler of this.handlers) {
      try {
        await handler(changes);
      } catch (err) {
        failure ??= err;
        failed?.(err);
      }
    }
    if (failure !== undefined) throw failure instanceof Error ? failure : new Error(JSON.stringify(failure));
  }
}

/** The feed's silence and version as gauges (the change feed's and the relay stream's alike). */
export function registerFeedGauges(
  registry: Registry,
  component: string,
  feed: { silenceMs(): number; readonly version: number },
): void {
  new Gauge({
    name: `proxyfleet_${component}_change_feed_silence_seconds`,
    help: 'Seconds since the change feed last heard from the database (notification or heartbeat)',
    registers: [registry],
    collect() {
      const ms = feed.silenceMs();
      this.set(Number.isFinite(ms) ? ms / 1000 : -1);
    },
  });
  new Gauge({
    name: `proxyfleet_${component}_cache_version`,
    help: 'Highest change_log id this process has applied to its caches',
    registers: [registry],
    collect() {
      this.set(feed.version);
    },
  });
}

/** Forgets the applied ids more than `overlap` below `version`, once the set is twice that size. */
export function pruneApplied(ids: Set<number>, version: number, overlap: number): void {
  if (ids.size <= 2 * overlap) return;
  const floor = version - overlap;
  for (const id of ids) if (id <= floor) ids.delete(id);
}
