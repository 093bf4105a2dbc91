// Byte accounting for one gateway: per (account, product) budgets backed by bandwidth leases,
// per connection byte counters read from the sockets themselves, and the flusher that writes
// insert-only usage batches (migrations/0020, docs/adr/0020).
//
// Billing is exact and comes from the customer socket's own counters: bytesRead, and
// bytesWritten - writableLength (bytes delivered to the kernel, not merely queued). Enforcement
// needs to act between counter reads, so the proxy also adds every relayed chunk to the budget's
// `estimate` (a plain 'data' listener: no stream in the data path); when the estimate crosses the
// budget's `trigger` the ledger asks for another lease or cuts the budget's connections. Every
// tick replaces the estimates with the exact counts.
import { randomBytes } from 'node:crypto';
import type net from 'node:net';
import type { Readable } from 'node:stream';
import type { Logger } from '../../../common/src/logger.ts';
import type { Pool } from '../../../common/src/db/pool.ts';
import type { Plan } from '../spec.ts';
import type { GatewayMetrics, PlanMetrics } from '../metrics.ts';

/** Smallest lease asked for (the database grants less only when less is left). */
export const MIN_LEASE_BYTES = 256 * 1024;
export const MAX_LEASE_BYTES = 256 * 1024 * 1024;
export const INITIAL_LEASE_BYTES = 4 * 1024 * 1024;
/** A lease is sized to last about this long at the budget's recent rate. */
const LEASE_TARGET_SECONDS = 10;
export const LEASE_TTL_SECONDS = 300;
/** Leases are returned this long before they expire, and replaced. */
const LEASE_RENEW_MARGIN_MS = 30_000;
/** How far a budget may run past its leases while the next grant is on its way (then: cut). */
export const OVERDRAFT_BYTES = 256 * 1024;
/** Past this much overdraft the budget's streams are paused until the grant arrives. */
const HOLD_AT_BYTES = OVERDRAFT_BYTES / 2;
/**
 * What one open connection can add beyond that (docs/adr/0020): the chunk that crosses the limit
 * in each direction (a socket read is at most 64 KiB), what sits queued in its write buffer when
 * a tick replaces estimates with delivered counts (16 KiB high-water mark plus one chunk), and
 * one header block (16 KiB, Node's maxHeaderSize).
 */
export const PER_CONNECTION_SLACK_BYTES = 2 * 64 * 1024 + (16 + 64) * 1024 + 16 * 1024;
/** After "nothing free", admissions are refused without asking again for this long (or until a purchase). */
const DENIAL_RECHECK_MS = 2_000;
/** A budget with no connections for this long returns its leases (so other pods can use them). */
const IDLE_RELEASE_MS = 5_000;
/**
 * When nothing is free but other gateways hold leases, an admission waits this long for them to
 * come back (idle pods return theirs after IDLE_RELEASE_MS) before answering 402.
 */
const CONTENDED_WAIT_MS = 2_000;
const CONTENDED_POLL_MS = 200;
/** During a database outage a known customer may spend at most this much on credit, per budget. */
export const OUTAGE_CREDIT_BYTES = 64 * 1024 * 1024;
export const TICK_MS = 250;
/** A lease spent faster than this makes the next request four times larger. */
const FAST_SPEND_MS = 2_000;
export const FLUSH_MS = 2_000;
/**
 * A lease request that has not answered in this long counts as a database failure (a query on a
 * connection that hangs would otherwise leave the customer with no answer at all).
 */
export const LEASE_QUERY_TIMEOUT_MS = 3_000;
/** How long the ledger remembers that it served an account (outage credit survives idle budgets). */
const SERVED_MEMORY_MS = 24 * 3600_000;
const SERVED_LIMIT = 200_000;

interface LocalLease {
  /** null: outage credit, not backed by a database lease. */
  id: string | null;
  granted: number;
  spent: number;
  flushed: number;
  expiresAt: number;
}

