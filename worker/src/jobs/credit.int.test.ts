// The credit limit for bill-later payment (docs/api.md "Credit limit"): an auto-refill paid by
// invoice that would pass it is not bought (the "auto-refill failed" email says why, through a real
// SMTP server, and traffic stops as without auto-refill); operator purchases are not limited but
// counted; a new month starts from zero; the default comes from the worker's configuration.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { readCredit, setCreditLimit, syncCreditDefault } from '#common/billing/credit.ts';
import { listInvoices } from '#common/billing/invoices.ts';
import { recordPurchase } from '#common/billing/purchases.ts';
import { createLogger } from '#common/logger.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth, accountWithAutoRefill, enableAutoRefill } from '#test/fixtures.ts';
import { foldAll, nextMonthOffset, setBillingClock, SimGateway } from '#test/billing.ts';
import { addresses, startTestSmtpServer, type TestSmtpServer } from '#test/smtp.ts';
import type { JobContext } from '../jobs.ts';
import { balanceSweepJob } from './auto-refill.ts';
import { emailSenderJob } from './email.ts';

const MB = 1e6;
const GB = 1e9;

let db: TestDatabase;
let ctx: JobContext;
let server: TestSmtpServer;

beforeAll(async () => {
  db = await createTestDatabase();
  ctx = { pool: db.pool, logger: createLogger('test', 'silent') };
  server = await startTestSmtpServer();
});
afterAll(async () => {
  await server.close();
  await db.drop();
});

const failed = async (accountId: string) =>
  (
    await db.pool.query<{ status: string; error: string }>(
      `SELECT status, error FROM auto_refills WHERE account_id = $1 ORDER BY created_at`,
      [accountId],
    )
  ).rows;

describe('credit limit', () => {
  it('refillGb 1,000,000 with maxRefillsPerMonth 100 buys nothing past the limit: no 2,000,000.00 USD invoice', async () => {
    const account = await accountWithAutoRefill(db.pool, 30 * MB, {
      thresholdGb: 0.02,
      refillGb: 1_000_000,
      maxRefillsPerMonth: 100,
    });
    const gw = new SimGateway(db.pool, 'gw', account.id);
    // Traffic stops as without auto-refill: at the 30 MB bought.
    expect(await gw.relay(40 * MB, 4 * MB)).toBe(30 * MB);
    await gw.flush(true);
    await foldAll(db.pool);
    await balanceSweepJob.run(ctx);
    const { invoices } = await listInvoices(db.pool, account.id, { limit: 10 });
    expect(invoices.map((i) => [i.source, i.amount])).toEqual([['purchase', 0.06]]);
    expect(await failed(account.id)).toEqual([
      {
        status: 'failed',
        error:
          'it would pass the credit limit of 1000.00 USD for this month: 0.06 USD billed so far, 2000000.00 USD more',
      },
    ]);
    await emailSenderJob({
      smtpUrl: server.url,
      from: 'proxyfleet <alerts@localhost>',
      logger: ctx.logger,
      registry: new Registry(),
    }).run(ctx);
    const mail = server.messages.find(
      (m) => addresses(m.to).includes(account.email) && m.subject === 'Auto-refill of basic bandwidth failed',
    );
    expect(mail?.text).toContain(
      'Auto-refill did not buy 1,000,000 GB of basic bandwidth: it would pass the credit limit of 1000.00 USD',
    );
    expect(mail?.text).toContain(
      'Nothing was bought. basic traffic stops when the remaining bandwidth runs out',
    );
  });

  it('operator purchases are not limited but counted; a higher limit lets the next crossing buy; a new month starts at zero', async () => {
    const account = await accountWithBandwidth(db.pool, { basic: 10 * MB });
    // 600 GB at 2 USD: 1,200 USD, past the 1,000 USD default, and bought all the same.
    await recordPurchase(db.pool, { accountId: account.id, product: 'mobile', bytes: 150 * GB });
    expect(await readCredit(db.pool, account.id)).toMatchObject({
      limit: 1000,
      usedThisMonth: 1200.02,
      available: 0,
      currency: 'USD',
      default: true,
    });
    await enableAutoRefill(db.pool, account.id, {
      thresholdGb: 0.004,
      refillGb: 0.01,
      maxRefillsPerMonth: 5,
    });
    const gw = new SimGateway(db.pool, 'gw', account.id);
    expect(await gw.relay(20 * MB, 2 * MB)).toBe(10 * MB);
    expect(await failed(account.id)).toMatchObject([{ status: 'failed' }]);
    expect(await setCreditLimit(db.pool, account.id, 500_000)).toMatchObject({ limit: 5000, default: false });
    // The refused crossing stays refused; a purchase re-arms, and the next crossings buy (at 16
    // and 26 MB used of 20 and 30 MB).
    await recordPurchase(db.pool, { accountId: account.id, product: 'basic', bytes: 10 * MB });
    expect(await gw.relay(20 * MB, 2 * MB)).toBe(20 * MB);
    expect((await failed(account.id)).map((r) => r.status)).toEqual(['failed', 'succeeded', 'succeeded']);
    try {
      await setBillingClock(db.pool, await nextMonthOffset(db.pool));
      expect(await readCredit(db.pool, account.id)).toMatchObject({ usedThisMonth: 0, available: 5000 });
    } finally {
      await setBillingClock(db.pool, null);
    }
    expect(await setCreditLimit(db.pool, account.id, null)).toMatchObject({ limit: 1000, default: true });
  });

  it('the default is the configured one (the worker writes it at start)', async () => {
    const account = await accountWithBandwidth(db.pool);
    try {
      await syncCreditDefault(db.pool, 250_050);
      expect(await readCredit(db.pool, account.id)).toMatchObject({ limit: 2500.5, default: true });
    } finally {
      await syncCreditDefault(db.pool, 100_000);
    }
  });
});
