// A worker process killed (SIGKILL) in the middle of a renewal: its transaction holds the
// subscription row and waits for the account's credit lock, which this test holds; the process
// dies there. Nothing of the renewal stays; the next worker renews the period exactly once
// (docs/adr/0080).
import { afterAll, beforeAll, expect, it, jest } from '@jest/globals';
import type { PoolClient } from '#common/db/pool.ts';
import { paymentMethods } from '#common/billing/payment.ts';
import { renewDue } from '#common/billing/renewals.ts';
import { createSubscription, subscriptionCreateSchema } from '#common/billing/subscriptions.ts';
import { createLogger } from '#common/logger.ts';
import { billingAccount } from '#test/billing.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { freePort } from '#test/ports.ts';
import { startEntrypoint, stopProcess, until, type RunningProcess } from '#test/process.ts';

// A process start on a shared 2-core machine: generous limits; nothing here measures speed.
jest.setTimeout(120_000);

let db: TestDatabase;
let worker: RunningProcess | undefined;

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await stopProcess(worker);
  await db.drop();
});

const count = async (sql: string, params: unknown[]) =>
  (await db.pool.query<{ n: number }>(sql, params)).rows[0]!.n;

it('a worker killed mid-renewal leaves nothing; the next renews the period once', async () => {
  const account = await billingAccount(db.pool, 1e9);
  const sub = await createSubscription(
    db.pool,
    account,
    subscriptionCreateSchema.parse({ kind: 'bandwidth_plan', product: 'basic', gbPerPeriod: 3 }),
    { kind: 'admin', id: 'test' },
  );
  // Hold the account's credit lock: the worker's renewal (bill later) waits for it mid-transaction.
  const holder: PoolClient = await db.pool.connect();
  await holder.query('BEGIN');
  await holder.query('SELECT billing_credit_lock($1)', [account]);
  const port = await freePort();
  worker = startEntrypoint('worker/src/main.ts', {
    DATABASE_URL: db.url,
    PROXYFLEET_HEALTH_HOST: '127.0.0.1',
    PROXYFLEET_HEALTH_PORT: String(port),
  });
  const waiting = () =>
    count(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%billing_credit_check%'`,
      [],
    );
  await until(async () => (await waiting()) === 1, 'the worker to wait mid-renewal', 60_000);
  // The renewal holds the subscription row: it is inside its transaction.
  expect(
    await count(
      `SELECT count(*)::int AS n FROM subscriptions WHERE id = $1
          AND id NOT IN (SELECT id FROM subscriptions WHERE id = $1 FOR UPDATE SKIP LOCKED)`,
      [sub.id],
    ),
  ).toBe(1);
  worker.kill('SIGKILL');
  expect(await worker.exited).toBe('SIGKILL');
  await holder.query('COMMIT');
  holder.release();
  // The dead worker's backend goes once it finds its client gone; nothing it did stays.
  await until(async () => (await waiting()) === 0, 'the dead backend to end', 30_000);
  await until(
    async () =>
      (await count(
        `SELECT count(*)::int AS n FROM subscriptions WHERE id = $1
            AND id IN (SELECT id FROM subscriptions WHERE id = $1 FOR UPDATE SKIP LOCKED)`,
        [sub.id],
      )) === 1,
    'the subscription row to be free',
    30_000,
  );
  expect(
    await count('SELECT count(*)::int AS n FROM subscription_renewals WHERE subscription_id = $1', [sub.id]),
  ).toBe(0);
  expect(await count('SELECT count(*)::int AS n FROM invoices WHERE subscription_id = $1', [sub.id])).toBe(0);
  // The next worker renews it once, however often it runs.
  const options = { methods: paymentMethods(), graceDays: 3, logger: createLogger('test', 'silent') };
  expect((await renewDue(db.pool, options)).renewed).toBe(1);
  expect((await renewDue(db.pool, options)).renewed).toBe(0);
  expect(await count('SELECT count(*)::int AS n FROM invoices WHERE subscription_id = $1', [sub.id])).toBe(1);
  expect(
    await count(`SELECT count(*)::int AS n FROM purchases WHERE account_id = $1 AND source = 'renewal'`, [
      account,
    ]),
  ).toBe(1);
});
