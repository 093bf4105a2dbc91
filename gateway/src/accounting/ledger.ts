// Byte accounting for one gateway, and the one interface the proxy code reaches it through
// (docs/adr/0024): `admit` a request or tunnel of an account on a socket, and through the `Tab`
// (tab.ts) it returns count its head and chunks, name the streams to hold, mark its end, or undo
// it when it is refused. The ledger composes, and owns the clock of, its parts: the budget and
// lease core (budgets.ts), connection tracking (connections.ts), outage credit
// (outage-credit.ts), the lease client (lease-client.ts), the throttle (throttle.ts) and the
// usage flusher (flusher.ts); it ticks them, flushes usage and closes them. The arrows run from
// here to the parts; forward.ts and tunnel.ts never touch a budget or a counter themselves.
import type net from 'node:net';
import type { Logger } from '#common/logger.ts';
import type { Pool } from '#common/db/pool.ts';
import type { Plan } from '../spec.ts';
import type { GatewayMetrics, PlanMetrics } from '../metrics.ts';
import { Budgets } from './budgets.ts';
import { Connections } from './connections.ts';
import { UsageFlusher } from './flusher.ts';
import { settleLeases } from './lease-book.ts';
import { LeaseClient } from './lease-client.ts';
import type { Budget, Metered } from './meter.ts';
import { OutageCredit } from './outage-credit.ts';
import * as policy from './policy.ts';
import { Tab } from './tab.ts';
import type { HistoryTally } from './history.ts';
import type { TargetTally } from './targets.ts';
import { Throttle } from './throttle.ts';

export const TICK_MS = 250;
export const FLUSH_MS = 2_000;
/** A budget with no connections for this long returns its leases (so other pods can use them). */
const IDLE_RELEASE_MS = 5_000;

export interface LedgerOptions {
  pool: Pool;
  gatewayId: string;
  plan: Plan;
  logger: Logger;
  metrics: GatewayMetrics;
  hot: PlanMetrics;
  /** Called for a connection idle or older than the limits (tick-driven; no timer per socket). */
  idleMs: number;
  maxLifetimeMs: number;
  /**
   * How many gateways serve this plan now (the outage credit is shared among them: docs/adr/0024).
   * Default: 1.
   */
  fleetSize?: () => number;
  /** Milliseconds between usage flushes (PROXYFLEET_GATEWAY_FLUSH_SECONDS). Default: FLUSH_MS. */
  flushMs?: number;
  /** Target statistics, written after each usage batch in their own statement (docs/adr/0026). */
  targets?: TargetTally;
  /** Usage history with outcomes, written likewise (docs/adr/0103). */
  history?: HistoryTally;
  /**
   * The account's bandwidth cap on this plan for the whole fleet, bytes per second (0: none):
   * its override, else the plan's default (docs/adr/0035). Asked when a budget is created and on
   * every tick, so a change reaches live connections within a tick. Default: none.
   */
  throttle?: (accountId: string) => number;
  /** A sub-user's own bandwidth cap for the whole fleet, bytes per second (0: none). Default: none. */
  subUserThrottle?: (accountId: string, subUserId: string) => number;
}

/** A sub-user admitted on its account's behalf (docs/adr/0037). */
export interface SubUserAdmission {
  id: string;
  /** Its cap on concurrent connections across the fleet (null: the plan's per-account cap only). */
  maxConnections: number | null;
}

/**
 * A sub-user's connection cap on this gateway: its fleet-wide cap shared by the gateways of the
 * plan, rounded up (so the fleet together may admit up to fleetSize - 1 more than the cap; one
 * gateway never refuses a cap of at least 1).
 */
export function perPodConnections(maxConnections: number, fleetSize: number): number {
  return Math.ceil(maxConnections / Math.max(1, Math.floor(fleetSize) || 1));
}

/** Why an admission was refused (the proxy maps each to its refusal). */
export type AdmissionRefusal =
  | 'connection_limit'
  | 'no_bandwidth'
  | 'sub_user_limit'
  | 'bandwidth_held'
  | 'billing_unavailable'
  | 'client_gone';

export class Ledger {
  private readonly opts: LedgerOptions;
  private readonly fleetSize: () => number;
  private readonly connections: Connections;
  private readonly throttle: Throttle;
  private readonly budgets: Budgets;
  private readonly flusher: UsageFlusher;
  private tickTimer: NodeJS.Timeout | undefined;
  private flushTimer: NodeJS.Timeout | undefined;
  private lastTick = Date.now();
  private flushing: Promise<void> | undefined;

