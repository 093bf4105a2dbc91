// Money that cannot round to free (docs/adr/0091): one rounding rule, a fraction of a cent rounded
// up, for auto-refills and operator purchases alike; one currency for every amount: a change of
// PROXYFLEET_CURRENCY is refused once invoices exist, and the credit limit adds only the amounts in
// its own currency.
import { describe, expect, it } from '@jest/globals';
import { readCredit } from '#common/billing/credit.ts';
import { listInvoices } from '#common/billing/invoices.ts';
import { DEFAULT_PRICES_PER_GB, syncIspPrices, syncPrices } from '#common/billing/prices.ts';
import { recordPurchase } from '#common/billing/purchases.ts';
import { useJobContext } from '#test/worker.ts';
import { accountWithAutoRefill, accountWithBandwidth } from '#test/fixtures.ts';
import { foldAll, SimGateway } from '#test/billing.ts';

const MB = 1e6;

const fx = useJobContext();

describe('the rounding rule: a fraction of a cent is a cent', () => {
  it('an auto-refill of 0.0024 GB of basic (0.48 cents at 2 USD/GB) is invoiced 0.01 USD, not 0.00', async () => {
    const account = await accountWithAutoRefill(fx.db.pool, 3 * MB, {
      thresholdGb: 0.001,
      refillGb: 0.0024,
      maxRefillsPerMonth: 5,
    });
    const gw = new SimGateway(fx.db.pool, 'gw-round', account.id);
    expect(await gw.relay(2.5 * MB, 0.5 * MB)).toBe(2.5 * MB);
    await gw.flush(true);
    await foldAll(fx.db.pool);
    const { invoices } = await listInvoices(fx.db.pool, account.id, { limit: 10 });
    expect(invoices.map((i) => [i.source, i.gb, i.amount, i.currency])).toEqual([
      ['auto-refill', 0.0024, 0.01, 'USD'],
      ['purchase', 0.003, 0.01, 'USD'],
    ]);
  });

  it('an operator purchase of 0.004 GB of light (0.4 cents at 1 USD/GB) is invoiced 0.01 USD, not 0.00', async () => {
    const account = await accountWithBandwidth(fx.db.pool, {});
    const invoice = await recordPurchase(fx.db.pool, {
      accountId: account.id,
      product: 'light',
      bytes: 4 * MB,
    });
    expect([invoice.amountCents, invoice.currency]).toEqual([1, 'USD']);
    // 1.0001 GB of light is 100.01 cents: up to 101, never down to 100.
    const more = await recordPurchase(fx.db.pool, {
      accountId: account.id,
      product: 'light',
      bytes: 1_000_100_000,
    });
    expect(more.amountCents).toBe(101);
  });
});

describe('one currency', () => {
  it('PROXYFLEET_CURRENCY changed after invoices exist is refused, and prices stay in the old currency', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 500 * MB });
    const eur = { currency: 'EUR', perGb: DEFAULT_PRICES_PER_GB };
    await expect(syncPrices(fx.db.pool, eur)).rejects.toThrow(
      /^PROXYFLEET_CURRENCY=EUR refused: \d+ account\(s\) have invoices in USD; an account's currency is fixed at its first invoice/,
    );
    await expect(syncIspPrices(fx.db.pool, { '*': 5 }, 'EUR')).rejects.toThrow(
      /PROXYFLEET_CURRENCY=EUR refused/,
    );
    const next = await recordPurchase(fx.db.pool, {
      accountId: account.id,
      product: 'basic',
      bytes: 500 * MB,
    });
    expect([next.amountCents, next.currency]).toEqual([100, 'USD']);
    expect(await readCredit(fx.db.pool, account.id)).toMatchObject({ usedThisMonth: 2, currency: 'USD' });
    const { rows } = await fx.db.pool.query<{ currency: string }>(
      'SELECT DISTINCT currency FROM product_prices UNION SELECT DISTINCT currency FROM isp_proxy_prices',
    );
    expect(rows).toEqual([{ currency: 'USD' }]);
  });

  it('the credit limit adds only the amounts in its currency: an invoice in another one is not summed into it', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 500 * MB });
    const other = await recordPurchase(fx.db.pool, {
      accountId: account.id,
      product: 'basic',
      bytes: 1500 * MB,
    });
    // An invoice in another currency (as a database written before the refusal above can hold).
    await fx.db.pool.query(`UPDATE invoices SET currency = 'EUR' WHERE id = $1`, [other.id]);
    expect(await readCredit(fx.db.pool, account.id)).toMatchObject({ usedThisMonth: 1, currency: 'USD' });
  });
});