/** A customer connection whose bytes are billed. */
export class Metered {
  readonly socket: net.Socket;
  budget: Budget | undefined;
  /** The other side (upstream) to destroy with it when the budget is cut. */
  peer: net.Socket | undefined;
  /** The streams whose data is relayed to the customer or from them: paused while a grant is pending. */
  sources: Readable[] = [];
  kind: 'http' | 'tunnel' = 'http';
  billedIn = 0;
  billedOut = 0;
  /** Counters at the end of the last completed request (bytes after it belong to the next one). */
  markIn = 0;
  markOut = 0;
  readonly startedAt = Date.now();
  lastActive = Date.now();
  private seenIn = 0;
  private seenOut = 0;
  closed = false;

  constructor(socket: net.Socket) {
    this.socket = socket;
  }

  /** Delivered bytes: written to the kernel, not merely queued (gateway.md, byte counting). */
  delivered(): number {
    return this.socket.bytesWritten - this.socket.writableLength;
  }

  /** Marks the end of a request on a keep-alive connection. */
  mark(): void {
    this.markIn = this.socket.bytesRead;
    this.markOut = this.socket.bytesWritten;
  }

  /** True when bytes moved since the last call. */
  moved(): boolean {
    const inNow = this.socket.bytesRead;
    const outNow = this.socket.bytesWritten;
    const moved = inNow !== this.seenIn || outNow !== this.seenOut;
    this.seenIn = inNow;
    this.seenOut = outNow;
    return moved;
  }
}

export class Budget {
  readonly accountId: string;
  readonly product: Plan;
  readonly conns = new Set<Metered>();
  leases: LocalLease[] = [];
  /** Σ unspent granted bytes of the leases, as of the last allocation. */
  available = 0;
  /** Bytes relayed since the last tick, from the data listeners. */
  estimate = 0;
  /** When estimate passes this, the ledger acts (asks for a lease, or cuts). */
  trigger = 0;
  pending: Promise<void> | undefined;
  deniedAt = 0;
  creditUsed = false;
  everGranted = false;
  /** The last lease request failed (database unreachable): refuse with 503, never 402. */
  unavailable = false;
  /** The last denial came while other gateways held leases (they may come back). */
  contended = false;
  lastGrantAt = 0;
  /** Streams paused while a grant is on its way. */
  readonly held = new Set<Readable>();
  wanted = INITIAL_LEASE_BYTES;
  lastActive = Date.now();
  bytesUp = 0;
  bytesDown = 0;
  requests = 0;
  private rateBytes = 0;

  constructor(accountId: string, product: Plan) {
    this.accountId = accountId;
    this.product = product;
  }

  /** Whether a new connection or request may start now without waiting for the database. */
  canAdmit(): boolean {
    return this.available - this.estimate > 0;
  }

  /** Hot path: a relayed chunk. */
  spend(ledger: Ledger, n: number): void {
    this.estimate += n;
    if (this.estimate > this.trigger) ledger.pressure(this);
  }

  allocate(n: number): void {
    this.rateBytes += n;
    let left = n;
    for (const lease of this.leases) {
      if (left === 0) break;
      const room = lease.granted - lease.spent;
      if (room <= 0) continue;
      const take = Math.min(room, left);
      lease.spent += take;
      left -= take;
    }
    // Past every lease (overdraft, or no lease left): charged to the last lease so the database
    // folds it as used; bytes with no lease at all are still billed through the usage lines.
    const last = this.leases.at(-1);
    if (left > 0 && last) last.spent += left;
    this.recompute();
  }

  recompute(): void {
    let available = 0;
    for (const lease of this.leases) available += Math.max(0, lease.granted - lease.spent);
    this.available = available;
    if (this.deniedAt) this.trigger = available;
    else if (this.pending) this.trigger = available + HOLD_AT_BYTES;
    else this.trigger = Math.floor(available / 2);
  }

