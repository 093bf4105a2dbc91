// POST /api/v1/purchases: a customer buys bandwidth, credited exactly once per Idempotency-Key,
// bounded by the limits per purchase and per day and by the credit limit; through the real API and
// database (limits set low for the test: 50 GB per purchase, 60 GB per day).
import { describe, expect, test } from '@jest/globals';
import { accountWithBandwidth, exampleEmail } from '#test/fixtures.ts';
import { adminOf, call, newAccountVia, useTestApi } from '#test/api.ts';
import { setBillingClock } from '#test/billing.ts';
import { AppError } from '#common/errors.ts';
import { buyAsCustomer } from './service.ts';

const LIMITS = { perPurchaseGb: 50, perDayGb: 60 };
const fx = useTestApi({
  env: {
    PROXYFLEET_PURCHASE_MAX_GB: String(LIMITS.perPurchaseGb),
    PROXYFLEET_PURCHASE_DAILY_MAX_GB: String(LIMITS.perDayGb),
  },
});
const admin = adminOf(fx);

const newAccount = () => newAccountVia(fx, exampleEmail());

const buy = (apiKey: string, body: unknown, key?: string) =>
  call(fx.api.url, '/api/v1/purchases', {
    key: apiKey,
    body,
    headers: key === undefined ? {} : { 'Idempotency-Key': key },
  });

async function totalBytes(accountId: string, product: string): Promise<number> {
  const { rows } = await fx.db.pool.query<{ total_bytes: string }>(
    'SELECT total_bytes FROM balances WHERE account_id = $1 AND product = $2',
    [accountId, product],
  );
  return Number(rows[0]?.total_bytes ?? 0);
}

