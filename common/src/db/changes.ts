// The change feed: the one owner of the LISTEN connection. Caches (API keys, gateway credentials)
// subscribe here. It LISTENs on a dedicated client (never a pooled one), checks the connection
// with a periodic SELECT 1 (a dead connection goes unnoticed otherwise: node-postgres #967,
// #3003), reconnects with backoff behind a single state flag (pg can emit 'error' twice for one
// dead backend), and after every reconnect catches up from change_log, since notifications sent
// while disconnected are lost. The catch-up delivers only what this process has not applied yet:
// a replay of applied changes is not free for the caches (the gateway's drops each changed account
// before reading it again, fail closed), and after a failover it refused every recently changed
// customer with 407 while the refresh ran (docs/adr/0069).
import pg from 'pg';
import type { Registry } from 'prom-client';
import type { Logger } from '../logger.ts';
import { PG_TYPES } from './pool.ts';
import {
  FeedBase,
  pruneApplied,
  registerFeedGauges,
  type Change,
  type ChangeKind,
  type ChangeSource,
} from './feed-common.ts';

// The changes and the interface the caches subscribe to, shared with the relay's client.
export { TRUST_SILENCE_MS, type Change, type ChangeHandler, type ChangeSource } from './feed-common.ts';

/** The newest change_log id (0 when empty): a cache at this version has every change so far. */
export async function changeLogHead(db: Pick<pg.ClientBase, 'query'>): Promise<number> {
  const { rows } = await db.query<{ head: number }>(
    'SELECT coalesce(max(id), 0)::bigint AS head FROM change_log',
  );
  return rows[0]?.head ?? 0;
}

export const CHANGES_CHANNEL = 'proxyfleet_changes';

export interface ChangeFeedOptions {
  url: string;
  logger: Logger;
  registry?: Registry;
  component: string;
  heartbeatMs?: number;
  maxBackoffMs?: number;
  /**
   * change_log ids are assigned at insert and can commit out of order, so a catch-up re-reads
   * this many ids below the last one applied; handlers are idempotent.
   */
  catchUpOverlap?: number;
  /**
   * When set, the feed reports the version it applied in cache_acks (on change and on every
   * heartbeat), so the ApiKey controller can count the processes that have a change. With
   * `batched`, only on the heartbeat: one write per heartbeat whatever the rate of changes, for
   * the gateways, whose acks nothing waits on but the ApiKey's "Synced" (docs/adr/0090). The
   * API's acks, which admin calls wait for, are written on every change.
   */
  ack?: { instance: string; component: 'api' | 'gateway'; batched?: boolean };
}

/** How recent a cache_acks row must be to count as a running process. */
export const ACK_FRESH_SECONDS = 15;

/** How many fresh processes of a component have applied `version`, out of how many. */
export async function countCacheAcks(
  pool: { query: pg.Pool['query'] },
  component: 'api' | 'gateway',
  version: number,
): Promise<{ synced: number; total: number }> {
  const { rows } = await pool.query<{ synced: number; total: number }>(
    `SELECT count(*) FILTER (WHERE version >= $2)::int AS synced, count(*)::int AS total
       FROM cache_acks WHERE component = $1 AND updated_at > now() - make_interval(secs => $3)`,
    [component, version, ACK_FRESH_SECONDS],
  );
  return rows[0] ?? { synced: 0, total: 0 };
}

const DEFAULT_HEARTBEAT_MS = 5_000;
/**
 * A lost feed retries within this long of the database's return: a change (a revocation, or a
 * give-back another gateway's admission waits 2 s for) must not wait out a 5 s backoff after a
 * failover (docs/adr/0095: a 402 right after a promotion while the others had not yet heard).
 */
const DEFAULT_MAX_BACKOFF_MS = 1_000;

/**
 * The wait before reconnect attempt `failures` (1, 2, ...): doubling from 200 ms up to `maxMs`,
 * and jittered down to half, so that a fleet that lost the database together does not come back
 * in one wave.
 */