  /** Adapts the next lease size to about LEASE_TARGET_SECONDS of the recent rate. */
  observeRate(elapsedMs: number): void {
    if (elapsedMs <= 0) return;
    const perSecond = (this.rateBytes * 1000) / elapsedMs;
    this.rateBytes = 0;
    const target = Math.min(MAX_LEASE_BYTES, Math.max(MIN_LEASE_BYTES, perSecond * LEASE_TARGET_SECONDS));
    // Grow at once, shrink slowly.
    this.wanted = Math.round(target > this.wanted ? target : this.wanted * 0.9 + target * 0.1);
  }
}

interface Batch {
  key: string;
  attempted: boolean;
  lines: Map<
    string,
    { account_id: string; product: Plan; bytes_up: number; bytes_down: number; requests: number }
  >;
  spends: Map<string, number>;
  releases: Map<string, number>;
  createdAt: number;
}

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
}

export class Ledger {
  private readonly budgets = new Map<string, Budget>();
  private readonly conns = new Set<Metered>();
  private readonly queue: Batch[] = [];
  private readonly bootId = randomBytes(6).toString('hex');
  private seq = 0;
  private tickTimer: NodeJS.Timeout | undefined;
  private flushTimer: NodeJS.Timeout | undefined;
  private lastTick = Date.now();
  private flushing: Promise<void> | undefined;
  private databaseDown = false;
  /** Accounts this ledger was granted leases for, and when: they keep outage credit after going idle. */
  private readonly served = new Map<string, number>();
  private readonly opts: LedgerOptions;

  constructor(opts: LedgerOptions) {
    this.opts = opts;
  }

  start(): void {
    this.tickTimer = setInterval(() => this.tick(), TICK_MS);
    this.tickTimer.unref();
    this.flushTimer = setInterval(() => void this.flush(), FLUSH_MS);
    this.flushTimer.unref();
  }

  budget(accountId: string): Budget {
    let b = this.budgets.get(accountId);
    if (!b) {
      b = new Budget(accountId, this.opts.plan);
      this.budgets.set(accountId, b);
    }
    return b;
  }

  /** A purchase (change feed): forget a denial so the next admission asks again. */
  balanceChanged(accountId: string): void {
    const b = this.budgets.get(accountId);
    if (b && b.deniedAt) {
      b.deniedAt = 0;
      b.recompute();
    }
  }

  /**
   * Resolves 'ok' when the budget has bytes for one more connection or request (asking the
   * database for a lease if needed); 'denied' only when the database said none is left (402);
   * 'unavailable' when the database could not be asked and there is no outage credit (503).
   */
  async admit(b: Budget): Promise<'ok' | 'denied' | 'unavailable'> {
    b.lastActive = Date.now();
    if (b.canAdmit()) return 'ok';
    const verdict = () => (b.canAdmit() ? 'ok' : b.unavailable ? 'unavailable' : 'denied');
    if (b.deniedAt && Date.now() - b.deniedAt < DENIAL_RECHECK_MS) return verdict();
    b.deniedAt = 0;
    const giveUp = Date.now() + CONTENDED_WAIT_MS;
    while (true) {
      await this.acquire(b);
      if (b.canAdmit() || !b.contended || Date.now() > giveUp) return verdict();
      await new Promise((r) => setTimeout(r, CONTENDED_POLL_MS));
      b.deniedAt = 0;
    }
  }

  /**
   * The estimate crossed the trigger. After a denial, past what the leases hold: cut. While a
   * grant is on its way: past half the overdraft, hold the budget's streams (back-pressure) until
   * it arrives; past the whole overdraft, cut anyway (pipe() resumes a source on every 'drain'
   * of its destination, so holding alone is no hard bound). Otherwise ask for the next lease.
   */
  pressure(b: Budget): void {
    if (b.deniedAt ? b.estimate > b.available : b.estimate > b.available + OVERDRAFT_BYTES) {
      this.cut(b);
      return;
    }
    if (b.pending && b.estimate > b.available + HOLD_AT_BYTES) {
      this.hold(b);
      return;
    }
    if (!b.pending && !b.deniedAt) void this.acquire(b);
  }

