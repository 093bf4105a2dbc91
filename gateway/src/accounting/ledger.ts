// Byte accounting for one gateway, and the one interface the proxy code reaches it through
// (docs/adr/0024): `admit` a request or tunnel of an account on a socket, and through the `Tab`
// (tab.ts) it returns count its head and chunks, name the streams to hold, mark its end, or undo
// it when it is refused. The ledger composes the pure budget policy (policy.ts), the meter
// (meter.ts), the lease client (lease-client.ts), the usage flusher (flusher.ts) and the throttle
// (throttle.ts); forward.ts and tunnel.ts never touch a budget or a counter themselves.
import type net from 'node:net';
import type { Logger } from '#common/logger.ts';
import type { Pool } from '#common/db/pool.ts';
import type { Plan } from '../spec.ts';
import type { GatewayMetrics, PlanMetrics } from '../metrics.ts';
import { UsageFlusher } from './flusher.ts';
import { LeaseClient } from './lease-client.ts';
import {
  Budget,
  BudgetGroup,
  budgetKey,
  HOLD_LEASE,
  Metered,
  perPodConnections,
  type AdmissionRefusal,
} from './meter.ts';
import { Tab } from './tab.ts';
import type { TargetTally } from './targets.ts';
import * as policy from './policy.ts';
import { Throttle } from './throttle.ts';