export function reconnectDelayMs(
  failures: number,
  maxMs = DEFAULT_MAX_BACKOFF_MS,
  random: () => number = Math.random,
): number {
  const base = Math.min(maxMs, 100 * 2 ** Math.min(failures, 10));
  return Math.round(base / 2 + (random() * base) / 2);
}

export const DEFAULT_CATCH_UP_OVERLAP = 1_000;

const QUERY_TIMEOUT_MS = 5_000;

export class ChangeFeed extends FeedBase implements ChangeSource {
  readonly snapshots = false;
  private client: pg.Client | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private failures = 0;
  private queue: Promise<void> = Promise.resolve();
  private readonly opts: Required<Omit<ChangeFeedOptions, 'registry' | 'ack'>> &
    Pick<ChangeFeedOptions, 'registry' | 'ack'>;
  private ackedVersion = -1;
  /** The ids applied within the catch-up overlap below the version (pruned as it advances). */
  private readonly appliedIds = new Set<number>();

  constructor(options: ChangeFeedOptions) {
    super();
    this.opts = {
      heartbeatMs: DEFAULT_HEARTBEAT_MS,
      maxBackoffMs: DEFAULT_MAX_BACKOFF_MS,
      catchUpOverlap: DEFAULT_CATCH_UP_OVERLAP,
      ...options,
    };
    if (options.registry) registerFeedGauges(options.registry, options.component, this);
  }

  /**
   * Connects and LISTENs, then records the current change_log head as the version. Call it
   * before loading a cache's full state: any change after that point arrives as a notification.
   */
  async start(): Promise<void> {
    await this.connect(false);
  }

  async close(): Promise<void> {
    this.state = 'closed';
    clearInterval(this.heartbeat);
    clearTimeout(this.reconnectTimer);
    await this.queue;
    const client = this.client;
    this.client = undefined;
    if (client && this.opts.ack) {
      // A process that stops no longer counts towards "n/n synced".
      await client
        .query('DELETE FROM cache_acks WHERE instance = $1', [this.opts.ack.instance])
        .catch(() => undefined);
    }
    await client?.end().catch(() => undefined);
  }

  /** Writes this process's applied version to cache_acks (no-op without the ack option). */
  private async writeAck(client: pg.Client, force: boolean): Promise<void> {
    const ack = this.opts.ack;
    if (!ack || (!force && this.ackedVersion === this.appliedVersion)) return;
    const version = this.appliedVersion;
    await client.query(
      `INSERT INTO cache_acks (instance, component, version, updated_at) VALUES ($1, $2, $3, now())
       ON CONFLICT (instance) DO UPDATE SET component = EXCLUDED.component, version = EXCLUDED.version, updated_at = now()`,
      [ack.instance, ack.component, version],
    );
    this.ackedVersion = version;
  }

