// The usage flusher: insert-only usage batches (migrations/0020, docs/adr/0020) written with
// usage_record (lines per account, spends per lease, leases returned). Every flush is one round
// trip: the batches queued after a failure go together through usage_record_many, in order, all or
// none (docs/adr/0090). A batch that was sent but not confirmed is retried with the same
// idempotency key (a retry of a batch that did land is a no-op); new usage merges into the last
// batch never sent.
import { randomBytes } from 'node:crypto';
import type { Logger } from '#common/logger.ts';
import type { Pool } from '#common/db/pool.ts';
import type { GatewayMetrics } from '../metrics.ts';
import type { Plan } from '../spec.ts';

interface Line {
  account_id: string;
  product: Plan;
  bytes_up: number;
  bytes_down: number;
  requests: number;
}

/** A sub-user's part of its account's line (docs/adr/0037): feeds its used bytes and usage over time. */
interface SubLine extends Line {
  sub_user_id: string;
}

interface Batch {
  key: string;
  attempted: boolean;
  lines: Map<string, Line>;
  subLines: Map<string, SubLine>;
  spends: Map<string, number>;
  releases: Map<string, number>;
  createdAt: number;
}

export interface FlusherOptions {
  pool: Pool;
  gatewayId: string;
  plan: Plan;
  logger: Logger;
  metrics: GatewayMetrics;
}

export class UsageFlusher {
  private readonly queue: Batch[] = [];
  private readonly bootId = randomBytes(6).toString('hex');
  private seq = 0;
  /** The batch being filled (not yet in the queue while it is empty). */
  private filling: Batch | undefined;
  private readonly opts: FlusherOptions;

  constructor(opts: FlusherOptions) {
    this.opts = opts;
  }

  /** Opens the batch new usage goes into: the last one if it was never sent, else a new one. */
  begin(): void {
    const last = this.queue.at(-1);
    this.filling =
      last && !last.attempted
        ? last
        : {
            key: `${this.opts.gatewayId}:${this.bootId}:${++this.seq}`,
            attempted: false,
            lines: new Map(),
            subLines: new Map(),
            spends: new Map(),
            releases: new Map(),
            createdAt: Date.now(),
          };
  }

  addLine(accountId: string, product: Plan, up: number, down: number, requests: number): void {
    const fresh = { account_id: accountId, product, bytes_up: 0, bytes_down: 0, requests: 0 };
    add(this.batch().lines, accountId, fresh, up, down, requests);
  }

  /** A sub-user's usage, also added to its account's line by the caller (addLine). */
  addSubLine(
    accountId: string,
    subUserId: string,
    product: Plan,
    up: number,
    down: number,
    requests: number,
  ): void {
    const fresh = {
      sub_user_id: subUserId,
      account_id: accountId,
      product,
      bytes_up: 0,
      bytes_down: 0,
      requests: 0,
    };
    add(this.batch().subLines, subUserId, fresh, up, down, requests);
  }

  addSpend(leaseId: string, bytes: number): void {
    const batch = this.batch();
    batch.spends.set(leaseId, (batch.spends.get(leaseId) ?? 0) + bytes);
  }

  addRelease(leaseId: string, spent: number): void {
    this.batch().releases.set(leaseId, spent);
  }

  /** Queues the batch begun last, unless it is empty. */
  end(): void {
    const batch = this.filling;
    this.filling = undefined;
    if (!batch || (!batch.lines.size && !batch.spends.size && !batch.releases.size)) return;
    if (this.queue.at(-1) !== batch) this.queue.push(batch);
  }

  private batch(): Batch {
    if (!this.filling) this.begin();
    return this.filling!;
  }

  /**
   * Sends the queued batches in order, in one round trip, all or none. Returns false on a failure,
   * true when batches went, undefined when there was nothing to send (the database was not asked).
   */
  async send(): Promise<boolean | undefined> {
    let ok: boolean | undefined;
    const batches = [...this.queue];
    if (batches.length) {
      for (const batch of batches) batch.attempted = true;
      try {
        if (batches.length === 1) {
          const b = wire(batches[0]!);
          await this.opts.pool.query('SELECT usage_record($1, $2, $3, $4, $5, $6)', [
            b.key,
            this.opts.gatewayId,
            JSON.stringify(b.lines),
            JSON.stringify(b.spends),
            JSON.stringify(b.releases),
            JSON.stringify(b.sub_lines),
          ]);
        } else {
          await this.opts.pool.query('SELECT usage_record_many($1, $2::jsonb)', [
            this.opts.gatewayId,
            JSON.stringify(batches.map(wire)),
          ]);
        }
        this.queue.splice(0, batches.length);
        ok = true;
      } catch (err) {
        ok = false;
        this.opts.metrics.flushFailures.inc({ plan: this.opts.plan });
        this.opts.logger.warn(
          { err: (err as Error).message, pending: this.queue.length },
          'usage flush failed; will retry',
        );
      }
    }
    const oldest = this.queue[0];
    this.opts.metrics.flushLag.set(
      { plan: this.opts.plan },
      oldest ? (Date.now() - oldest.createdAt) / 1000 : 0,
    );
    return ok;
  }

  /** Batches not yet confirmed by the database. */
  get unsent(): number {
    return this.queue.length;
  }
}

/** Adds usage to the batch's line under `key`, starting from `fresh` when there is none yet. */
function add<L extends { bytes_up: number; bytes_down: number; requests: number }>(
  lines: Map<string, L>,
  key: string,
  fresh: L,
  up: number,
  down: number,
  requests: number,
): void {
  const line = lines.get(key) ?? fresh;
  line.bytes_up += up;
  line.bytes_down += down;
  line.requests += requests;
  lines.set(key, line);
}

/** A batch as usage_record takes it (usage_record_many: an array of these). */
function wire(batch: Batch) {
  return {
    key: batch.key,
    lines: [...batch.lines.values()],
    spends: [...batch.spends].map(([lease_id, bytes]) => ({ lease_id, bytes })),
    releases: [...batch.releases].map(([lease_id, spent]) => ({ lease_id, spent })),
    sub_lines: [...batch.subLines.values()],
  };
}
