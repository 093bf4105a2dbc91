// The price table: per product, the price of one GB in the smallest currency unit's hundredth
// (cents). Configured with PROXYFLEET_PRICES_PER_GB ("basic=2.5,mobile=8", in currency units per
// GB, overriding the defaults below) and PROXYFLEET_CURRENCY; the worker writes it to
// product_prices at start, where purchase_record (migrations/0060) prices each invoice.
import { z } from 'zod';
import { withTransaction, type Pool, type PoolClient } from '../db/pool.ts';
import { PRODUCTS, isProduct, type Product } from '../products.ts';

/** Defaults, in currency units per GB (docs/api.md "Invoices"); the migration seeds the same. */
export const DEFAULT_PRICES_PER_GB: Readonly<Record<Product, number>> = {
  light: 1,
  basic: 2,
  advanced: 3,
  mobile: 8,
  datacenter: 0.5,
};

export interface PriceTable {
  currency: string;
  /** Currency units per GB. */
  perGb: Readonly<Record<Product, number>>;
}

/** "basic=2.5,mobile=8" -> the defaults with those overridden; every problem is reported. */
export const pricesPerGb = z
  .string()
  .default('')
  .transform((text, ctx) => {
    const perGb: Record<Product, number> = { ...DEFAULT_PRICES_PER_GB };
    for (const part of text
      .split(',')
      .map((p) => p.trim())
      .filter(Boolean)) {
      const [name, value, extra] = part.split('=').map((p) => p.trim());
      const price = Number(value);
      if (
        !isProduct(name) ||
        extra !== undefined ||
        value === undefined ||
        value === '' ||
        !Number.isFinite(price) ||
        price < 0 ||
        price > 1_000_000
      ) {
        ctx.addIssue({
          code: 'custom',
          message: `"${part}": want product=price, product one of ${PRODUCTS.join(', ')}, price 0..1000000`,
        });
        continue;
      }
      perGb[name] = price;
    }
    return perGb;
  });

export const currency = z
  .string()
  .regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code such as USD')
  .default('USD');

/**
 * One currency for every amount (docs/adr/0091): once invoices exist, the price tables' currency is
 * fixed. A configured currency other than the invoices' one is refused (nothing is written, the old
 * table stays): converting amounts is a decision for an operator, not a relabelling. Holds new
 * invoices back (a share lock on invoices, for the few milliseconds of the write), so the very first
 * invoice cannot slip in between the check and the change.
 */
async function refuseCurrencyChange(client: PoolClient, currency: string): Promise<void> {
  await client.query('LOCK TABLE invoices IN SHARE MODE');
  const { rows } = await client.query<{ currency: string; accounts: number }>(
    `SELECT currency, count(DISTINCT account_id)::int AS accounts FROM invoices WHERE currency <> $1
      GROUP BY currency ORDER BY currency`,
    [currency],
  );
  if (rows.length)
    throw new Error(
      `PROXYFLEET_CURRENCY=${currency} refused: ${rows
        .map((r) => `${r.accounts} account(s) have invoices in ${r.currency}`)
        .join(', ')}; an account's currency is fixed at its first invoice (docs/adr/0091)`,
    );
}

/** Writes the configured table to product_prices (new invoices use it; old ones keep theirs). */
export async function syncPrices(pool: Pool, table: PriceTable): Promise<void> {
  await withTransaction(pool, async (client) => {
    await refuseCurrencyChange(client, table.currency);
    await client.query(
      `INSERT INTO product_prices (product, cents_per_gb, currency)
       SELECT p, c, $3 FROM unnest($1::text[], $2::numeric[]) AS x (p, c)
       ON CONFLICT (product) DO UPDATE SET cents_per_gb = EXCLUDED.cents_per_gb, currency = EXCLUDED.currency, updated_at = now()
        WHERE product_prices.cents_per_gb <> EXCLUDED.cents_per_gb OR product_prices.currency <> EXCLUDED.currency`,
      [PRODUCTS, PRODUCTS.map((p) => Math.round(table.perGb[p] * 100 * 1e6) / 1e6), table.currency],
    );
  });
}

/** The default price of an ISP proxy per month, in currency units, for countries without their own. */
export const DEFAULT_ISP_PRICE_PER_MONTH = 5;

/**
 * ISP proxy prices per proxy and month (docs/billing.md "Prices"): "*=5,us=6,de=5.5", in currency
 * units; `*` is every country without its own (default 5). Every problem is reported.
 */
export const ispPricesPerMonth = z
  .string()
  .default('')
  .transform((text, ctx) => {
    const prices: Record<string, number> = { '*': DEFAULT_ISP_PRICE_PER_MONTH };
    for (const part of text
      .split(',')
      .map((p) => p.trim())
      .filter(Boolean)) {
      const [country, value, extra] = part.split('=').map((p) => p.trim().toLowerCase());
      const price = Number(value);
      if (
        country === undefined ||
        !/^([a-z]{2}|\*)$/.test(country) ||
        extra !== undefined ||
        value === undefined ||
        value === '' ||
        !Number.isFinite(price) ||
        price < 0 ||
        price > 1_000_000 ||
        Math.abs(Math.round(price * 100) - price * 100) > 1e-6
      ) {
        ctx.addIssue({
          code: 'custom',
          message: `"${part}": want country=price, country two letters or *, price 0..1000000 in whole cents`,
        });
        continue;
      }
      prices[country] = price;
    }
    return prices;
  });

/** Writes the ISP price table (renewals use it; issued invoices keep their amount). */
export async function syncIspPrices(pool: Pool, prices: Readonly<Record<string, number>>, currency: string) {
  const countries = Object.keys(prices);
  await withTransaction(pool, async (client) => {
    await refuseCurrencyChange(client, currency);
    await client.query(
      `WITH wanted AS (SELECT c, round(p * 100)::bigint AS cents FROM unnest($1::text[], $2::numeric[]) AS x (c, p)),
            gone AS (DELETE FROM isp_proxy_prices WHERE country <> ALL($1::text[]))
       INSERT INTO isp_proxy_prices (country, cents_per_month, currency) SELECT c, cents, $3 FROM wanted
       ON CONFLICT (country) DO UPDATE SET cents_per_month = EXCLUDED.cents_per_month, currency = EXCLUDED.currency,
          updated_at = now()
        WHERE isp_proxy_prices.cents_per_month <> EXCLUDED.cents_per_month OR isp_proxy_prices.currency <> EXCLUDED.currency`,
      [countries, countries.map((c) => prices[c]), currency],
    );
  });
}
