// One simulated gateway pod of the database load generator (loadtest/db-load.ts): everything a
// gateway asks PostgreSQL, through the gateway's own classes and therefore its own SQL, with the
// traffic replaced by a byte rate per budget:
//   - lease draws (LeaseClient: lease_acquire) at the measured rate per (customer, pod);
//   - usage flushes every FLUSH_MS (UsageFlusher: usage_record), one line per budget, the spends of
//     its leases and the leases it returns: the batch shape the fleet measured;
//   - heartbeats every HEARTBEAT_MS (GatewayHeartbeat: gateway_register, gateway_heartbeat_v2);
//   - the change feed's LISTEN session, its heartbeat and cache_acks row (ChangeFeed), and the
//     credential cache's load and refresh on each change (CredentialCache); or, with relays, the
//     relay's stream (RelayFeed: the start's snapshot and the changes' rows, docs/adr/0105).
import { ChangeFeed, type ChangeSource } from '#common/db/changes.ts';
import { RelayFeed } from '#common/db/relay-feed.ts';
import { createPool, type Pool } from '#common/db/pool.ts';
import type { Logger } from '#common/logger.ts';
import { CredentialCache } from '../../gateway/src/auth/cache.ts';
import { GatewayHeartbeat, HEARTBEAT_MS } from '../../gateway/src/accounting/heartbeat.ts';
import { LeaseClient } from '../../gateway/src/accounting/lease-client.ts';
import { FLUSH_MS } from '../../gateway/src/accounting/ledger.ts';
import { UsageFlusher } from '../../gateway/src/accounting/flusher.ts';
import { MAX_LEASE_BYTES, MIN_LEASE_BYTES } from '../../gateway/src/accounting/policy.ts';
import type { GatewayMetrics } from '../../gateway/src/metrics.ts';
import type { Calls } from './measure.ts';

export interface PodCalls {
  leaseDraw: Calls;
  /** The draws of the customer whose traffic reaches every pod (one balance row for all). */
  hotLeaseDraw: Calls;
  flush: Calls;
  heartbeat: Calls;
  /** The credential cache's refresh query after a change notification. */
  refresh: Calls;
}

export interface PodEnv {
  pooledUrl: string;
  sessionUrl: string;
  logger: Logger;
  metrics: GatewayMetrics;
  calls: PodCalls;
  hot: string;
  regulars: string[];
  /** Budgets per pod besides the hot customer's. */
  regularsPerPod: number;
  /** Bytes per second per budget. */
  rate: number;
  /** Lease draws per second per budget. */
  leaseRate: number;
  /** The customers' proxy usernames, by account id (what the credential cache is keyed by). */
  usernames: ReadonlyMap<string, string>;
  /**
   * Called when this pod applied any change of an account, a snapshot's included (`now`:
   * performance.now()); `hash` gives the password SHA-256 (hex) its cache now holds.
   */
  onApplied(pod: string, accountId: string, now: number, hash: () => string | undefined): void;
  /** Connections of each pod's pool (PROXYFLEET_DB_POOL_SIZE). */
  poolSize: number;
  /** The change relays' URLs: set, pods take their changes from them instead of a LISTEN each. */
  relayUrls?: string[];
}

interface Lease {
  id: string;
  granted: number;
  spent: number;
  flushed: number;
}

interface Budget {
  accountId: string;
  hot: boolean;
  leases: Lease[];
}

/** Bytes per request, for the requests count of a line. */
const REQUEST_BYTES = 64 * 1024;

export class SimPod {
  readonly gatewayId: string;
  private readonly env: PodEnv;
  private readonly pool: Pool;
  private readonly leases: LeaseClient;
  private readonly flusher: UsageFlusher;
  private readonly cache: CredentialCache;
  private readonly feed: ChangeSource;
  private readonly budgets: Budget[];
  private heartbeat: GatewayHeartbeat | undefined;
  private readonly timers: NodeJS.Timeout[] = [];
  private lastFlush = Date.now();
  private flushing = false;
  private stopped = false;
  /**
   * While other pods start, this one sends nothing of its traffic (draws, flushes, heartbeats; its
   * LISTEN session stays): the steps are measured in steady state, not during a mass start.
   */
  paused = true;

  private constructor(index: number, env: PodEnv) {
    this.env = env;
    this.gatewayId = `sim-${index}`;
    this.pool = createPool({
      url: env.pooledUrl,
      max: env.poolSize,
      applicationName: 'proxyfleet-gateway',
      logger: env.logger,
      pooling: 'transaction',
    });
    this.leases = new LeaseClient(this.pool, this.gatewayId);
    this.flusher = new UsageFlusher({
      pool: this.pool,
      gatewayId: this.gatewayId,
      plan: 'basic',
      logger: env.logger,
      metrics: env.metrics,
    });
    this.cache = new CredentialCache(this.pool);
    const ack = { instance: this.gatewayId, component: 'gateway', batched: true } as const;
    const relays = env.relayUrls;
    // Pods spread over the relays, each trying the others next (as the Service would).
    this.feed = relays?.length
      ? new RelayFeed({
          urls: relays.map((_, i) => relays[(index + i) % relays.length]!),
          logger: env.logger,
          component: 'gateway',
          ack,
          startTimeoutMs: 600_000,
        })
      : new ChangeFeed({ url: env.sessionUrl, logger: env.logger, component: 'gateway', ack });
    const customers = [
      { accountId: env.hot, hot: true },
      ...Array.from({ length: env.regularsPerPod }, (_, j) => ({
        accountId: env.regulars[(index * env.regularsPerPod + j) % env.regulars.length]!,
        hot: false,
      })),
    ];
    this.budgets = customers.map((c) => ({ ...c, leases: [] }));
  }

