// The worker's scrape-time gauges on a real database: the outbox backlog and its oldest email's
// age, and database_up, which turns 0 when the database is gone.
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { createRegistry } from '#common/metrics.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { registerOutboxMetrics } from './outbox-metrics.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

const value = (text: string, name: string) =>
  Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, 'm').exec(text)?.[1]);

it('reports the pending emails, the oldest one age and database_up, then 0 when the database is gone', async () => {
  const registry = createRegistry('worker', false);
  registerOutboxMetrics(registry, db.pool);
  let text = await registry.metrics();
  expect(value(text, 'proxyfleet_worker_outbox_pending')).toBe(0);
  expect(value(text, 'proxyfleet_worker_database_up')).toBe(1);

  await db.pool.query(
    `INSERT INTO email_outbox (kind, dedupe_key, to_address, subject, body_text, message_id, created_at)
     VALUES ('server_alert', 'a', 'a@example.test', 's', 'b', '<a@test>', now() - interval '20 minutes'),
            ('server_alert', 'b', 'b@example.test', 's', 'b', '<b@test>', now())`,
  );
  await new Promise((r) => setTimeout(r, 600)); // one query per scrape, shared for 500 ms
  text = await registry.metrics();
  expect(value(text, 'proxyfleet_worker_outbox_pending')).toBe(2);
  const oldest = value(text, 'proxyfleet_worker_outbox_oldest_pending_seconds');
  expect(oldest).toBeGreaterThanOrEqual(1200);
  expect(oldest).toBeLessThan(1300);

  await db.pool.end();
  await new Promise((r) => setTimeout(r, 600));
  text = await registry.metrics();
  expect(value(text, 'proxyfleet_worker_database_up')).toBe(0);
});
