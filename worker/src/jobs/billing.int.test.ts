// Auto-refill on remaining = bought - used (docs/adr/0073), decided in the database when usage
// becomes known (a draw reporting what its gateway relayed, the fold) through simulated gateways
// that speak the gateways' SQL: one refill per crossing with three gateways at once, none for draws
// alone, the monthly cap and a new month, a payment method that fails, a worker killed mid-refill.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { autoRefillUpdateSchema, putAutoRefill } from '#common/billing/auto-refill.ts';
import { paymentMethods, type ChargeRequest, type PaymentMethod } from '#common/billing/payment.ts';
import { payPendingRefill } from '#common/billing/refills.ts';
import { listInvoices } from '#common/billing/invoices.ts';
import { createLogger } from '#common/logger.ts';
import { createPool } from '#common/db/pool.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { foldAll, nextMonthOffset, setBillingClock, SimGateway } from '#test/billing.ts';
import { until } from '#test/process.ts';
import type { JobContext } from '../jobs.ts';
import { autoRefillJob, balanceSweepJob } from './auto-refill.ts';
import { formatBytes } from './render.ts';

const MB = 1e6;
const GB = 1e9;

let db: TestDatabase;
let ctx: JobContext;

beforeAll(async () => {
  db = await createTestDatabase();
  ctx = { pool: db.pool, logger: createLogger('test', 'silent') };
});
afterAll(async () => {
  await db.drop();
});

const refills = async (accountId: string) =>
  (
    await db.pool.query<{ bytes: number; idempotency_key: string }>(
      `SELECT bytes, idempotency_key FROM purchases WHERE account_id = $1 AND source = 'auto_refill' ORDER BY created_at`,
      [accountId],
    )
  ).rows;
const outbox = async (accountId: string, kind: string) =>
  (
    await db.pool.query<{ status: string; dedupe_key: string; message_id: string }>(
      'SELECT status, dedupe_key, message_id FROM email_outbox WHERE account_id = $1 AND kind = $2 ORDER BY id',
      [accountId, kind],
    )
  ).rows;
const total = async (accountId: string) =>
  (
    await db.pool.query<{ total_bytes: number }>(
      `SELECT total_bytes FROM balances WHERE account_id = $1 AND product = 'basic'`,
      [accountId],
    )
  ).rows[0]!.total_bytes;

async function refilling(
  bought: number,
  settings: { thresholdGb: number; refillGb: number; maxRefillsPerMonth: number },
  paymentMethod?: string,
) {
  const account = await accountWithBandwidth(db.pool, { basic: bought });
  await putAutoRefill(db.pool, account.id, 'basic', { enabled: true, ...settings }, paymentMethod);
  return account;
}