  private async connect(catchUp: boolean): Promise<void> {
    if (this.state === 'closed') return;
    this.state = 'connecting';
    const client = new pg.Client({
      connectionString: this.opts.url,
      application_name: `proxyfleet-${this.opts.component}-listen`,
      keepAlive: true,
      connectionTimeoutMillis: 5_000,
      // A heartbeat on a dead connection must fail, not hang with `connected` still true.
      query_timeout: QUERY_TIMEOUT_MS,
      types: PG_TYPES,
    });
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client, new Error('connection ended')));
    client.on('notification', (msg) => {
      this.lastHeard = Date.now();
      if (msg.channel !== CHANGES_CHANNEL || !msg.payload) return;
      const id = Number(msg.payload);
      if (Number.isSafeInteger(id)) this.enqueue(id);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANGES_CHANNEL}`);
      this.client = client;
      if (catchUp) {
        const since = Math.max(0, this.appliedVersion - this.opts.catchUpOverlap);
        const { rows } = await client.query<Row>(
          'SELECT id, kind, account_id, subject FROM change_log WHERE id > $1 ORDER BY id',
          [since],
        );
        this.deliver(rows.filter((r) => !this.appliedIds.has(Number(r.id))).map(toChange));
      } else {
        this.appliedVersion = Math.max(this.appliedVersion, await changeLogHead(client));
      }
      this.lastHeard = Date.now();
      this.failures = 0;
      this.state = 'connected';
      this.startHeartbeat(client);
      await this.writeAck(client, true);
      this.opts.logger.info({ version: this.appliedVersion, catchUp }, 'change feed listening');
    } catch (err) {
      if (!catchUp) {
        this.state = 'idle';
        await client.end().catch(() => undefined);
        throw err;
      }
      this.lost(client, err as Error);
    }
  }

  private startHeartbeat(client: pg.Client): void {
    clearInterval(this.heartbeat);
    // One heartbeat at a time: on a slow server they would pile up on the connection (each with its
    // cache_acks write) instead of finding it slow (the query timeout ends a dead one).
    let beating = false;
    this.heartbeat = setInterval(() => {
      if (beating) return;
      beating = true;
      client
        .query('SELECT 1')
        .then(() => {
          this.lastHeard = Date.now();
          return this.writeAck(client, true);
        })
        .catch((err: Error) => this.lost(client, err))
        .finally(() => (beating = false));
    }, this.opts.heartbeatMs);
    this.heartbeat.unref();
  }

  /** Called for any sign of a dead connection; only the first call for a client reconnects. */
  private lost(client: pg.Client, err: Error): void {
    if (this.state === 'closed' || (this.client !== client && this.state !== 'connecting')) return;
    if (this.client === client) this.client = undefined;
    clearInterval(this.heartbeat);
    client.removeAllListeners('notification');
    client.end().catch(() => undefined);
    this.state = 'idle';
    this.failures += 1;
    const delay = reconnectDelayMs(this.failures, this.opts.maxBackoffMs);
    this.opts.logger.warn({ err: err.message, retryMs: delay }, 'change feed lost its connection');
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => void this.connect(true), delay);
    this.reconnectTimer.unref();
  }

  private pendingIds: number[] = [];

  private enqueue(id: number): void {
    this.pendingIds.push(id);
    if (this.pendingIds.length > 1) return;
    // Batch the notifications that arrive together (one commit can carry many).
    this.queue = this.queue.then(async () => {
      await new Promise((r) => setImmediate(r));
      const ids = this.pendingIds;
      this.pendingIds = [];
      const client = this.client;
      if (!client) return; // the catch-up after reconnect will read them
      try {
        const { rows } = await client.query<Row>(
          'SELECT id, kind, account_id, subject FROM change_log WHERE id = ANY($1::bigint[]) ORDER BY id',
          [ids],
        );
        await this.apply(rows.map(toChange));
      } catch (err) {
        this.lost(client, err as Error);
      }
    });
  }

  private deliver(changes: Change[]): void {
    const client = this.client;
    this.queue = this.queue.then(() =>
      this.apply(changes).catch((err: Error) => {
        if (client) this.lost(client, err);
      }),
    );
  }

  /**
   * Runs every handler on the batch. If one fails (its refresh query timed out, say), the version
   * does not advance and the caller drops the connection: the catch-up after the reconnect
   * replays the batch, so a change is never reported applied before every cache has it.
   */
  private async apply(changes: Change[]): Promise<void> {
    if (changes.length === 0) return;
    await this.runHandlers(changes, (err) =>
      this.opts.logger.error({ err }, 'change handler failed; the batch will be replayed'),
    );
    for (const c of changes) {
      this.appliedVersion = Math.max(this.appliedVersion, c.id);
      this.appliedIds.add(c.id);
    }
    pruneApplied(this.appliedIds, this.appliedVersion, this.opts.catchUpOverlap);
    const client = this.client;
    if (client && !this.opts.ack?.batched)
      await this.writeAck(client, false).catch((err: Error) => this.lost(client, err));
  }
}

interface Row {
  id: number;
  kind: ChangeKind;
  account_id: string;
  subject: string | null;
}

function toChange(row: Row): Change {
  return { id: row.id, kind: row.kind, accountId: row.account_id, subject: row.subject };
}
