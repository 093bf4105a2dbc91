// The credit limit for bill-later payment (docs/api.md "Credit limit"): an auto-refill paid by
// invoice that would pass it is not bought (the "auto-refill failed" email says why, through a real
// SMTP server, and traffic stops as without auto-refill); operator purchases are not limited but
// counted; a new month starts from zero; the default comes from the worker's configuration.
import { describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { readCredit, setCreditLimit, syncCreditDefault } from '#common/billing/credit.ts';
import { listInvoices } from '#common/billing/invoices.ts';
import { recordPurchase } from '#common/billing/purchases.ts';
import { useJobContext } from '#test/worker.ts';
import { accountWithBandwidth, accountWithAutoRefill, enableAutoRefill } from '#test/fixtures.ts';
import { foldAll, nextMonthOffset, setBillingClock, SimGateway } from '#test/billing.ts';
import { addresses } from '#test/smtp.ts';
import { balanceSweepJob } from './auto-refill.ts';
import { emailSenderJob } from './email.ts';

const MB = 1e6;
const GB = 1e9;

const fx = useJobContext();

const failed = async (accountId: string) =>
  (
    await fx.db.pool.query<{ status: string; error: string }>(
      `SELECT status, error FROM auto_refills WHERE account_id = $1 ORDER BY created_at`,
      [accountId],
    )
  ).rows;

describe('credit limit', () => {
  it('refillGb 1,000,000 with maxRefillsPerMonth 100 buys nothing past the limit: no 2,000,000.00 USD invoice', async () => {
    const account = await accountWithAutoRefill(fx.db.pool, 30 * MB, {
      thresholdGb: 0.02,
      refillGb: 1_000_000,
      maxRefillsPerMonth: 100,
    });
    const gw = new SimGateway(fx.db.pool, 'gw', account.id);
    // Traffic stops as without auto-refill: at the 30 MB bought.
    expect(await gw.relay(40 * MB, 4 * MB)).toBe(30 * MB);
    await gw.flush(true);
    await foldAll(fx.db.pool);
    await balanceSweepJob.run(fx.ctx);
    const { invoices } = await listInvoices(fx.db.pool, account.id, { limit: 10 });
    expect(invoices.map((i) => [i.source, i.amount])).toEqual([['purchase', 0.06]]);
    expect(await failed(account.id)).toEqual([
      {
        status: 'failed',
        error:
          'it would pass the credit limit of 1000.00 USD for this month: 0.06 USD billed so far, 2000000.00 USD more',
      },
    ]);
    await emailSenderJob({
      smtpUrl: fx.smtp.url,
      from: 'proxyfleet <alerts@localhost>',
      logger: fx.ctx.logger,
      registry: new Registry(),
    }).run(fx.ctx);
    const mail = fx.smtp.messages.find(
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
    const account = await accountWithBandwidth(fx.db.pool, { basic: 10 * MB });
    // 600 GB at 2 USD: 1,200 USD, past the 1,000 USD default, and bought all the same.
    await recordPurchase(fx.db.pool, { accountId: account.id, product: 'mobile', bytes: 150 * GB });
    expect(await readCredit(fx.db.pool, account.id)).toMatchObject({
      limit: 1000,
      usedThisMonth: 1200.02,
      available: 0,
      currency: 'USD',
      default: true,
    });
    await enableAutoRefill(fx.db.pool, account.id, {
      thresholdGb: 0.004,
      refillGb: 0.01,
      maxRefillsPerMonth: 5,
    });
    const gw = new SimGateway(fx.db.pool, 'gw', account.id);
    expect(await gw.relay(20 * MB, 2 * MB)).toBe(10 * MB);
    expect(await failed(account.id)).toMatchObject([{ status: 'failed' }]);
    expect(await setCreditLimit(fx.db.pool, account.id, 500_000)).toMatchObject({
      limit: 5000,
      default: false,
    });
    // The refused crossing stays refused; a purchase re-arms, and the next crossings buy (at 16
    // and 26 MB used of 20 and 30 MB).
    await recordPurchase(fx.db.pool, { accountId: account.id, product: 'basic', bytes: 10 * MB });
    expect(await gw.relay(20 * MB, 2 * MB)).toBe(20 * MB);
    expect((await failed(account.id)).map((r) => r.status)).toEqual(['failed', 'succeeded', 'succeeded']);
    try {
      await setBillingClock(fx.db.pool, await nextMonthOffset(fx.db.pool));
      expect(await readCredit(fx.db.pool, account.id)).toMatchObject({ usedThisMonth: 0, available: 5000 });
    } finally {
      await setBillingClock(fx.db.pool, null);
    }
    expect(await setCreditLimit(fx.db.pool, account.id, null)).toMatchObject({ limit: 1000, default: true });
  });

  it('the default is the configured one (the worker writes it at start)', async () => {
    const account = await accountWithBandwidth(fx.db.pool);
    try {
      await syncCreditDefault(fx.db.pool, 250_050);
      expect(await readCredit(fx.db.pool, account.id)).toMatchObject({ limit: 2500.5, default: true });
    } finally {
      await syncCreditDefault(fx.db.pool, 100_000);
    }
  });
});