describe('auto-refill on bought - used', () => {
  it('refills exactly once per crossing while three gateways relay at once', async () => {
    const account = await refilling(100 * MB, { thresholdGb: 0.03, refillGb: 0.06, maxRefillsPerMonth: 5 });
    // Three gateways, each on its own connection, relay 50 MB in 2 MB leases, flushing every
    // 4 MB, while the worker folds: 150 MB used in all, so remaining crosses 30 MB twice.
    const pools = [0, 1, 2].map(() =>
      createPool({ url: db.url, max: 1, applicationName: 'gw', logger: ctx.logger }),
    );
    let relaying = true;
    const folding = (async () => {
      while (relaying) {
        await foldAll(db.pool);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    try {
      await Promise.all(
        pools.map(async (pool, i) => {
          const gw = new SimGateway(pool, `gw-${i}`, account.id);
          for (let step = 0; step < 25; step++) {
            expect(await gw.relay(2 * MB, 2 * MB)).toBe(2 * MB); // never dry: the refill came first
            if (step % 2 === 1) await gw.flush();
          }
          await gw.flush(true);
        }),
      );
    } finally {
      relaying = false;
      await folding;
      await Promise.all(pools.map((p) => p.end()));
    }
    await foldAll(db.pool);
    const bought = await refills(account.id);
    expect(bought.map((r) => r.idempotency_key)).toEqual([
      'auto-refill:basic:crossing:1',
      'auto-refill:basic:crossing:2',
    ]);
    expect(bought.every((r) => r.bytes === 60 * MB)).toBe(true);
    expect(await total(account.id)).toBe(220 * MB);
    // Each refill is a purchase with an invoice (source auto-refill) and one new-invoice email.
    const { invoices } = await listInvoices(db.pool, account.id, { limit: 10 });
    expect(invoices.map((i) => [i.source, i.gb, i.amount, i.currency])).toEqual([
      ['auto-refill', 0.06, 0.12, 'USD'],
      ['auto-refill', 0.06, 0.12, 'USD'],
      ['purchase', 0.1, 0.2, 'USD'],
    ]);
    const mails = await outbox(account.id, 'new_invoice');
    expect(mails.map((m) => m.dedupe_key).sort()).toEqual(invoices.map((i) => `new_invoice:${i.id}`).sort());
    // One Message-ID form, one-to-one with the dedupe key.
    for (const m of mails) expect(m.message_id).toBe(`<${m.dedupe_key.replace(':', '.')}@proxyfleet>`);
  });

  it('buys nothing for draws alone, however many gateways draw and however often', async () => {
    const account = await refilling(30 * MB, { thresholdGb: 0.02, refillGb: 0.05, maxRefillsPerMonth: 5 });
    const gateways = [0, 1, 2].map((i) => new SimGateway(db.pool, `idle-${i}`, account.id));
    let grants = 0;
    for (let round = 0; round < 20; round++)
      for (const gw of gateways) if ((await gw.draw(4 * MB)).granted > 0) grants++;
    expect(grants).toBeGreaterThan(3);
    // Everything free is held in leases now: denied, and still no refill and no alert.
    expect((await gateways[0]!.draw(4 * MB)).granted).toBe(0);
    await balanceSweepJob.run(ctx);
    expect(await refills(account.id)).toEqual([]);
    expect(await outbox(account.id, 'low_bandwidth')).toEqual([]);
    for (const gw of gateways) await gw.flush(true);
    await foldAll(db.pool);
    expect(await refills(account.id)).toEqual([]);
  });

  it('a draw reporting its unfolded usage buys the refill before traffic stops; the fold does not buy it again', async () => {
    const account = await refilling(20 * MB, { thresholdGb: 0.01, refillGb: 0.02, maxRefillsPerMonth: 3 });
    const gw = new SimGateway(db.pool, 'fast', account.id);
    // Relays 60 MB without a flush: only its draws tell the database what was used.
    expect(await gw.relay(60 * MB, 4 * MB)).toBe(60 * MB);
    expect((await refills(account.id)).map((r) => r.idempotency_key)).toEqual([
      'auto-refill:basic:crossing:1',
      'auto-refill:basic:crossing:2',
      'auto-refill:basic:crossing:3',
    ]);
    await gw.flush(true);
    await foldAll(db.pool);
    expect(await refills(account.id)).toHaveLength(3);
    // The cap is used up: traffic stops as without auto-refill once the 80 MB are used.
    expect(await gw.relay(30 * MB, 4 * MB)).toBe(20 * MB);
    expect(await refills(account.id)).toHaveLength(3);
  });

  it('a lease returned before the fold still counts: a gateway flushing as it goes buys every refill', async () => {
    const account = await refilling(20 * MB, { thresholdGb: 0.01, refillGb: 0.02, maxRefillsPerMonth: 3 });
    const gw = new SimGateway(db.pool, 'flushing', account.id);
    // Relays 60 MB, each spent lease returned with its batch (as the gateway's flush does) and
    // nothing folded: a returned lease's spend is known (spent_bytes, still held in leased_bytes
    // until the fold charges it), so the draws after it count it in used.
    let done = 0;
    while (done < 60 * MB) {
      done += gw.spend(60 * MB - done);
      await gw.flush();
      if (done < 60 * MB && (await gw.draw(4 * MB)).granted === 0) break;
    }
    expect(done).toBe(60 * MB);
    expect((await refills(account.id)).map((r) => r.idempotency_key)).toEqual([
      'auto-refill:basic:crossing:1',
      'auto-refill:basic:crossing:2',
      'auto-refill:basic:crossing:3',
    ]);
    // The fold charges what the draws counted: nothing is counted twice, no refill bought again.
    await gw.flush(true);
    await foldAll(db.pool);
    expect(await refills(account.id)).toHaveLength(3);
    const { rows } = await db.pool.query<{
      used_bytes: number;
      reported_used_bytes: number;
      leased_bytes: number;
    }>(
      `SELECT used_bytes, reported_used_bytes, leased_bytes FROM balances WHERE account_id = $1 AND product = 'basic'`,
      [account.id],
    );
    expect(rows[0]).toEqual({
      used_bytes: 60 * MB,
      reported_used_bytes: expect.any(Number),
      leased_bytes: 0,
    });
    expect(rows[0]!.reported_used_bytes).toBeLessThanOrEqual(60 * MB);
  });

  it('stops at maxRefillsPerMonth; a new month buys the open crossing at once (the sweep, or a dry draw)', async () => {
    const account = await refilling(10 * MB, { thresholdGb: 0.004, refillGb: 0.01, maxRefillsPerMonth: 2 });
    const gw = new SimGateway(db.pool, 'capped', account.id);
    expect(await gw.relay(40 * MB, 4 * MB)).toBe(30 * MB);
    expect(await refills(account.id)).toHaveLength(2);
    await gw.flush(true);
    await foldAll(db.pool);
    await balanceSweepJob.run(ctx);
    expect(await refills(account.id)).toHaveLength(2);
    try {
      await setBillingClock(db.pool, await nextMonthOffset(db.pool));
      await balanceSweepJob.run(ctx);
      expect((await refills(account.id)).map((r) => r.idempotency_key)).toEqual([
        'auto-refill:basic:crossing:1',
        'auto-refill:basic:crossing:2',
        'auto-refill:basic:crossing:3',
      ]);
      expect(await gw.relay(10 * MB, 4 * MB)).toBe(10 * MB);
    } finally {
      await setBillingClock(db.pool, null);
    }
  });

  it('refills a balance that was already low when auto-refill was turned on (the sweep)', async () => {
    const account = await accountWithBandwidth(db.pool, { basic: 1 * MB });
    const gw = new SimGateway(db.pool, 'dry', account.id);
    expect(await gw.relay(2 * MB, MB)).toBe(1 * MB);
    await gw.flush(true);
    await foldAll(db.pool);
    await putAutoRefill(db.pool, account.id, 'basic', {
      enabled: true,
      thresholdGb: 0.001,
      refillGb: 0.005,
      maxRefillsPerMonth: 5,
    });
    await balanceSweepJob.run(ctx);
    expect(await refills(account.id)).toHaveLength(1);
    expect(await gw.relay(MB, MB)).toBe(MB);
  });

  it('a failing payment method: no refill, one "auto-refill failed" email, traffic stops when dry', async () => {
    const declined: ChargeRequest[] = [];
    const card: PaymentMethod = {
      name: 'card',
      settlement: 'charge',
      charge: (req) => {
        declined.push(req);
        return Promise.resolve({ ok: false, reason: 'card declined' });
      },
    };
    const account = await refilling(
      2 * MB,
      { thresholdGb: 0.001, refillGb: 0.005, maxRefillsPerMonth: 5 },
      'card',
    );
    const gw = new SimGateway(db.pool, 'card', account.id);
    expect(await gw.relay(3 * MB, MB)).toBe(2 * MB);
    await autoRefillJob(paymentMethods(card)).run(ctx);
    await autoRefillJob(paymentMethods(card)).run(ctx);
    expect(declined).toHaveLength(1);
    expect(declined[0]).toMatchObject({ bytes: 5 * MB, amountCents: 1, currency: 'USD' });
    expect(await refills(account.id)).toEqual([]);
    expect(await gw.relay(MB, MB)).toBe(0);
    await gw.flush(true);
    await foldAll(db.pool);
    await balanceSweepJob.run(ctx);
    await autoRefillJob(paymentMethods(card)).run(ctx);
    expect(declined).toHaveLength(1); // one attempt per crossing
    expect(await outbox(account.id, 'auto_refill_failed')).toHaveLength(1);
  });

  it('a worker killed mid-refill leaves exactly one purchase', async () => {
    const keys: string[] = [];
    let hang: (() => void) | undefined;
    const card: PaymentMethod = {
      name: 'card',
      settlement: 'charge',
      charge: (req) => {
        keys.push(req.idempotencyKey);
        if (keys.length === 1) return new Promise((resolve) => (hang = () => resolve({ ok: true })));
        return Promise.resolve({ ok: true });
      },
    };
    const account = await refilling(
      2 * MB,
      { thresholdGb: 0.001, refillGb: 0.005, maxRefillsPerMonth: 5 },
      'card',
    );
    const gw = new SimGateway(db.pool, 'killed', account.id);
    expect(await gw.relay(3 * MB, MB)).toBe(2 * MB);
    const workerPool = createPool({
      url: db.url,
      max: 1,
      applicationName: 'doomed-worker',
      logger: ctx.logger,
    });
    const first = payPendingRefill(workerPool, paymentMethods(card), ctx.logger);
    await until(() => keys.length === 1, 'the first charge');
    // The worker dies while the payment is in flight: its database session goes with it.
    await db.pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'doomed-worker'`,
    );
    hang!();
    await expect(first).rejects.toThrow();
    await workerPool.end().catch(() => undefined);
    expect(await refills(account.id)).toEqual([]);
    // The next worker pays the same crossing with the same idempotency key, and buys once.
    await autoRefillJob(paymentMethods(card)).run(ctx);
    await autoRefillJob(paymentMethods(card)).run(ctx);
    expect(keys).toHaveLength(2);
    expect(keys[1]).toBe(keys[0]);
    expect(await refills(account.id)).toHaveLength(1);
    expect(await gw.relay(MB, MB)).toBe(MB);
  });
});

describe('auto-refill settings validation', () => {
  it('wants positive, bounded amounts and a threshold below the refill', () => {
    const ok = { enabled: true, thresholdGb: 1, refillGb: 10 };
    expect(autoRefillUpdateSchema.parse(ok)).toEqual({ ...ok, maxRefillsPerMonth: 5 });
    for (const bad of [
      { ...ok, thresholdGb: 0 },
      { ...ok, refillGb: -1 },
      { ...ok, thresholdGb: 10 },
      { ...ok, thresholdGb: 20 },
      { ...ok, refillGb: 2_000_000 },
      { ...ok, maxRefillsPerMonth: 0 },
      { ...ok, maxRefillsPerMonth: 101 },
    ]) {
      expect(autoRefillUpdateSchema.safeParse(bad).success).toBe(false);
    }
  });

  it('formats remaining bandwidth as the API and the dashboard do (never 0 GB while bytes remain)', () => {
    expect(formatBytes(0)).toBe('0 GB');
    expect(formatBytes(1)).toBe('0.000000001 GB');
    expect(formatBytes(30 * MB)).toBe('0.03 GB');
    expect(formatBytes(999_999_999)).toBe('0.999 GB');
    expect(formatBytes(GB)).toBe('1 GB');
    expect(formatBytes(1.5 * GB)).toBe('1.5 GB');
  });
});
