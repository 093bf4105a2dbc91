// The billing routes a customer or an operator may send twice at once, raced over HTTP as
// api/src/concurrency.int.test.ts races the others (#test/races.ts): customer purchases under one
// Idempotency-Key, an invoice marked paid and void at once, billing details written twice. No 5xx,
// only documented statuses, and the invariants: a key buys once, an invoice settles once.
import { describe, expect, test } from '@jest/globals';
import { accountWithBandwidth, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { call, type CallOptions, useTestApi } from '#test/api.ts';
import { count, race, RACED_IN_BILLING, runRace, type Race } from '#test/races.ts';

const fx = useTestApi({
  env: { PROXYFLEET_RATE_LIMIT_PER_MINUTE: '1000000', PROXYFLEET_RATE_LIMIT_BURST: '100000' },
});
const GB = 1_000_000_000;
const api = (key: string, path: string, options: CallOptions = {}) =>
  call(fx.api.url, `/api/v1${path}`, { key, ...options });
const admin = (path: string, options: CallOptions = {}) =>
  call(fx.api.url, `/admin/v1${path}`, { admin: TEST_ADMIN_TOKEN, ...options });
const account = () => accountWithBandwidth(fx.db.pool);
const buy = (apiKey: string, key: string, body: object) =>
  api(apiKey, '/purchases', { body, headers: { 'Idempotency-Key': key } });
const settlements = async (accountId: string) =>
  (
    await fx.db.pool.query(`SELECT 1 FROM audit_log WHERE account_id = $1 AND action LIKE 'invoice.%'`, [
      accountId,
    ])
  ).rowCount;

const CASES: Race<unknown>[] = [
  race({
    name: 'customer purchases: one key three times, another body under it, and a second key',
    covers: ['POST /api/v1/purchases'],
    setup: () => account(),
    racers: (a, round) => {
      const key = `order-${round}`;
      return [
        [[201, 422], () => buy(a.apiKey, key, { product: 'mobile', gb: 2 })],
        [[201, 422], () => buy(a.apiKey, key, { product: 'mobile', gb: 2 })],
        [[201, 422], () => buy(a.apiKey, key, { product: 'mobile', gb: 3 })],
        [[201], () => buy(a.apiKey, `other-${round}`, { product: 'mobile', gb: 1 })],
      ];
    },
    check: async (a, results) => {
      const keyed = results.slice(0, 3);
      const winner = keyed.find((r) => r.status === 201)!;
      for (const r of keyed) if (r.status === 201) expect(r.body.id).toBe(winner.body.id);
      expect(count(keyed, 422)).toBe(winner.body.gb === 2 ? 1 : 2);
      const { rows } = await fx.db.pool.query<{ total_bytes: string }>(
        `SELECT total_bytes FROM balances WHERE account_id = $1 AND product = 'mobile'`,
        [a.id],
      );
      expect(Number(rows[0]!.total_bytes)).toBe((winner.body.gb + 1) * GB);
    },
  }),
  race({
    name: 'one invoice marked paid twice and void twice at once: one settlement wins',
    covers: ['POST /admin/v1/invoices/:invoiceId/paid', 'POST /admin/v1/invoices/:invoiceId/void'],
    setup: async () => {
      const a = await account();
      const bought = await admin(`/accounts/${a.id}/purchases`, { body: { product: 'basic', gb: 1 } });
      return { a, invoiceId: bought.body.id as string };
    },
    racers: ({ invoiceId }) =>
      (['paid', 'void', 'paid', 'void'] as const).map((to) => [
        [200, 409],
        () => admin(`/invoices/${invoiceId}/${to}`, { method: 'POST' }),
      ]),
    check: async ({ a }, results) => {
      const won = results[0]!.status === 200 ? 'paid' : 'void';
      for (const r of results) if (r.status === 200) expect(r.body.status).toBe(won);
      expect(count(results, 200)).toBe(2);
      expect(await settlements(a.id)).toBe(1);
    },
  }),
  race({
    name: 'billing details written twice at once: one of them stays, both audited',
    covers: ['PUT /api/v1/billing-details'],
    setup: () => account(),
    racers: (a) =>
      ['First AB', 'Second AB'].map((company) => [
        [200],
        () => api(a.apiKey, '/billing-details', { method: 'PUT', body: { company, address: '', vatId: '' } }),
      ]),
    check: async (a) => {
      const now = await api(a.apiKey, '/billing-details');
      expect(['First AB', 'Second AB']).toContain(now.body.company);
      const audited = await fx.db.pool.query(
        `SELECT 1 FROM audit_log WHERE account_id = $1 AND action = 'billing_details.changed'`,
        [a.id],
      );
      expect(audited.rowCount).toBe(2);
    },
  }),
];

describe('billing routes raced over HTTP', () => {
  test('the cases cover exactly the routes RACED_IN_BILLING names', () => {
    expect(CASES.flatMap((c) => c.covers).sort()).toEqual([...RACED_IN_BILLING].sort());
  });

  test.each(CASES.map((c) => [c.name, c] as const))('%s', async (_, c) => {
    expect(await runRace(c)).toEqual([]);
  });
});
