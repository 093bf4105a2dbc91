// Auto-refill and the low-bandwidth alert, decided in the database when a lease is drawn
// (migrations/0060, docs/adr/0040): concurrent draws of several gateways, the monthly cap, a
// payment method that fails, a worker killed mid-refill, and what the emails say when sent
// through a real SMTP server.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { recordPurchase } from '#common/accounts/accounts.ts';
import { autoRefillUpdateSchema, putAutoRefill } from '#common/billing/auto-refill.ts';
import { paymentMethods, type ChargeRequest, type PaymentMethod } from '#common/billing/payment.ts';
import { listInvoices } from '#common/billing/invoices.ts';
import { createLogger } from '#common/logger.ts';
import { createPool } from '#common/db/pool.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import type { Job, JobContext } from '../jobs.ts';
import { autoRefillJob, balanceSweepJob, payOne } from './auto-refill.ts';
import { emailSenderJob } from './email.ts';
import { addresses, startTestSmtpServer, type TestSmtpServer } from '#test/smtp.ts';
import { formatBytes } from './render.ts';

const MB = 1e6;
const GB = 1e9;

describe('billing decided on the draw', () => {
  let db: TestDatabase;
  let ctx: JobContext;
  let server: TestSmtpServer;
  let sender: Job;

  beforeAll(async () => {
    db = await createTestDatabase();
    ctx = { pool: db.pool, logger: createLogger('test', 'silent') };
    server = await startTestSmtpServer();
    sender = emailSenderJob({
      smtpUrl: server.url,
      from: 'proxyfleet <alerts@localhost>',
      logger: ctx.logger,
      registry: new Registry(),
    });
  });
  beforeEach(() => {
    server.messages.length = 0;
  });
  afterAll(async () => {
    await server.close();
    await db.drop();
  });

  const draw = async (accountId: string, gateway: string, wanted: number, pool = db.pool) =>
    (
      await pool.query<{ out_lease_id: string | null; out_granted: number }>(
        'SELECT * FROM lease_acquire($1, $2, $3, $4, $5, $6)',
        [accountId, 'basic', gateway, wanted, 262_144, 300],
      )
    ).rows[0]!;
  const refills = async (accountId: string) =>
    (
      await db.pool.query<{ source: string; bytes: number; idempotency_key: string }>(
        `SELECT source, bytes, idempotency_key FROM purchases WHERE account_id = $1 AND source = 'auto_refill' ORDER BY created_at`,
        [accountId],
      )
    ).rows;
  const outbox = async (accountId: string, kind: string) =>
    (
      await db.pool.query<{
        status: string;
        subject: string | null;
        body_text: string | null;
        last_error: string | null;
      }>(
        'SELECT status, subject, body_text, last_error FROM email_outbox WHERE account_id = $1 AND kind = $2 ORDER BY id',
        [accountId, kind],
      )
    ).rows;
  const balance = async (accountId: string) =>
    (
      await db.pool.query<{ total_bytes: number; leased_bytes: number; used_bytes: number }>(
        `SELECT total_bytes, leased_bytes, used_bytes FROM balances WHERE account_id = $1 AND product = 'basic'`,
        [accountId],
      )
    ).rows[0]!;

  it('refills exactly once per crossing while three gateways draw leases concurrently', async () => {
    const account = await accountWithBandwidth(db.pool, { basic: 100 * MB });
    await putAutoRefill(db.pool, account.id, 'basic', {
      enabled: true,
      thresholdGb: 0.03,
      refillGb: 0.06,
      maxRefillsPerMonth: 5,
    });
    // Three gateways, each on its own connection, draw 2 MB leases until each holds 50 MB: 150 MB
    // in all, so the remaining bandwidth crosses 30 MB twice (at 100 MB and at 160 MB bought).
    const pools = [0, 1, 2].map(() =>
      createPool({ url: db.url, max: 2, applicationName: 'gw', logger: ctx.logger }),
    );
    try {
      await Promise.all(
        pools.map(async (pool, i) => {
          let held = 0;
          while (held < 50 * MB) {
            const lease = await draw(account.id, `gw-${i}`, Math.min(2 * MB, 50 * MB - held), pool);
            expect(lease.out_granted).toBeGreaterThan(0); // never dry: the refill came first
            held += lease.out_granted;
          }
        }),
      );
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
    const bought = await refills(account.id);
    expect(bought.map((r) => r.idempotency_key)).toEqual([
      'auto-refill:basic:100000000',
      'auto-refill:basic:160000000',
    ]);
    expect(bought.every((r) => r.bytes === 60 * MB)).toBe(true);
    expect((await balance(account.id)).total_bytes).toBe(220 * MB);
    // Each refill is a purchase with an invoice (source auto-refill) and the new-invoice email.
    const { invoices } = await listInvoices(db.pool, account.id, { limit: 10 });
    expect(invoices.map((i) => [i.source, i.gb, i.amount, i.currency])).toEqual([
      ['auto-refill', 0.06, 0.12, 'USD'],
      ['auto-refill', 0.06, 0.12, 'USD'],
      ['purchase', 0.1, 0.2, 'USD'],
    ]);
    expect(await outbox(account.id, 'new_invoice')).toHaveLength(3);
    await sender.run(ctx);
    const refillMail = server.messages.find(
      (m) => m.subject === `Invoice #${invoices[0]!.number}: 60 MB of basic bandwidth`,
    );
    expect(refillMail?.text).toContain(
      'Auto-refill bought it: your remaining basic bandwidth dropped below 30 MB.',
    );
  });

  it('stops at maxRefillsPerMonth; then traffic stops as without auto-refill', async () => {
    const account = await accountWithBandwidth(db.pool, { basic: 10 * MB });
    await putAutoRefill(db.pool, account.id, 'basic', {
      enabled: true,
      thresholdGb: 0.004,
      refillGb: 0.01,
      maxRefillsPerMonth: 2,
    });
    let granted = 0;
    for (;;) {
      const lease = await draw(account.id, 'gw', 4 * MB);
      if (!lease.out_lease_id) break;
      granted += lease.out_granted;
    }
    expect(granted).toBe(30 * MB);
    expect(await refills(account.id)).toHaveLength(2);
    await balanceSweepJob.run(ctx);
    expect(await refills(account.id)).toHaveLength(2);
  });

  it('refills a balance that was already dry when auto-refill was turned on (the sweep)', async () => {
    const account = await accountWithBandwidth(db.pool, { basic: 1 * MB });
    while ((await draw(account.id, 'gw', MB)).out_lease_id);
    await putAutoRefill(db.pool, account.id, 'basic', {
      enabled: true,
      thresholdGb: 0.001,
      refillGb: 0.005,
      maxRefillsPerMonth: 5,
    });
    expect((await draw(account.id, 'gw', MB)).out_lease_id).toBeNull();
    await balanceSweepJob.run(ctx);
    expect(await refills(account.id)).toHaveLength(1);
    expect((await draw(account.id, 'gw', MB)).out_granted).toBeGreaterThan(0);
  });

  it('a failing payment method: no refill, one "auto-refill failed" email, the draw is refused when dry', async () => {
    const account = await accountWithBandwidth(db.pool, { basic: 2 * MB });
    const declined: ChargeRequest[] = [];
    const card: PaymentMethod = {
      name: 'card',
      settlement: 'charge',
      charge: (req) => {
        declined.push(req);
        return Promise.resolve({ ok: false, reason: 'card declined' });
      },
    };
    await putAutoRefill(
      db.pool,
      account.id,
      'basic',
      { enabled: true, thresholdGb: 0.001, refillGb: 0.005, maxRefillsPerMonth: 5 },
      'card',
    );
    while ((await draw(account.id, 'gw', MB)).out_lease_id);
    await autoRefillJob(paymentMethods(card)).run(ctx);
    await autoRefillJob(paymentMethods(card)).run(ctx);
    expect(declined).toHaveLength(1);
    expect(declined[0]).toMatchObject({ bytes: 5 * MB, amountCents: 1, currency: 'USD' });
    expect(await refills(account.id)).toEqual([]);
    expect((await draw(account.id, 'gw', MB)).out_lease_id).toBeNull();
    await balanceSweepJob.run(ctx);
    await autoRefillJob(paymentMethods(card)).run(ctx);
    expect(declined).toHaveLength(1); // one attempt per crossing
    await sender.run(ctx);
    const mail = server.messages.find((m) => m.subject === 'Auto-refill of basic bandwidth failed');
    expect(mail?.text).toContain('with payment method "card", and the payment failed: card declined.');
    expect(mail?.text).toContain('Nothing was bought.');
    expect(await outbox(account.id, 'auto_refill_failed')).toHaveLength(1);
  });

  it('a worker killed mid-refill leaves exactly one purchase', async () => {
    const account = await accountWithBandwidth(db.pool, { basic: 2 * MB });
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
    await putAutoRefill(
      db.pool,
      account.id,
      'basic',
      { enabled: true, thresholdGb: 0.001, refillGb: 0.005, maxRefillsPerMonth: 5 },
      'card',
    );
    while ((await draw(account.id, 'gw', MB)).out_lease_id);
    const workerPool = createPool({
      url: db.url,
      max: 1,
      applicationName: 'doomed-worker',
      logger: ctx.logger,
    });
    const first = payOne(workerPool, paymentMethods(card), ctx.logger);
    await until(() => keys.length === 1);
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
    expect((await draw(account.id, 'gw', MB)).out_granted).toBeGreaterThan(0);
  });

  it('low bandwidth: one email per crossing, in MB below 1 GB, subject and body agree; re-armed by a purchase', async () => {
    const account = await accountWithBandwidth(db.pool, { basic: 500 * MB });
    // 10%: at 50 MB left. Leases of 100 MB (capped by the grant rule) bring it down.
    while ((await balance(account.id)).total_bytes - (await balance(account.id)).leased_bytes > 50 * MB) {
      await draw(account.id, 'gw', 100 * MB);
    }
    await draw(account.id, 'gw', 1 * MB);
    expect(await outbox(account.id, 'low_bandwidth')).toHaveLength(1);
    await sender.run(ctx);
    const b = await balance(account.id);
    const left = formatBytes(b.total_bytes - b.leased_bytes);
    expect(left).toMatch(/ MB$/);
    const mail = server.messages.find((m) => m.subject?.startsWith('Low basic bandwidth'));
    expect(mail?.subject).toBe(`Low basic bandwidth: ${left} of 500 MB left`);
    expect(mail?.text).toContain(`running low: ${left} of 500 MB left`);
    expect(mail?.text).toContain('turn on auto-refill');
    // No second email while it stays low; a purchase lifting it above re-arms it.
    await draw(account.id, 'gw', 1 * MB);
    expect(await outbox(account.id, 'low_bandwidth')).toHaveLength(1);
    await recordPurchase(db.pool, { accountId: account.id, product: 'basic', bytes: 1 * GB });
    while (
      (await draw(account.id, 'gw', 200 * MB)).out_lease_id &&
      (await outbox(account.id, 'low_bandwidth')).length < 2
    );
    expect(await outbox(account.id, 'low_bandwidth')).toHaveLength(2);
  });

  it('drops a low-bandwidth alert that a purchase made untrue before it was sent', async () => {
    const account = await accountWithBandwidth(db.pool, { basic: 10 * MB });
    while ((await draw(account.id, 'gw', 4 * MB)).out_lease_id);
    expect(await outbox(account.id, 'low_bandwidth')).toMatchObject([{ status: 'pending' }]);
    await recordPurchase(db.pool, { accountId: account.id, product: 'basic', bytes: 1 * GB });
    await sender.run(ctx);
    expect(
      server.messages.filter(
        (m) => addresses(m.to).includes(account.email) && m.subject?.includes('Low basic'),
      ),
    ).toEqual([]);
    expect(await outbox(account.id, 'low_bandwidth')).toMatchObject([
      { status: 'dropped', last_error: 'dropped: bandwidth no longer low' },
    ]);
  });

  it('says "used up" only when nothing is left, and gives no auto-refill advice when it is on', async () => {
    const account = await accountWithBandwidth(db.pool, { basic: 10 * MB });
    await putAutoRefill(db.pool, account.id, 'basic', {
      enabled: true,
      thresholdGb: 0.001,
      refillGb: 0.002,
      maxRefillsPerMonth: 1,
    });
    while ((await draw(account.id, 'gw', 4 * MB)).out_lease_id);
    await sender.run(ctx);
    const mail = server.messages.find((m) => m.subject === 'Your basic bandwidth is used up');
    expect(mail?.text).toContain('is used up: 0 MB of 12 MB left');
    expect(mail?.text).toContain('Auto-refill is on');
    expect(mail?.text).not.toContain('turn on auto-refill');
  });

  it('never alerts a product without a purchase', async () => {
    const account = await accountWithBandwidth(db.pool);
    expect((await draw(account.id, 'gw', MB)).out_lease_id).toBeNull();
    await balanceSweepJob.run(ctx);
    expect(await outbox(account.id, 'low_bandwidth')).toEqual([]);
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

  it('formats remaining bandwidth in a unit that shows it', () => {
    expect(formatBytes(0)).toBe('0 MB');
    expect(formatBytes(1)).toBe('less than 0.1 MB');
    expect(formatBytes(30 * MB)).toBe('30 MB');
    expect(formatBytes(999_999_999)).toBe('999.99 MB');
    expect(formatBytes(GB)).toBe('1 GB');
    expect(formatBytes(1.5 * GB)).toBe('1.5 GB');
  });
});

async function until(check: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}
