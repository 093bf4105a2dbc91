// The cache_acks rows the change relay writes on its processes' behalf (docs/adr/0105): an API
// process's ack at once (admin calls wait for it: api/src/modules/sync/wait.ts), one statement
// for all that came meanwhile; every process's on the relay's ack interval, in one statement
// (the gateways' acks are batched, docs/adr/0090); a process that says `bye` loses its row.
import type { Pool } from '#common/db/pool.ts';
import type { Logger } from '#common/logger.ts';

export interface AckingProcess {
  instance: string;
  component: 'api' | 'gateway' | undefined;
  /** The version it last said it applied. */
  ack: number | undefined;
}

const UPSERT_ACKS = `INSERT INTO cache_acks (instance, component, version, updated_at)
  SELECT i, c, v, now() FROM unnest($1::text[], $2::text[], $3::bigint[]) AS t(i, c, v)
  ON CONFLICT (instance) DO UPDATE
    SET component = EXCLUDED.component, version = EXCLUDED.version, updated_at = now()`;

export class AckWriter<P extends AckingProcess> {
  private readonly pool: Pool;
  private readonly logger: Logger;
  /** Whether the process is still connected (a gone one's ack is not written). */
  private readonly live: (p: P) => boolean;
  private readonly apiAcks = new Set<P>();
  private writing: Promise<void> = Promise.resolve();
  private queued = false;

  constructor(pool: Pool, logger: Logger, live: (p: P) => boolean) {
    this.pool = pool;
    this.logger = logger;
    this.live = live;
  }

  /** An API process acked: its row is written at once, with every other that came meanwhile. */
  api(p: P): void {
    this.apiAcks.add(p);
    if (this.queued) return;
    this.queued = true;
    this.writing = this.writing.then(() => {
      this.queued = false;
      const processes = [...this.apiAcks];
      this.apiAcks.clear();
      return this.write(processes);
    });
  }

  forget(p: P): void {
    this.apiAcks.delete(p);
  }

  /** The processes' rows in one statement. */
  async write(processes: P[]): Promise<void> {
    const rows = new Map<string, { component: string; version: number }>();
    for (const p of processes)
      if (p.instance && p.component && p.ack !== undefined && this.live(p))
        rows.set(p.instance, { component: p.component, version: p.ack });
    if (rows.size === 0) return;
    await this.pool
      .query(UPSERT_ACKS, [
        [...rows.keys()],
        [...rows.values()].map((r) => r.component),
        [...rows.values()].map((r) => r.version),
      ])
      .catch((err: Error) => this.logger.warn({ err: err.message }, 'relay: acks not written'));
  }

  /** The process stops: it no longer counts towards "n/n synced". */
  bye(p: P): void {
    p.ack = undefined;
    if (p.instance)
      this.pool
        .query('DELETE FROM cache_acks WHERE instance = $1', [p.instance])
        .catch((err: Error) => this.logger.warn({ err: err.message }, 'relay: ack row not deleted'));
  }

  /** Resolves once the API acks queued so far are written. */
  settled(): Promise<void> {
    return this.writing;
  }
}