  constructor(opts: LedgerOptions) {
    this.opts = opts;
    this.fleetSize = opts.fleetSize ?? (() => 1);
    this.connections = new Connections(opts.hot, opts);
    this.throttle = new Throttle({
      metrics: opts.metrics,
      fleetSize: this.fleetSize,
      throttle: opts.throttle ?? (() => 0),
      subUserThrottle: opts.subUserThrottle ?? (() => 0),
    });
    this.budgets = new Budgets({
      plan: opts.plan,
      logger: opts.logger,
      metrics: opts.metrics,
      leases: new LeaseClient(opts.pool, opts.gatewayId),
      connections: this.connections,
      outage: new OutageCredit(this.fleetSize),
      throttle: this.throttle,
    });
    this.flusher = new UsageFlusher(opts);
  }

  start(): void {
    this.tickTimer = setInterval(() => this.tick(), TICK_MS);
    this.tickTimer.unref();
    this.flushTimer = setInterval(() => void this.flush(), this.opts.flushMs ?? FLUSH_MS);
    this.flushTimer.unref();
  }

  /**
   * Admits one request or tunnel of an authenticated account on `socket`: the account's
   * connection cap on this gateway, then bandwidth (asking the database for a lease if needed:
   * 402 only when it said none is left, 503 when it could not be asked and there is no outage
   * credit). The connection is attached to the account's budget only when admitted.
   *
   * A sub-user's request goes on the sub-user's budget (docs/adr/0037): the plan's cap counts all
   * of the account's connections on this gateway, the sub-user's own cap (its share of the fleet,
   * perPodConnections) the sub-user's; its denial by its own limit is 'sub_user_limit'.
   */
  async admit(
    accountId: string,
    socket: net.Socket,
    maxConnections: number,
    subUser?: SubUserAdmission,
  ): Promise<Tab | AdmissionRefusal> {
    const b = this.budgets.get(accountId, subUser?.id);
    let conn = this.connections.of(socket);
    const subCap =
      subUser?.maxConnections == null
        ? Infinity
        : perPodConnections(subUser.maxConnections, this.fleetSize());
    const overCap = () =>
      (b.group.connections() >= maxConnections && conn?.budget?.group !== b.group) ||
      (b.conns.size >= subCap && !(conn && b.conns.has(conn)));
    if (overCap()) return 'connection_limit';
    if (!policy.canAdmit(b.state)) {
      const verdict = await this.budgets.admit(b);
      if (verdict === 'denied') return b.state.subUserLimited ? 'sub_user_limit' : 'no_bandwidth';
      if (verdict === 'stranded') return 'bandwidth_held';
      if (verdict === 'unavailable') return 'billing_unavailable';
    }
    if (socket.destroyed) return 'client_gone';
    // Again after the wait for a lease: connections that arrived meanwhile were attached.
    if (overCap()) return 'connection_limit';
    if (!conn) conn = this.connections.track(socket);
    this.connections.attach(conn, b);
    conn.admitted();
    return new Tab(this, b, conn);
  }

  /** A request refused before admission on a connection that carried earlier ones: not billed. */
  refused(socket: net.Socket): void {
    const conn = this.connections.of(socket);
    if (conn) this.connections.detach(conn);
  }

  /** The estimate crossed the trigger (Tab.onChunk): cut, hold or draw (budgets.ts). */
  pressure(b: Budget): void {
    this.budgets.pressure(b);
  }

  /** Hot path of a throttled budget: a chunk moved (the throttle holds the budget when in debt). */
  throttled(b: Budget, bytes: number): void {
    this.throttle.take(b, bytes);
  }

  /** A connection of the budget starts relaying new streams: held while the budget is. */
  relaying(b: Budget): void {
    this.budgets.relaying(b);
  }

  /** Bills the connection up to its last completed request and leaves it with no owner. */
  detach(conn: Metered): void {
    this.connections.detach(conn);
  }

  /**
   * A purchase, or a sub-user's limit changed (change feed): forget a denial on every budget of
   * the account so the next admission asks again.
   */
  balanceChanged(accountId: string): void {
    this.budgets.balanceChanged(accountId);
  }

  /** Another gateway needs what this one's leases of the account hold: given back, then flushed. */
  giveBack(accountId: string): void {
    this.budgets.giveBack(accountId);
    void (this.flushing ?? Promise.resolve()).then(() => this.flush());
  }