describe('POST /api/v1/purchases', () => {
  test('buys: an invoice billed later, the bandwidth at once; the same key again is the same answer', async () => {
    const account = await newAccount();
    const first = await buy(account.apiKey, { product: 'basic', gb: 2.5 }, 'order-1');
    expect(first).toMatchObject({
      status: 201,
      body: {
        product: 'basic',
        gb: 2.5,
        bytes: 2_500_000_000,
        amount: 5,
        amountCents: 500,
        currency: 'USD',
        source: 'purchase',
        status: 'issued',
        paidAt: null,
      },
    });
    expect(first.headers.get('idempotent-replayed')).toBe('false');
    const usage = await call(fx.api.url, '/api/v1/usage', { key: account.apiKey });
    expect(usage.body.products.basic).toMatchObject({ totalGb: 2.5, remainingGb: 2.5 });

    const again = await buy(account.apiKey, { product: 'basic', gb: 2.5 }, 'order-1');
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await totalBytes(account.id, 'basic')).toBe(2_500_000_000);

    for (const other of [
      { product: 'basic', gb: 3 },
      { product: 'mobile', gb: 2.5 },
    ]) {
      expect(await buy(account.apiKey, other, 'order-1')).toMatchObject({
        status: 422,
        body: { success: false, error: 'This idempotency key was used for a different purchase' },
      });
    }
    expect(await totalBytes(account.id, 'basic')).toBe(2_500_000_000);
    expect(await totalBytes(account.id, 'mobile')).toBe(0);

    const audit = await admin(`/accounts/${account.id}/audit-log`);
    const bought = audit.body.entries.filter((e: { action: string }) => e.action === 'purchase.created');
    expect(bought).toEqual([
      expect.objectContaining({ actor: expect.objectContaining({ kind: 'api_key' }) }),
    ]);
    const invoices = await call(fx.api.url, '/api/v1/invoices', { key: account.apiKey });
    const { success, ...invoice } = first.body as { success: boolean };
    expect([success, invoices.body.invoices]).toEqual([true, [invoice]]);
  });

  test('two requests at once with one key credit once and answer the same invoice', async () => {
    const account = await newAccount();
    // Several rounds: each is a race of its own between the two requests.
    for (let round = 0; round < 5; round++) {
      const key = `tabs-${round}`;
      const answers = await Promise.all([
        buy(account.apiKey, { product: 'mobile', gb: 1 }, key),
        buy(account.apiKey, { product: 'mobile', gb: 1 }, key),
      ]);
      expect(answers.map((a) => a.status)).toEqual([201, 201]);
      expect(answers[0].body.id).toBe(answers[1].body.id);
      expect(answers.map((a) => a.headers.get('idempotent-replayed')).sort()).toEqual(['false', 'true']);
      expect(await totalBytes(account.id, 'mobile')).toBe((round + 1) * 1e9);
    }
  });

  test('a key another product races for under the same key buys once', async () => {
    const account = await newAccount();
    const answers = await Promise.all([
      buy(account.apiKey, { product: 'basic', gb: 1 }, 'race'),
      buy(account.apiKey, { product: 'light', gb: 1 }, 'race'),
    ]);
    expect(answers.map((a) => a.status).sort()).toEqual([201, 422]);
    expect((await totalBytes(account.id, 'basic')) + (await totalBytes(account.id, 'light'))).toBe(1e9);
  });

  test('limits: per purchase (400), per day (409, naming what is left), nothing bought when refused', async () => {
    const account = await newAccount();
    expect(await buy(account.apiKey, { product: 'light', gb: 50.5 }, 'big')).toMatchObject({
      status: 400,
      body: { error: 'Invalid request: gb: must be at most 50' },
    });
    expect((await buy(account.apiKey, { product: 'light', gb: 50 }, 'a')).status).toBe(201);
    expect(await buy(account.apiKey, { product: 'datacenter', gb: 10.5 }, 'b')).toMatchObject({
      status: 409,
      body: { error: 'Purchases are limited to 60 GB a day; 10 GB can still be bought today' },
    });
    expect((await buy(account.apiKey, { product: 'datacenter', gb: 10 }, 'c')).status).toBe(201);
    // An operator's purchase is not the customer's own: not counted by the daily limit.
    expect(
      (await admin(`/accounts/${account.id}/purchases`, { body: { product: 'light', gb: 5 } })).status,
    ).toBe(201);
    expect(await totalBytes(account.id, 'datacenter')).toBe(10e9);
    // The next UTC day starts over (the billing clock moved forward a day).
    await setBillingClock(fx.db.pool, '1 day');
    try {
      expect((await buy(account.apiKey, { product: 'datacenter', gb: 1 }, 'd')).status).toBe(201);
    } finally {
      await setBillingClock(fx.db.pool, null);
    }
  });

  test('the credit limit refuses a purchase; marking an invoice paid lets the account buy again', async () => {
    const account = await newAccount();
    await admin(`/accounts/${account.id}/credit-limit`, { method: 'PUT', body: { limit: 20 } });
    const first = await buy(account.apiKey, { product: 'basic', gb: 10 }, 'one');
    expect(first.body).toMatchObject({ amountCents: 2000 });
    expect(await buy(account.apiKey, { product: 'basic', gb: 0.001 }, 'two')).toMatchObject({
      status: 409,
      body: {
        error:
          'This purchase would pass the monthly credit limit of 20.00 USD; available this month: 0.00 USD',
      },
    });
    expect(await totalBytes(account.id, 'basic')).toBe(10e9);
    expect((await admin(`/invoices/${first.body.id}/paid`, { method: 'POST' })).status).toBe(200);
    expect(await buy(account.apiKey, { product: 'basic', gb: 0.001 }, 'two')).toMatchObject({ status: 201 });
  });

  test.each([
    ['no Idempotency-Key', undefined, 'Invalid request: Idempotency-Key: is required'],
    ['an empty one', '', 'Invalid request: Idempotency-Key: is required'],
    ['one too long', 'k'.repeat(201), 'Invalid request: Idempotency-Key: must be at most 200 characters'],
  ])('%s is 400 and buys nothing', async (_what, key, error) => {
    const account = await newAccount();
    expect(await buy(account.apiKey, { product: 'basic', gb: 1 }, key)).toMatchObject({
      status: 400,
      body: { success: false, error },
    });
    expect(await totalBytes(account.id, 'basic')).toBe(0);
  });

  test.each([
    [{ product: 'gold', gb: 1 }, 'product: must be one of'],
    [{ product: 'basic', gb: 0 }, 'gb: must be'],
    [{ product: 'basic', gb: '1' }, 'gb: must be a number'],
    [{ product: 'basic' }, 'gb: is required'],
    [{ product: 'basic', gb: 1, price: 0 }, 'price: unknown field'],
    [{ product: 'basic', gb: 1e-10 }, 'gb: must be at least one byte'],
  ])('%j is 400', async (body, error) => {
    const account = await newAccount();
    const res = await buy(account.apiKey, body, 'x');
    expect(res.status).toBe(400);
    expect(res.body.error).toContain(error);
  });

  test('a suspended account cannot buy: its key is refused, and the service refuses it too', async () => {
    const account = await newAccount();
    expect((await admin(`/accounts/${account.id}/suspend`, { method: 'POST' })).status).toBe(200);
    expect((await buy(account.apiKey, { product: 'basic', gb: 1 }, 'k')).status).toBe(401);
    // Suspended between the key check and the purchase (the dashboard's session): refused in the transaction.
    const bought = buyAsCustomer(fx.db.pool, LIMITS, {
      accountId: account.id,
      product: 'basic',
      gb: 1,
      idempotencyKey: 'k',
      actor: { kind: 'system', id: 'test' },
    });
    await expect(bought).rejects.toEqual(new AppError('ACCOUNT_SUSPENDED'));
    expect(await totalBytes(account.id, 'basic')).toBe(0);
  });

  test("a customer's key cannot take the key of a purchase the platform makes", async () => {
    const account = await accountWithBandwidth(fx.db.pool);
    const res = await buy(account.apiKey, { product: 'basic', gb: 1 }, 'auto-refill:basic:crossing:1');
    expect(res.status).toBe(201);
    const { rows } = await fx.db.pool.query<{ idempotency_key: string }>(
      'SELECT idempotency_key FROM purchases WHERE account_id = $1',
      [account.id],
    );
    expect(rows).toEqual([{ idempotency_key: 'customer:auto-refill:basic:crossing:1' }]);
  });
});