  private hold(b: Budget): void {
    for (const conn of b.conns) {
      for (const stream of conn.sources) {
        if (!stream.isPaused()) {
          stream.pause();
          b.held.add(stream);
        }
      }
    }
  }

  private release(b: Budget): void {
    for (const stream of b.held) if (!stream.destroyed) stream.resume();
    b.held.clear();
  }

  private acquire(b: Budget): Promise<void> {
    // A lease spent within a couple of seconds was too small: ask for more at once rather than
    // waiting for the rate estimate of the next tick.
    if (b.lastGrantAt && Date.now() - b.lastGrantAt < FAST_SPEND_MS)
      b.wanted = Math.min(MAX_LEASE_BYTES, b.wanted * 4);
    b.pending ??= this.requestLease(b).finally(() => {
      b.pending = undefined;
      b.recompute();
      if (b.deniedAt && b.estimate > b.available) this.cut(b);
      this.release(b);
      if (b.estimate > b.trigger && b.conns.size) this.pressure(b);
    });
    b.recompute();
    return b.pending;
  }

  private async requestLease(b: Budget): Promise<void> {
    const m = this.opts.metrics;
    let timer: NodeJS.Timeout | undefined;
    try {
      const { rows } = await Promise.race([
        this.opts.pool.query<{
          out_lease_id: string | null;
          out_granted: number;
          out_expires_at: Date | null;
          out_held: number;
        }>('SELECT * FROM lease_acquire($1, $2, $3, $4, $5, $6)', [
          b.accountId,
          b.product,
          this.opts.gatewayId,
          b.wanted,
          MIN_LEASE_BYTES,
          LEASE_TTL_SECONDS,
        ]),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`lease request timed out after ${LEASE_QUERY_TIMEOUT_MS} ms`)),
            LEASE_QUERY_TIMEOUT_MS,
          );
        }),
      ]);
      clearTimeout(timer);
      this.databaseDown = false;
      b.unavailable = false;
      const row = rows[0];
      b.contended = (row?.out_held ?? 0) > 0;
      if (!row || !row.out_lease_id || row.out_granted <= 0) {
        b.deniedAt = Date.now();
        m.leaseDenials.inc({ plan: b.product });
        return;
      }
      b.leases.push({
        id: row.out_lease_id,
        granted: row.out_granted,
        spent: 0,
        flushed: 0,
        expiresAt: row.out_expires_at?.getTime() ?? Date.now() + LEASE_TTL_SECONDS * 1000,
      });
      b.everGranted = true;
      b.creditUsed = false;
      this.remember(b.accountId);
      b.lastGrantAt = Date.now();
      m.leaseGrants.inc({ plan: b.product });
      m.leaseGrantedBytes.inc({ plan: b.product }, row.out_granted);
    } catch (err) {
      clearTimeout(timer);
      this.databaseDown = true;
      // Database outage (docs/adr/0021): a customer this pod already served (even one whose
      // budget went idle and was dropped) keeps going on one bounded credit per budget; unknown
      // ones are answered 503 until the database is back (never 402: the balance is not known).
      const servedAt = this.served.get(b.accountId);
      if (
        (b.everGranted || (servedAt !== undefined && Date.now() - servedAt < SERVED_MEMORY_MS)) &&
        !b.creditUsed
      ) {
        b.everGranted = true;
        b.unavailable = false;
        b.creditUsed = true;
        b.leases.push({
          id: null,
          granted: Math.min(b.wanted, OUTAGE_CREDIT_BYTES),
          spent: 0,
          flushed: 0,
          expiresAt: Number.MAX_SAFE_INTEGER,
        });
        this.opts.logger.warn(
          { err: (err as Error).message, account: b.accountId },
          'lease request failed; serving on outage credit',
        );
      } else {
        b.deniedAt = Date.now();
        b.unavailable = true;
        this.opts.logger.warn({ err: (err as Error).message }, 'lease request failed');
      }
    }
  }

  /** Cuts every connection of a budget that has run out. */
  cut(b: Budget): void {
    this.opts.metrics.budgetCuts.inc({ plan: b.product });
    for (const conn of [...b.conns]) {
      this.settle(conn);
      conn.socket.destroy();
      conn.peer?.destroy();
    }
  }

  private remember(accountId: string): void {
    if (this.served.size >= SERVED_LIMIT && !this.served.has(accountId)) {
      const cutoff = Date.now() - SERVED_MEMORY_MS;
      for (const [id, at] of this.served) if (at < cutoff) this.served.delete(id);
      if (this.served.size >= SERVED_LIMIT) this.served.clear();
    }
    this.served.set(accountId, Date.now());
  }

  get plan(): Plan {
    return this.opts.plan;
  }

  /**
   * Ends every live connection of an account (suspended, or its credentials changed): their
   * bytes so far are billed. Returns how many were cut.
   */
  revoke(accountId: string): number {
    const b = this.budgets.get(accountId);
    if (!b) return 0;
    const conns = [...b.conns];
    for (const conn of conns) {
      this.settle(conn);
      conn.socket.destroy();
      conn.peer?.destroy();
    }
    return conns.length;
  }

  /** Registers a customer connection for billing (once per socket). */
  track(socket: net.Socket): Metered {
    const conn = new Metered(socket);
    this.conns.add(conn);
    socket.once('close', () => this.untrack(conn));
    return conn;
  }

  /** Points a connection's future bytes at `b`, billing what came before to its previous owner. */
  attach(conn: Metered, b: Budget): void {
    if (conn.budget === b) return;
    if (conn.budget) this.detach(conn);
    conn.budget = b;
    b.conns.add(conn);
  }

  /**
   * Bills the connection's bytes up to the end of its last completed request and leaves it with
   * no owner: what follows (a refused request) is not billed.
   */
  detach(conn: Metered): void {
    const b = conn.budget;
    if (!b) return;
    this.collect(conn, conn.markIn, Math.min(conn.markOut, conn.delivered()));
    b.conns.delete(conn);
    conn.budget = undefined;
    conn.billedIn = conn.socket.bytesRead;
    conn.billedOut = conn.socket.bytesWritten;
  }

  private untrack(conn: Metered): void {
    if (conn.closed) return;
    this.settle(conn);
    conn.closed = true;
    conn.budget?.conns.delete(conn);
    this.conns.delete(conn);
  }

  /** Bills everything delivered so far. */
  settle(conn: Metered): void {
    if (conn.budget) this.collect(conn, conn.socket.bytesRead, conn.delivered());
  }

  private collect(conn: Metered, inNow: number, outNow: number): void {
    const b = conn.budget!;
    const up = Math.max(0, inNow - conn.billedIn);
    const down = Math.max(0, outNow - conn.billedOut);
    if (up === 0 && down === 0) return;
    conn.billedIn += up;
    conn.billedOut += down;
    b.bytesUp += up;
    b.bytesDown += down;
    b.allocate(up + down);
    if (up) this.opts.hot.bytesUp.inc(up);
    if (down) this.opts.hot.bytesDown.inc(down);
  }

  /** Exact counts replace the estimates; idle and over-age connections are closed. */
  tick(): void {
    const now = Date.now();
    for (const conn of this.conns) {
      this.settle(conn);
      if (conn.moved()) conn.lastActive = now;
      else if (now - conn.lastActive > this.opts.idleMs) conn.socket.destroy();
      if (now - conn.startedAt > this.opts.maxLifetimeMs) conn.socket.destroy();
    }
    const elapsed = now - this.lastTick;
    this.lastTick = now;
    for (const b of this.budgets.values()) {
      b.estimate = 0;
      b.observeRate(elapsed);
      if (b.conns.size) b.lastActive = now;
      // Leases near expiry stop being spent; their unspent part goes back with the next flush.
      for (const lease of b.leases)
        if (lease.expiresAt - now < LEASE_RENEW_MARGIN_MS)
          lease.granted = Math.min(lease.granted, lease.spent);
      b.recompute();
      if (b.available < b.wanted / 2 && b.conns.size && !b.pending && !b.deniedAt) void this.acquire(b);
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
    while (this.queue.length) {
      const batch = this.queue[0]!;
      batch.attempted = true;
      try {
        await this.opts.pool.query('SELECT usage_record($1, $2, $3, $4, $5)', [
          batch.key,
          this.opts.gatewayId,
          JSON.stringify([...batch.lines.values()]),
          JSON.stringify([...batch.spends].map(([lease_id, bytes]) => ({ lease_id, bytes }))),
          JSON.stringify([...batch.releases].map(([lease_id, spent]) => ({ lease_id, spent }))),
        ]);
        this.queue.shift();
        this.databaseDown = false;
      } catch (err) {
        this.databaseDown = true;
        this.opts.metrics.flushFailures.inc({ plan: this.opts.plan });
        this.opts.logger.warn(
          { err: (err as Error).message, pending: this.queue.length },
          'usage flush failed; will retry',
        );
        break;
      }
    }
    const oldest = this.queue[0];
    this.opts.metrics.flushLag.set(
      { plan: this.opts.plan },
      oldest ? (Date.now() - oldest.createdAt) / 1000 : 0,
    );
  }

  /** Moves the usage since the last flush into a batch (merged into the last one if never sent). */
  private build(final: boolean): void {
    let batch = this.queue.at(-1);
    if (!batch || batch.attempted) {
      batch = {
        key: `${this.opts.gatewayId}:${this.bootId}:${++this.seq}`,
        attempted: false,
        lines: new Map(),
        spends: new Map(),
        releases: new Map(),
        createdAt: Date.now(),
      };
    }
    const now = Date.now();
    for (const [accountId, b] of this.budgets) {
      if (b.bytesUp || b.bytesDown || b.requests) {
        const line = batch.lines.get(accountId) ?? {
          account_id: accountId,
          product: b.product,
          bytes_up: 0,
          bytes_down: 0,
          requests: 0,
        };
        line.bytes_up += b.bytesUp;
        line.bytes_down += b.bytesDown;
        line.requests += b.requests;
        batch.lines.set(accountId, line);
        b.bytesUp = b.bytesDown = b.requests = 0;
      }
      const idle = b.conns.size === 0 && now - b.lastActive > IDLE_RELEASE_MS;
      const keep: LocalLease[] = [];
      for (const [i, lease] of b.leases.entries()) {
        const delta = lease.spent - lease.flushed;
        if (lease.id && delta > 0) batch.spends.set(lease.id, (batch.spends.get(lease.id) ?? 0) + delta);
        lease.flushed = lease.spent;
        const last = i === b.leases.length - 1;
        const exhausted = lease.spent >= lease.granted;
        // The last lease, once spent, stays to absorb the overdraft while its successor is asked
        // for; it goes back when nothing more was granted or it is about to expire.
        const release =
          final ||
          idle ||
          (exhausted && (!last || b.deniedAt !== 0 || lease.expiresAt - now < LEASE_RENEW_MARGIN_MS));
        if (release) {
          if (lease.id) batch.releases.set(lease.id, lease.spent);
        } else {
          keep.push(lease);
        }
      }
      b.leases = keep;
      b.recompute();
      if ((idle || final) && b.conns.size === 0 && !b.pending) this.budgets.delete(accountId);
    }
    if (batch.lines.size || batch.spends.size || batch.releases.size) {
      if (this.queue.at(-1) !== batch) this.queue.push(batch);
    }
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
      if (this.queue.length === 0 || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    if (this.queue.length)
      this.opts.logger.error({ batches: this.queue.length }, 'usage left unflushed at shutdown');
  }
}