  /** A pod starting as a gateway does: LISTEN, load the credentials, register, then serve. */
  static async start(index: number, env: PodEnv): Promise<SimPod> {
    const pod = new SimPod(index, env);
    const { calls } = env;
    pod.feed.onChanges(async (changes) => {
      await calls.refresh.time(() => pod.cache.apply(changes));
      const now = performance.now();
      for (const accountId of new Set(changes.map((c) => c.accountId))) {
        const username = env.usernames.get(accountId);
        if (username)
          env.onApplied(pod.gatewayId, accountId, now, () =>
            pod.cache.get(username)?.passwordSha256.toString('hex'),
          );
      }
    });
    await pod.feed.start();
    if (!pod.feed.snapshots) await pod.cache.loadAll();
    // Beats driven here (timed) rather than by the class's own timer.
    pod.heartbeat = await GatewayHeartbeat.start({
      pool: pod.pool,
      gatewayId: pod.gatewayId,
      plan: 'basic',
      logger: env.logger,
      intervalMs: 2 ** 30,
    });
    // Each timer starts at a random phase: pods do not flush in step.
    const every = (ms: number, fn: () => void) => {
      pod.timers.push(
        setTimeout(() => {
          fn();
          pod.timers.push(setInterval(fn, ms));
        }, Math.random() * ms),
      );
    };
    every(FLUSH_MS, () => void pod.flush());
    // The first draws spread over the first flush interval, as a pod's first customers arrive.
    for (const b of pod.budgets) pod.later(Math.random() * FLUSH_MS, () => pod.draw(b));
    every(HEARTBEAT_MS, () => {
      if (!pod.paused) void calls.heartbeat.time(() => pod.heartbeat!.beat());
    });
    return pod;
  }

  private later(ms: number, fn: () => Promise<void>): void {
    const timer = setTimeout(() => {
      this.timers.splice(this.timers.indexOf(timer), 1);
      if (!this.stopped) void fn();
    }, ms);
    this.timers.push(timer);
  }

  /** Draws the budget's next lease, then schedules the one after (at the measured rate, jittered). */
  private async draw(b: Budget): Promise<void> {
    if (this.paused) {
      this.later(FLUSH_MS, () => this.draw(b));
      return;
    }
    // A lease covers the traffic until the next draw (the gateway sizes to ~10 s of rate and draws
    // the next at half; the fleet measured one draw per 20 s per customer and pod).
    const wanted = Math.min(
      MAX_LEASE_BYTES,
      Math.max(MIN_LEASE_BYTES, Math.round(this.env.rate / this.env.leaseRate)),
    );
    const calls = b.hot ? this.env.calls.hotLeaseDraw : this.env.calls.leaseDraw;
    const answer = await calls.time(
      () =>
        this.leases.acquire(
          { accountId: b.accountId, product: 'basic' },
          wanted,
          () => Date.now(),
          // As the gateway does: what was relayed on each open lease (docs/adr/0073).
          b.leases.map((l): [string, number] => [l.id, l.spent]),
        ),
      (a) => a.kind === 'failed',
    );
    if (answer.kind === 'granted')
      b.leases.push({ id: answer.id, granted: answer.granted, spent: 0, flushed: 0 });
    this.later(((0.5 + Math.random()) * 1000) / this.env.leaseRate, () => this.draw(b));
  }

  private async flush(): Promise<void> {
    if (this.paused) {
      this.lastFlush = Date.now();
      return;
    }
    if (this.flushing) return;
    this.flushing = true;
    try {
      // The traffic since the last flush, at the budget's rate: spent on its newest lease.
      const now = Date.now();
      const bytes = Math.round((this.env.rate * (now - this.lastFlush)) / 1000);
      this.lastFlush = now;
      this.flusher.begin();
      for (const b of this.budgets) {
        const up = Math.round(bytes * 0.05);
        this.flusher.addLine(
          b.accountId,
          'basic',
          up,
          bytes - up,
          Math.max(1, Math.round(bytes / REQUEST_BYTES)),
        );
        const newest = b.leases.at(-1);
        if (newest) newest.spent += bytes;
        for (const lease of b.leases) {
          if (lease.spent > lease.flushed) this.flusher.addSpend(lease.id, lease.spent - lease.flushed);
          lease.flushed = lease.spent;
        }
        // Every lease but the newest goes back, spent (the gateway's settleLeases).
        while (b.leases.length > 1) {
          const old = b.leases.shift()!;
          this.flusher.addRelease(old.id, old.spent);
        }
      }
      this.flusher.end();
      await this.env.calls.flush.time(
        () => this.flusher.send(),
        (ok) => ok === false,
      );
    } finally {
      this.flushing = false;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    await this.feed.close();
    await this.pool.end().catch(() => undefined);
  }
}
