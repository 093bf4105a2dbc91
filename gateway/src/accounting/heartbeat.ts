// The gateway's heartbeat (migrations/0080, docs/adr/0025): every HEARTBEAT_MS the process writes
// its row in gateway_heartbeats. When the rows stop (SIGKILL, a crash, a node lost), the leases
// the gateway held are reclaimed once its row is 30 s old (gateway_dead_after()) by the next
// lease_acquire on the same balance or by the worker's lease reaper, instead of blocking its
// customers until the lease TTL (300 s). Each heartbeat also reads how many gateways of the plan
// are alive, for the fleet-wide outage credit (liveGateways()), and carries the health of the
// gateway's exits in the same write (reportExits(), migrations/0175, docs/adr/0117): the operator
// reads them into the ProxyGateway's status.
import { randomBytes } from 'node:crypto';
import { Gauge, type Registry } from 'prom-client';
import type { Logger } from '#common/logger.ts';
import type { Pool } from '#common/db/pool.ts';
import type { ExitReport } from '../proxy/exits.ts';
import type { Plan } from '../spec.ts';

/** How often the row is written: six beats fit in gateway_dead_after(), so a few lost ones do not kill. */
export const HEARTBEAT_MS = 5_000;

/** At shutdown, how long a heartbeat in flight is waited for before the row is removed. */
const STOP_WAIT_MS = 2_000;

export interface HeartbeatOptions {
  pool: Pool;
  gatewayId: string;
  plan: Plan;
  logger: Logger;
  registry?: Registry;
  /** Tests only: a shorter interval. */
  intervalMs?: number;
}

export class GatewayHeartbeat {
  /** This process, as opposed to an earlier one that had the same gateway id. */
  readonly bootId = randomBytes(8).toString('hex');
  private live = 1;
  private lastBeat = Date.now();
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> | undefined;
  private stopped = false;
  private exits: (() => readonly ExitReport[]) | undefined;
  private readonly opts: HeartbeatOptions;

  private constructor(opts: HeartbeatOptions) {
    this.opts = opts;
    if (opts.registry) {
      const age = () => (Date.now() - this.lastBeat) / 1000;
      const live = () => this.live;
      new Gauge({
        name: 'proxyfleet_gateway_heartbeat_age_seconds',
        help: 'Seconds since this gateway last wrote its heartbeat (its leases are reclaimed past 30)',
        registers: [opts.registry],
        collect() {
          this.set(age());
        },
      });
      new Gauge({
        name: 'proxyfleet_gateway_live_gateways',
        help: 'Gateways of this plan with a fresh heartbeat, as of the last heartbeat',
        registers: [opts.registry],
        collect() {
          this.set(live());
        },
      });
    }
  }

  /**
   * Registers the process (reclaiming what an earlier process of the same id left open) and starts
   * beating. Call before the gateway draws any lease: it fails when the database cannot be reached.
   */
  static async start(opts: HeartbeatOptions): Promise<GatewayHeartbeat> {
    const hb = new GatewayHeartbeat(opts);
    const { rows } = await opts.pool.query<{
      out_reclaimed: number;
      out_other_alive: boolean;
      out_live: number;
    }>('SELECT * FROM gateway_register($1, $2, $3)', [opts.gatewayId, opts.plan, hb.bootId]);
    const row = rows[0]!;
    hb.live = row.out_live;
    hb.lastBeat = Date.now();
    if (row.out_reclaimed)
      opts.logger.warn(
        { gatewayId: opts.gatewayId, reclaimed: row.out_reclaimed },
        'leases left open by an earlier process of this gateway id were reclaimed',
      );
    if (row.out_other_alive)
      opts.logger.error(
        { gatewayId: opts.gatewayId },
        'another live process heartbeats with this gateway id: give every gateway process its own PROXYFLEET_GATEWAY_ID',
      );
    const interval = opts.intervalMs ?? HEARTBEAT_MS;
    hb.timer = setInterval(() => void hb.beat(), interval);
    hb.timer.unref();
    return hb;
  }

  /**
   * Gateways of this plan alive as of the last heartbeat, this one included (at least 1). During a
   * database outage it keeps the last value read.
   */
  liveGateways(): number {
    return Math.max(1, this.live);
  }

  /**
   * Where each heartbeat reads the exits' health from (the gateway, which starts after the
   * heartbeat registered). Until then the beat carries none (NULL, as a gateway of an earlier release).
   */
  reportExits(source: () => readonly ExitReport[]): void {
    this.exits = source;
  }

  /** One heartbeat; a heartbeat still in flight is not doubled (the pool times it out). */
  beat(): Promise<void> {
    this.beating ??= this.write().finally(() => {
      this.beating = undefined;
    });
    return this.beating;
  }

  private async write(): Promise<void> {
    if (this.stopped) return;
    const { pool, gatewayId, plan, logger } = this.opts;
    try {
      const exits = this.exits ? JSON.stringify(this.exits()) : null;
      const { rows } = await pool.query<{ out_live: number; out_was_dead: boolean }>(
        'SELECT * FROM gateway_heartbeat_v2($1, $2, $3, $4::jsonb)',
        [gatewayId, plan, this.bootId, exits],
      );
      const row = rows[0]!;
      this.live = row.out_live;
      if (row.out_was_dead)
        logger.warn(
          { gatewayId, silentSeconds: Math.round((Date.now() - this.lastBeat) / 1000) },
          'heartbeat resumed after the database judged this gateway dead: leases it still spends may have been reclaimed',
        );
      this.lastBeat = Date.now();
    } catch (err) {
      logger.warn(
        { err: (err as Error).message, silentSeconds: Math.round((Date.now() - this.lastBeat) / 1000) },
        'heartbeat failed',
      );
    }
  }

  /**
   * Clean shutdown, after the gateway's final flush: returns whatever lease that flush could not
   * and removes the row, so the gateway counts as gone at once.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    // A beat still in flight would re-create the row if it landed after it is deleted; wait for it,
    // but not for the whole query timeout when the database does not answer.
    await Promise.race([this.beating, new Promise((r) => setTimeout(r, STOP_WAIT_MS).unref())]);
    const { pool, gatewayId, logger } = this.opts;
    try {
      const { rows } = await pool.query<{ reclaimed: number }>(
        'SELECT gateway_deregister($1, $2) AS reclaimed',
        [gatewayId, this.bootId],
      );
      if (rows[0]?.reclaimed)
        logger.warn({ reclaimed: rows[0].reclaimed }, 'leases the final flush left open were reclaimed');
    } catch (err) {
      // The row stays and goes stale: the leases come back 30 s later, as after a crash.
      logger.warn({ err: (err as Error).message }, 'could not remove the heartbeat at shutdown');
    }
  }
}
