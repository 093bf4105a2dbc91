// Gauges read at scrape time from the database: the email outbox backlog (pending emails and the
// age of the oldest) and whether this process reaches the database at all. Every worker replica
// reports them, the active one and the standbys alike.
import { Gauge, type Registry } from 'prom-client';
import type { Pool } from 'pg';

export function registerOutboxMetrics(registry: Registry, pool: Pool): void {
  let last: Promise<{ up: number; pending: number; oldest: number }> | undefined;
  let lastAt = 0;
  // One query per scrape, shared by the three gauges (prom-client collects them one by one).
  const read = () => {
    if (!last || Date.now() - lastAt > 500) {
      lastAt = Date.now();
      last = pool
        .query<{ pending: string; oldest: string | null }>(
          `SELECT count(*)::text AS pending, extract(epoch FROM now() - min(created_at))::text AS oldest
             FROM email_outbox WHERE status = 'pending'`,
        )
        .then(
          ({ rows }) => ({
            up: 1,
            pending: Number(rows[0]?.pending ?? 0),
            oldest: Number(rows[0]?.oldest ?? 0),
          }),
          () => ({ up: 0, pending: NaN, oldest: NaN }),
        );
    }
    return last;
  };
  new Gauge({
    name: 'proxyfleet_worker_database_up',
    help: '1 when the last scrape-time query reached the database, 0 when it failed',
    registers: [registry],
    async collect() {
      this.set((await read()).up);
    },
  });
  new Gauge({
    name: 'proxyfleet_worker_outbox_pending',
    help: 'Emails waiting in the outbox (status pending)',
    registers: [registry],
    async collect() {
      this.set((await read()).pending);
    },
  });
  new Gauge({
    name: 'proxyfleet_worker_outbox_oldest_pending_seconds',
    help: 'Age of the oldest pending email in the outbox (0 when none)',
    registers: [registry],
    async collect() {
      this.set((await read()).oldest);
    },
  });
}
