// What the statistics tallies share (target statistics, docs/adr/0026; usage history, docs/adr/0103):
// rows gathered in memory are written after the ledger's usage batch, one write at a time, never
// delaying billing and never throwing: a failed write is logged and its rows are lost (these are
// statistics; billing has its own batches and retries).
import type { Logger } from '#common/logger.ts';
import type { Pool } from '#common/db/pool.ts';

export abstract class Statistics<Row> {
  private inFlight: Promise<void> | undefined;
  protected readonly pool: Pool;
  protected readonly logger: Logger;
  private readonly what: string;

  protected constructor(pool: Pool, logger: Logger, what: string) {
    this.pool = pool;
    this.logger = logger;
    this.what = what;
  }

  /** Entries held now. */
  abstract get size(): number;
  /** Hands over what was gathered since the last call and starts afresh. */
  protected abstract take(): Row[];
  protected abstract write(rows: Row[]): Promise<void>;

  /** Writes what was gathered since the last call, unless a write is still in flight (then it waits for the next tick). */
  flush(): Promise<void> {
    if (this.inFlight || this.size === 0) return this.inFlight ?? Promise.resolve();
    const rows = this.take();
    this.inFlight = this.attempt(rows).finally(() => (this.inFlight = undefined));
    return this.inFlight;
  }

  /** Waits for a write in flight, then writes the rest (shutdown's final flush; tests). */
  async drain(): Promise<void> {
    while (this.inFlight) await this.inFlight;
    await this.flush();
  }

  private async attempt(rows: Row[]): Promise<void> {
    try {
      await this.write(rows);
    } catch (err) {
      this.logger.warn(
        { err: (err as Error).message, rows: rows.length },
        `${this.what} flush failed; rows dropped`,
      );
    }
  }
}