export const TICK_MS = 250;
export const FLUSH_MS = 2_000;
/** A budget with no connections for this long returns its leases (so other pods can use them). */
const IDLE_RELEASE_MS = 5_000;
/** How long the ledger remembers that it served an account (outage credit survives idle budgets). */
const SERVED_MEMORY_MS = 24 * 3600_000;
const SERVED_LIMIT = 200_000;

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
  /** How many gateways serve this plan now (they share the outage credit: docs/adr/0024). Default: 1. */
  fleetSize?: () => number;
  /** Milliseconds between usage flushes (PROXYFLEET_GATEWAY_FLUSH_SECONDS). Default: FLUSH_MS. */
  flushMs?: number;
  /** Target statistics, written after each usage batch in their own statement (docs/adr/0026). */
  targets?: TargetTally;
  /**
   * The account's bandwidth cap on this plan for the whole fleet, bytes per second (0: none): its
   * override, else the plan's default (docs/adr/0035). Asked at a budget's creation and every tick.
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

export class Ledger {
  /** Per account, and per sub-user as `account/sub-user` (budgetKey). */
  private readonly budgets = new Map<string, Budget>();
  /** The budgets of each account on this gateway (they share the overdraft, caps and the account's cap). */
  private readonly groups = new Map<string, BudgetGroup>();
  private readonly conns = new Set<Metered>();
  private readonly meters = new WeakMap<net.Socket, Metered>();
  private tickTimer: NodeJS.Timeout | undefined;
  private flushTimer: NodeJS.Timeout | undefined;
  private lastTick = Date.now();
  private flushing: Promise<void> | undefined;
  private databaseDown = false;
  /**
   * Accounts this ledger was granted leases for: when, and what the database then said was still
   * free. They keep outage credit after going idle; the free balance sizes it (docs/adr/0024).
   */
  private readonly served = new Map<string, { at: number; free: number; credited: number }>();
  private readonly opts: LedgerOptions;
  private readonly leases: LeaseClient;
  private readonly flusher: UsageFlusher;
  private readonly fleetSize: () => number;
  private readonly throttle: Throttle;

  constructor(opts: LedgerOptions) {
    this.opts = opts;
    this.leases = new LeaseClient(opts.pool, opts.gatewayId);
    this.flusher = new UsageFlusher(opts);
    this.fleetSize = opts.fleetSize ?? (() => 1);
    this.throttle = new Throttle({
      metrics: opts.metrics,
      fleetSize: this.fleetSize,
      throttle: opts.throttle ?? (() => 0),
      subUserThrottle: opts.subUserThrottle ?? (() => 0),
    });
  }

  start(): void {
    this.tickTimer = setInterval(() => this.tick(), TICK_MS);
    this.tickTimer.unref();
    this.flushTimer = setInterval(() => void this.flush(), this.opts.flushMs ?? FLUSH_MS);
    this.flushTimer.unref();
  }

  /** The budget of an account's own traffic, or of one of its sub-users (docs/adr/0037). */
  private budget(accountId: string, subUserId?: string): Budget {
    const key = budgetKey(accountId, subUserId);
    let b = this.budgets.get(key);
    if (!b) {
      let g = this.groups.get(accountId);
      if (!g) {
        g = new BudgetGroup(accountId);
        this.groups.set(accountId, g);
      }
      b = new Budget(accountId, this.opts.plan, g, subUserId);
      g.budgets.add(b);
      this.budgets.set(key, b);
      this.regroup(g);
      this.throttle.joined(b, performance.now());
    }
    return b;
  }

  /** The group's budgets share the overdraft only when there are several (policy.groupPressure). */
  private regroup(g: BudgetGroup): void {
    const grouped = g.budgets.size > 1;
    for (const b of g.budgets) {
      if (b.state.grouped === grouped) continue;
      b.state.grouped = grouped;
      policy.recompute(b.state);
    }
  }

  private dropBudget(key: string, b: Budget): void {
    this.budgets.delete(key);
    const g = b.group;
    g.budgets.delete(b);
    this.throttle.left(b);
    if (g.budgets.size === 0) {
      if (this.groups.get(g.accountId) === g) this.groups.delete(g.accountId);
    } else this.regroup(g);
  }

  /** Hot path of a throttled budget: a chunk moved (the throttle holds the budget when in debt). */
  throttled(b: Budget, bytes: number): void {
    this.throttle.take(b, bytes);
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
    const b = this.budget(accountId, subUser?.id);
    let conn = this.meters.get(socket);
    const subCap =
      subUser?.maxConnections == null
        ? Infinity
        : perPodConnections(subUser.maxConnections, this.fleetSize());
    const overCap = () =>
      (b.group.connections() >= maxConnections && conn?.budget?.group !== b.group) ||
      (b.conns.size >= subCap && !(conn && b.conns.has(conn)));
    if (overCap()) return 'connection_limit';
    if (!policy.canAdmit(b.state)) {
      const verdict = await this.admitBandwidth(b);
      if (verdict === 'denied') return b.state.subUserLimited ? 'sub_user_limit' : 'no_bandwidth';
      if (verdict === 'stranded') return 'bandwidth_held';
      if (verdict === 'unavailable') return 'billing_unavailable';
    }
    if (socket.destroyed) return 'client_gone';
    // Again after the wait for a lease: connections that arrived meanwhile were attached.
    if (overCap()) return 'connection_limit';
    if (!conn) conn = this.track(socket);
    this.attach(conn, b);
    conn.admitted();
    return new Tab(this, b, conn);
  }

  /** A request refused before admission on a connection that carried earlier ones: not billed. */
  refused(socket: net.Socket): void {
    const conn = this.meters.get(socket);
    if (conn) this.detach(conn);
  }

  private async admitBandwidth(b: Budget): Promise<ReturnType<typeof policy.verdict>> {
    const s = b.state;
    b.lastActive = Date.now();
    const step = policy.admission(s, Date.now());
    if (step !== 'ask') return policy.verdict(s);
    s.deniedAt = 0;
    const giveUp = Date.now() + policy.CONTENDED_WAIT_MS;
    while (true) {
      await this.draw(b);
      if (!policy.waitForContended(s, Date.now(), giveUp)) return policy.verdict(s);
      await new Promise((r) => setTimeout(r, policy.CONTENDED_POLL_MS));
      s.deniedAt = 0;
    }
  }

  /**
   * A purchase, or a sub-user's limit changed (change feed): forget a denial on every budget of
   * the account so the next admission asks again.
   */
  balanceChanged(accountId: string): void {
    const g = this.groups.get(accountId);
    if (g) for (const b of g.budgets) policy.balanceChanged(b.state);
  }

  /** Another gateway needs what this one's leases of the account hold (give-back.ts, policy.giveBack). */
  giveBack(accountId: string): void {
    for (const b of this.groups.get(accountId)?.budgets ?? []) {
      if (b.pending || b.state.deniedAt) continue;
      if (b.conns.size === 0) b.lastActive = 0;
      else this.leases.shrink(policy.giveBack(b.state));
    }
    void (this.flushing ?? Promise.resolve()).then(() => this.flush());
  }

  /** The account's or a sub-user's cap may have changed (change feed): live budgets follow at once. */
  throttleChanged(accountId: string): void {
    const g = this.groups.get(accountId);
    if (g) this.throttle.apply(g, performance.now());
  }

  /**
   * The estimate crossed the trigger: cut, hold or draw, as the policy says. A budget with others
   * of its account on this gateway is also judged by the overdraft they share while pending
   * (docs/adr/0037): the bound stays one OVERDRAFT_BYTES per account and gateway.
   */
  pressure(b: Budget): void {
    switch (policy.pressure(b.state)) {
      case 'cut':
        return this.cut(b);
      case 'hold':
        if (b.state.grouped) break;
        return b.hold(HOLD_LEASE);
      case 'draw':
      case 'redraw':
        void this.draw(b);
        return;
      case 'none':
        if (b.state.grouped && b.state.pending) break;
        return;
    }
    let overdraft = 0;
    for (const other of b.group.budgets) overdraft += policy.pendingOverdraft(other.state);
    switch (policy.groupPressure(overdraft)) {
      case 'cut':
        return this.cut(b);
      case 'hold':
        return b.hold(HOLD_LEASE);
      case 'none':
        return;
    }
  }

  /**
   * A connection of the budget starts relaying new streams (an answer begins): while the budget is
   * held they start held, before their first chunk (16 answers starting during a hold, one chunk
   * each, ran a budget past its overdraft: prefetch.int.test.ts).
   */
  relaying(b: Budget): void {
    const s = b.state;
    if (s.pending && s.estimate > s.trigger) b.hold(HOLD_LEASE);
    else if (b.holds !== 0) b.hold(0);
  }

  private draw(b: Budget): Promise<void> {
    const s = b.state;
    if (!b.pending) {
      const wanted = policy.leaseRequestSize(s, Date.now());
      policy.drawStarted(s);
      b.pending = this.requestLease(b, wanted).finally(() => {
        b.pending = undefined;
        if (policy.drawSettled(s) === 'cut') this.cut(b);
        b.release(HOLD_LEASE);
        if (s.estimate > s.trigger && b.conns.size) this.pressure(b);
      });
    }
    return b.pending;
  }

  private async requestLease(b: Budget, wanted: number): Promise<void> {
    const m = this.opts.metrics;
    const s = b.state;
    const answer = await this.leases.acquireOrWait(b, wanted, Date.now);
    const now = Date.now();
    if (answer.kind === 'denied') {
      this.databaseDown = false;
      policy.denied(s, answer.held, now, answer.stranded, answer.subUserLimited ?? false);
      const served = this.served.get(b.accountId);
      // A sub-user's limit says nothing about the account's balance.
      if (served && !answer.subUserLimited) served.free = 0;
      m.leaseDenials.inc({ plan: b.product });
      return;
    }
    if (answer.kind === 'granted') {
      this.databaseDown = false;
      policy.granted(s, answer, answer.held, now);
      // What a sub-user's limit leaves says nothing of the account's balance, which sizes the
      // outage credit of all its budgets: keep the balance last known.
      const free = answer.subUserLimited ? (this.served.get(b.accountId)?.free ?? answer.free) : answer.free;
      this.remember(b.accountId, free, now);
      m.leaseGrants.inc({ plan: b.product });
      m.leaseGrantedBytes.inc({ plan: b.product }, answer.granted);
      return;
    }
    this.databaseDown = true;
    // Database outage (docs/adr/0021, 0024): a customer this pod already served (even one whose
    // budget went idle and was dropped) keeps going on its share of the fleet's bounded credit;
    // unknown ones are answered 503 until the database is back (never 402: the balance is not known).
    const served = this.served.get(b.accountId);
    const known = s.everGranted || (served !== undefined && now - served.at < SERVED_MEMORY_MS);
    // The account's budgets on this gateway (its own and its sub-users', docs/adr/0037) share one
    // credit per outage: what one of them was given is not given again to another.
    // A sub-user its limit last denied gets none: the credit would run past the limit it reached.
    const shared = b.subUserId !== undefined || b.group.budgets.size > 1;
    const credit = s.subUserLimited
      ? 0
      : Math.max(
          0,
          policy.outageCredit(served?.free ?? 0, this.fleetSize()) - (shared ? (served?.credited ?? 0) : 0),
        );
    if (policy.failed(s, known, credit, now)) {
      if (served) served.credited += credit;
      this.opts.logger.warn(
        { err: answer.error.message, account: b.accountId, credit },
        'lease request failed; serving on outage credit',
      );
    } else {
      this.opts.logger.warn({ err: answer.error.message }, 'lease request failed');
    }
  }

  /** Cuts every connection of a budget that has run out. */
  private cut(b: Budget): void {
    this.opts.metrics.budgetCuts.inc({ plan: b.product });
    policy.cutOff(b.state);
    const { estimate, available, pending, deniedAt } = b.state;
    // Running out after a denial is the customer's bandwidth ending (info); a cut while the
    // grant is pending or unavailable is the gateway's own doing and worth a look (warn).
    this.opts.logger[deniedAt > 0 && !b.state.unavailable ? 'info' : 'warn'](
      {
        account: b.accountId,
        plan: b.product,
        connections: b.conns.size,
        estimate,
        available,
        pending,
        denied: deniedAt > 0,
      },
      'budget cut: connections closed past the leases',
    );
    for (const conn of [...b.conns]) {
      // A keep-alive connection between two requests carries no bytes of the budget: it stays
      // open, unowned, and its next request is admitted afresh (402, or served after a refill)
      // instead of the client meeting a closed connection (unexpected EOF).
      if (conn.between) this.release(conn);
      else {
        this.settle(conn);
        conn.socket.destroy();
        conn.peer?.destroy();
      }
    }
  }

  private remember(accountId: string, free: number, now: number): void {
    if (this.served.size >= SERVED_LIMIT && !this.served.has(accountId)) {
      const cutoff = now - SERVED_MEMORY_MS;
      for (const [id, entry] of this.served) if (entry.at < cutoff) this.served.delete(id);
      if (this.served.size >= SERVED_LIMIT) this.served.clear();
    }
    // A grant: the database is back, the next outage gives credit again.
    this.served.set(accountId, { at: now, free, credited: 0 });
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
    const g = this.groups.get(accountId);
    if (!g) return 0;
    let n = 0;
    for (const b of [...g.budgets]) n += this.end(b, which);
    return n;
  }

  /**
   * Ends the live connections of one budget of the account, the others staying: its own
   * (`subUserId` undefined: its own credentials changed) or one sub-user's (suspended, deleted,
   * credentials changed).
   */
  revokeBudget(accountId: string, subUserId?: string): number {
    const b = this.budgets.get(budgetKey(accountId, subUserId));
    return b ? this.end(b) : 0;
  }

  private end(b: Budget, which?: (socket: net.Socket) => boolean): number {
    const conns = [...b.conns].filter((conn) => !which || which(conn.socket));
    for (const conn of conns) {
      this.settle(conn);
      conn.socket.destroy();
      conn.peer?.destroy();
    }
    return conns.length;
  }

  /** Registers a customer connection for billing (once per socket). */
  private track(socket: net.Socket): Metered {
    const conn = new Metered(socket);
    this.conns.add(conn);
    this.meters.set(socket, conn);
    socket.once('close', () => this.untrack(conn));
    return conn;
  }

  /** Points a connection's future bytes at `b`, billing what came before to its previous owner. */
  private attach(conn: Metered, b: Budget): void {
    if (conn.budget === b) return;
    const previous = conn.budget;
    if (previous) {
      // Not detach(): the bytes after the last completed request are this admitted request's head
      // (and body so far), billed to `b` from here, not skipped as a refused request's are.
      this.collectToMark(conn);
      previous.conns.delete(conn);
    }
    conn.budget = b;
    b.conns.add(conn);
  }

  /**
   * Bills the connection's bytes up to the end of its last completed request and leaves it with
   * no owner: what follows (a refused request) is not billed.
   */
  detach(conn: Metered): void {
    this.release(conn);
    conn.answering = false;
    conn.billedIn = conn.wire.bytesRead;
    conn.billedOut = conn.wire.bytesWritten;
  }

  /** Bills the connection up to its last completed request; what follows waits for an owner. */
  private release(conn: Metered): void {
    const b = conn.budget;
    if (!b) return;
    this.collectToMark(conn);
    b.conns.delete(conn);
    conn.budget = undefined;
  }

  private untrack(conn: Metered): void {
    if (conn.closed) return;
    this.settle(conn);
    conn.closed = true;
    conn.budget?.conns.delete(conn);
    this.conns.delete(conn);
  }

  /** Bills the connection up to the end of its last completed request. */
  private collectToMark(conn: Metered): void {
    if (conn.budget) this.collect(conn, conn.markIn, Math.min(conn.markOut, conn.delivered()));
  }

  /** Bills everything delivered so far. */
  private settle(conn: Metered): void {
    if (conn.budget) this.collect(conn, conn.wire.bytesRead, conn.delivered());
  }

  private collect(conn: Metered, inNow: number, outNow: number): void {
    const b = conn.budget!;
    // The exact counts replace the connection's chunks in the estimate. A tick restarts the whole
    // estimate anyway; a connection that closes between two ticks would otherwise be counted
    // twice until the next one, and the budget's other connections cut for it (hold.int.test.ts).
    b.state.estimate = Math.max(0, b.state.estimate - conn.estimated);
    conn.estimated = 0;
    const up = Math.max(0, inNow - conn.billedIn);
    const down = Math.max(0, outNow - conn.billedOut);
    if (up === 0 && down === 0) return;
    conn.billedIn += up;
    conn.billedOut += down;
    b.bytesUp += up;
    b.bytesDown += down;
    policy.allocate(b.state, up + down);
    if (up) this.opts.hot.bytesUp.inc(up);
    if (down) this.opts.hot.bytesDown.inc(down);
  }

  /** Exact counts replace the estimates; idle and over-age connections are closed. */
  private tick(): void {
    const now = Date.now();
    for (const conn of this.conns) {
      // A request between its admission and its answer may still be refused (not billed), and the
      // next request's head has no owner before its admission: their bytes wait (estimated).
      if (conn.between) this.collectToMark(conn);
      else if (!conn.answering) this.settle(conn);
      if (conn.moved()) conn.lastActive = now;
      else if (now - conn.lastActive > this.opts.idleMs) conn.socket.destroy();
      if (now - conn.startedAt > this.opts.maxLifetimeMs) conn.socket.destroy();
    }
    const elapsed = now - this.lastTick;
    this.lastTick = now;
    const clock = performance.now();
    for (const g of this.groups.values()) this.throttle.apply(g, clock);
    for (const b of this.budgets.values()) {
      if (b.conns.size) b.lastActive = now;
      const draw = policy.tick(b.state, elapsed, now, b.conns.size > 0);
      for (const conn of b.conns) if (conn.answering) b.state.estimate += conn.estimated;
      if (draw) void this.draw(b);
    }
  }

  /** Writes one usage batch (and lease releases); retries an unconfirmed batch with the same key. */
  flush(final = false): Promise<void> {
    this.flushing ??= this.doFlush(final).finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  private async doFlush(final: boolean): Promise<void> {
    this.tick();
    this.build(final);
    const sent = await this.flusher.send();
    if (sent !== undefined) this.databaseDown = !sent;
    // After billing, and not awaited: a slow or failing statistics write never delays the next batch.
    void this.opts.targets?.flush();
  }

  /** Moves the usage since the last flush, and the leases to return, into the flusher's batch. */
  private build(final: boolean): void {
    const now = Date.now();
    this.flusher.begin();
    for (const [key, b] of this.budgets) {
      if (b.bytesUp || b.bytesDown || b.requests) {
        // The account's line is its whole usage; a sub-user's is also its own line (docs/adr/0037).
        this.flusher.addLine(b.accountId, b.product, b.bytesUp, b.bytesDown, b.requests);
        if (b.subUserId !== undefined)
          this.flusher.addSubLine(b.accountId, b.subUserId, b.product, b.bytesUp, b.bytesDown, b.requests);
        b.bytesUp = b.bytesDown = b.requests = 0;
      }
      const idle = b.conns.size === 0 && now - b.lastActive > IDLE_RELEASE_MS;
      const { spends, releases } = policy.settleLeases(b.state, now, final || idle);
      for (const [id, bytes] of spends) this.flusher.addSpend(id, bytes);
      for (const [id, spent] of releases) this.flusher.addRelease(id, spent);
      if ((idle || final) && b.conns.size === 0 && !b.pending) this.dropBudget(key, b);
    }
    this.flusher.end();
  }

  get activeConnections(): number {
    return this.conns.size;
  }

  get degraded(): boolean {
    return this.databaseDown;
  }

  /** Stops the timers; bills and flushes everything, returning every lease (retrying a while). */
  async close(deadline: number): Promise<void> {
    clearInterval(this.tickTimer);
    clearInterval(this.flushTimer);
    for (const conn of this.conns) this.settle(conn);
    // flush() hands back a flush already in flight, whose batch was built before the last bytes
    // settled and which releases no lease: wait for it, then run the final one ourselves.
    while (true) {
      while (this.flushing) await this.flushing;
      await this.flush(true);
      if (this.flusher.unsent === 0 || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    await this.opts.targets?.drain();
    if (this.flusher.unsent)
      this.opts.logger.error({ batches: this.flusher.unsent }, 'usage left unflushed at shutdown');
  }
}