  /** The account's or a sub-user's cap may have changed (change feed): live budgets follow at once. */
  throttleChanged(accountId: string): void {
    const g = this.budgets.group(accountId);
    if (g) this.throttle.apply(g, performance.now());
  }

  get plan(): Plan {
    return this.opts.plan;
  }

  /**
   * Ends every live connection of an account (suspended, or its credentials changed), its
   * sub-users' included, or those `which` picks (an IP allowlist entry removed): their bytes so far
   * are billed. Returns how many were cut.
   */
  revoke(accountId: string, which?: (socket: net.Socket) => boolean): number {
    const g = this.budgets.group(accountId);
    if (!g) return 0;
    let n = 0;
    for (const b of [...g.budgets])
      n += this.connections.end([...b.conns].filter((conn) => !which || which(conn.socket)));
    return n;
  }

  /**
   * Ends the live connections of one budget of the account, the others staying: its own
   * (`subUserId` undefined: its own credentials changed) or one sub-user's (suspended, deleted,
   * credentials changed).
   */
  revokeBudget(accountId: string, subUserId?: string): number {
    const b = this.budgets.find(accountId, subUserId);
    return b ? this.connections.end([...b.conns]) : 0;
  }

  /** Exact counts replace the estimates; idle and over-age connections are closed. */
  private tick(): void {
    const now = Date.now();
    this.connections.sweep(now);
    const elapsed = now - this.lastTick;
    this.lastTick = now;
    this.budgets.tick(elapsed, now);
  }

  /** Writes one usage batch (and lease releases); retries an unconfirmed batch with the same key. */
  flush(final = false): Promise<void> {
    this.flushing ??= this.doFlush(final).finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  /**
   * A flush that writes every byte settled before the call: flush() hands back a flush already in
   * flight (the timer's), whose batch was built before the last bytes settled and which releases no
   * lease; this waits for it, then runs its own.
   */
  async flushSettled(final = false): Promise<void> {
    while (this.flushing) await this.flushing;
    await this.flush(final);
  }

  private async doFlush(final: boolean): Promise<void> {
    this.tick();
    this.build(final);
    const sent = await this.flusher.send();
    if (sent !== undefined) this.budgets.databaseDown = !sent;
    // After billing, and not awaited: a slow or failing statistics write never delays the next batch.
    void this.opts.targets?.flush();
    void this.opts.history?.flush();
  }

  /** Moves the usage since the last flush, and the leases to return, into the flusher's batch. */
  private build(final: boolean): void {
    const now = Date.now();
    this.flusher.begin();
    for (const [key, b] of this.budgets.entries()) {
      if (b.bytesUp || b.bytesDown || b.requests) {
        // The account's line is its whole usage; a sub-user's is also its own line (docs/adr/0037).
        this.flusher.addLine(b.accountId, b.product, b.bytesUp, b.bytesDown, b.requests);
        if (b.subUserId !== undefined)
          this.flusher.addSubLine(b.accountId, b.subUserId, b.product, b.bytesUp, b.bytesDown, b.requests);
        b.bytesUp = b.bytesDown = b.requests = 0;
      }
      const idle = b.conns.size === 0 && now - b.lastActive > IDLE_RELEASE_MS;
      const { spends, releases } = settleLeases(b.state, now, final || idle);
      for (const [id, bytes] of spends) this.flusher.addSpend(id, bytes);
      for (const [id, spent] of releases) this.flusher.addRelease(id, spent);
      if ((idle || final) && b.conns.size === 0 && !b.pending) this.budgets.drop(key, b);
    }
    this.flusher.end();
  }

  get activeConnections(): number {
    return this.connections.size;
  }

  get degraded(): boolean {
    return this.budgets.databaseDown;
  }

  /** Stops the timers; bills and flushes everything, returning every lease (retrying a while). */
  async close(deadline: number): Promise<void> {
    clearInterval(this.tickTimer);
    clearInterval(this.flushTimer);
    this.connections.settleAll();
    while (true) {
      await this.flushSettled(true);
      if (this.flusher.unsent === 0 || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    await this.opts.targets?.drain();
    await this.opts.history?.drain();
    if (this.flusher.unsent)
      this.opts.logger.error({ batches: this.flusher.unsent }, 'usage left unflushed at shutdown');
  }
}
