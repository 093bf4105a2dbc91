import { describe, expect, it } from '@jest/globals';
import { ispPricesPerMonth } from './prices.ts';

describe('PROXYFLEET_ISP_PRICES', () => {
  it('is 5 per proxy-month for every country by default; countries override, * sets the rest', () => {
    expect(ispPricesPerMonth.parse(undefined)).toEqual({ '*': 5 });
    expect(ispPricesPerMonth.parse('US=6.5, de=4, *=3')).toEqual({ '*': 3, us: 6.5, de: 4 });
  });

  it('reports every bad entry', () => {
    const r = ispPricesPerMonth.safeParse('usa=1,de=-1,fr=,it=2=3,es=x');
    expect(r.success).toBe(false);
    expect(r.error?.issues).toHaveLength(5);
  });

  it('is an amount in whole cents: a fraction of a cent is refused, not rounded (docs/adr/0091)', () => {
    expect(ispPricesPerMonth.parse('us=6.99,de=0.01')).toEqual({ '*': 5, us: 6.99, de: 0.01 });
    const r = ispPricesPerMonth.safeParse('us=6.995,de=0.004');
    expect(r.error?.issues.map((i) => i.message)).toEqual([
      '"us=6.995": want country=price, country two letters or *, price 0..1000000 in whole cents',
      '"de=0.004": want country=price, country two letters or *, price 0..1000000 in whole cents',
    ]);
  });
});
