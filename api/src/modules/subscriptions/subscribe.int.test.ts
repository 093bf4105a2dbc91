// POST /api/v1/subscriptions: a customer subscribes to a bandwidth plan or rents its own ISP
// proxies, the first month paid in the request's transaction (bill-later within the credit limit,
// or a card charged first); exactly one subscription per Idempotency-Key; refused, nothing is left
// behind. Through the real API and database (limits set low: 50 GB per purchase, 3 subscriptions).
import { describe, expect, test } from '@jest/globals';
import { periodStart } from '#common/billing/periods.ts';
import { paymentMethods, type PaymentMethod } from '#common/billing/payment.ts';
import { AppError } from '#common/errors.ts';
import { exampleEmail } from '#test/fixtures.ts';
import { adminOf, call, newAccountVia, useTestApi } from '#test/api.ts';
import { expectApiKeyOnly } from '#test/route-auth.ts';
import { subscribeAsCustomer } from './service.ts';

const LIMITS = { perPurchaseGb: 50, maxActive: 3 };
const fx = useTestApi({
  env: {
    PROXYFLEET_PURCHASE_MAX_GB: String(LIMITS.perPurchaseGb),
    PROXYFLEET_SUBSCRIPTIONS_MAX: String(LIMITS.maxActive),
  },
});
const admin = adminOf(fx);
const newAccount = () => newAccountVia(fx, exampleEmail());
const PLAN = { kind: 'bandwidth_plan', product: 'basic', gbPerPeriod: 10 };

const subscribe = (apiKey: string, body: unknown, key?: string) =>
  call(fx.api.url, '/api/v1/subscriptions', {
    key: apiKey,
    body,
    headers: key === undefined ? {} : { 'Idempotency-Key': key },
  });

const count = async (sql: string, accountId: string) =>
  Number((await fx.db.pool.query<{ n: string }>(sql, [accountId])).rows[0]!.n);
const subscriptions = (accountId: string) =>
  count('SELECT count(*) AS n FROM subscriptions WHERE account_id = $1', accountId);
const invoices = (accountId: string) =>
  count('SELECT count(*) AS n FROM invoices WHERE account_id = $1', accountId);
const totalBytes = (accountId: string) =>
  count(`SELECT coalesce(sum(total_bytes), 0) AS n FROM balances WHERE account_id = $1`, accountId);

/** ISP proxies an operator assigns to the account, oldest first: their ids. */
async function assignProxies(accountId: string, country: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await admin(`/accounts/${accountId}/isp-proxies`, {
      body: {
        host: '203.0.113.10',
        port: 8000,
        username: `u${Math.random().toString(36).slice(2)}`,
        country,
      },
    });
    if (res.status !== 201) throw new Error(`proxy not assigned: ${res.status} ${JSON.stringify(res.body)}`);
    ids.push(res.body.id as string);
  }
  return ids;
}

const linkedTo = async (ids: string[]) =>
  (
    await fx.db.pool.query<{ id: string; subscription_id: string | null }>(
      'SELECT id, subscription_id FROM isp_proxies WHERE id = ANY($1::uuid[]) ORDER BY created_at, id',
      [ids],
    )
  ).rows.map((r) => r.subscription_id);

describe('POST /api/v1/subscriptions', () => {
  test('a plan: its first month paid and its GB credited at once; the same key again is the same answer', async () => {
    const a = await newAccount();
    const first = await subscribe(a.apiKey, PLAN, 'plan-1');
    expect(first).toMatchObject({
      status: 201,
      body: {
        success: true,
        kind: 'bandwidth_plan',
        product: 'basic',
        gbPerPeriod: 10,
        status: 'active',
        autoRenew: true,
        paymentMethod: 'invoice',
        price: 20,
        currency: 'USD',
        invoiceId: expect.any(String),
      },
    });
    expect(first.headers.get('idempotent-replayed')).toBe('false');
    // Paid for a month from now: the worker renews it on the anniversary, not before.
    const { startedAt, paidUntil, nextRenewalAt } = first.body;
    expect([paidUntil, nextRenewalAt]).toEqual(
      Array(2).fill(periodStart(new Date(startedAt), 1).toISOString()),
    );
    const usage = await call(fx.api.url, '/api/v1/usage', { key: a.apiKey });
    expect(usage.body.products.basic).toMatchObject({ totalGb: 10, remainingGb: 10 });
    const listed = await call(fx.api.url, '/api/v1/invoices', { key: a.apiKey });
    expect(listed.body.invoices).toEqual([
      expect.objectContaining({
        id: first.body.invoiceId,
        source: 'renewal',
        product: 'basic',
        gb: 10,
        amount: 20,
        status: 'issued',
        subscriptionId: first.body.id,
      }),
    ]);

    const again = await subscribe(a.apiKey, PLAN, 'plan-1');
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    for (const other of [
      { ...PLAN, gbPerPeriod: 11 },
      { ...PLAN, paymentMethod: 'card' },
      { kind: 'isp_proxy', country: 'de', proxyCount: 1 },
    ])
      expect(await subscribe(a.apiKey, other, 'plan-1')).toMatchObject({
        status: 422,
        body: { success: false, error: 'This idempotency key was used for a different purchase' },
      });
    // The default spelled out is the same request.
    expect((await subscribe(a.apiKey, { ...PLAN, paymentMethod: 'invoice' }, 'plan-1')).body.id).toBe(
      first.body.id,
    );
    expect([await subscriptions(a.id), await invoices(a.id), await totalBytes(a.id)]).toEqual([1, 1, 10e9]);

    const audit = await admin(`/accounts/${a.id}/audit-log`);
    const actions = (audit.body.entries as { action: string; actor: { kind: string } }[]).map((e) => [
      e.action,
      e.actor.kind,
    ]);
    expect(actions).toEqual(
      expect.arrayContaining([
        ['subscription.created', 'api_key'],
        ['subscription.renewed', 'system'],
      ]),
    );
    const mine = await call(fx.api.url, '/api/v1/subscriptions', { key: a.apiKey });
    const { success, invoiceId, ...view } = first.body as Record<string, unknown>;
    expect([success, typeof invoiceId, mine.body.subscriptions]).toEqual([true, 'string', [view]]);
  });

  test("an ISP rental links the account's own free proxies in the country, oldest first, never another's", async () => {
    const a = await newAccount();
    const other = await newAccount();
    const theirs = await assignProxies(other.id, 'de', 2);
    const us = await assignProxies(a.id, 'us', 1);
    const de = await assignProxies(a.id, 'de', 3);
    const rented = await subscribe(a.apiKey, { kind: 'isp_proxy', country: 'de', proxyCount: 2 }, 'isp-1');
    expect(rented).toMatchObject({
      status: 201,
      body: { kind: 'isp_proxy', country: 'de', proxyCount: 2, price: 10, status: 'active' },
    });
    expect(await linkedTo(de)).toEqual([rented.body.id, rented.body.id, null]);
    expect(await linkedTo([...theirs, ...us])).toEqual([null, null, null]);
    const listed = await call(fx.api.url, '/api/v1/invoices', { key: a.apiKey });
    expect(listed.body.invoices).toEqual([
      expect.objectContaining({ id: rented.body.invoiceId, source: 'renewal', product: null, amount: 10 }),
    ]);
    const list = await call(fx.api.url, '/api/v1/proxies/list', { key: a.apiKey });
    const rentals = (list.body.proxies as { id: string; rental: { subscriptionId: string } | null }[]).filter(
      (p) => p.rental?.subscriptionId === rented.body.id,
    );
    expect(rentals.map((p) => p.id).sort()).toEqual(de.slice(0, 2).sort());

    // Two more in Germany: one is free. Refused, naming it; nothing subscribed, linked or invoiced.
    expect(
      await subscribe(a.apiKey, { kind: 'isp_proxy', country: 'de', proxyCount: 2 }, 'isp-2'),
    ).toMatchObject({
      status: 409,
      body: {
        success: false,
        error: 'Too few ISP proxies in DE to rent: 1 on this account not rented yet, 2 asked for',
      },
    });
    expect(
      await subscribe(a.apiKey, { kind: 'isp_proxy', country: 'fr', proxyCount: 1 }, 'isp-3'),
    ).toMatchObject({
      status: 409,
      body: { error: 'Too few ISP proxies in FR to rent: 0 on this account not rented yet, 1 asked for' },
    });
    expect([await subscriptions(a.id), await invoices(a.id)]).toEqual([1, 1]);
    expect(await linkedTo(de)).toEqual([rented.body.id, rented.body.id, null]);
    // The same key with the body it was refused for can be sent again once it fits.
    const last = await subscribe(a.apiKey, { kind: 'isp_proxy', country: 'de', proxyCount: 1 }, 'isp-2');
    expect(last.status).toBe(201);
    expect(await linkedTo(de)).toEqual([rented.body.id, rented.body.id, last.body.id]);
    expect(await linkedTo(theirs)).toEqual([null, null]);
  });

  test('a proxy whose rental expired can be rented again; a cancelled one only when its paid time is over', async () => {
    const a = await newAccount();
    const [proxy] = await assignProxies(a.id, 'nl', 1);
    const first = await subscribe(a.apiKey, { kind: 'isp_proxy', country: 'nl', proxyCount: 1 }, 'nl-1');
    expect(first.status).toBe(201);
    await admin(`/accounts/${a.id}/subscriptions/${first.body.id}/cancel`, { method: 'POST' });
    // Cancelled, still paid until the end of the month: not free yet.
    expect(
      (await subscribe(a.apiKey, { kind: 'isp_proxy', country: 'nl', proxyCount: 1 }, 'nl-2')).status,
    ).toBe(409);
    await fx.db.pool.query(`UPDATE subscriptions SET status = 'expired' WHERE id = $1`, [first.body.id]);
    const second = await subscribe(a.apiKey, { kind: 'isp_proxy', country: 'nl', proxyCount: 1 }, 'nl-2');
    expect(second.status).toBe(201);
    expect(await linkedTo([proxy!])).toEqual([second.body.id]);
  });

  test('the credit limit refuses the first month: 409, and no subscription, invoice, GB or link is left', async () => {
    const a = await newAccount();
    await assignProxies(a.id, 'de', 1);
    await admin(`/accounts/${a.id}/credit-limit`, { method: 'PUT', body: { limit: 21 } });
    expect((await subscribe(a.apiKey, PLAN, 'fits')).status).toBe(201);
    const refusal = {
      status: 409,
      body: {
        success: false,
        error:
          'This purchase would pass the monthly credit limit of 21.00 USD; available this month: 1.00 USD',
      },
    };
    expect(await subscribe(a.apiKey, { ...PLAN, gbPerPeriod: 1 }, 'plan-2')).toMatchObject(refusal);
    expect(
      await subscribe(a.apiKey, { kind: 'isp_proxy', country: 'de', proxyCount: 1 }, 'isp'),
    ).toMatchObject(refusal);
    expect([await subscriptions(a.id), await invoices(a.id), await totalBytes(a.id)]).toEqual([1, 1, 10e9]);
    expect(
      (
        await fx.db.pool.query(
          'SELECT 1 FROM isp_proxies WHERE account_id = $1 AND subscription_id IS NOT NULL',
          [a.id],
        )
      ).rowCount,
    ).toBe(0);
    // Paid, the invoice frees its amount: the refused request goes through under its own key.
    const [paid] = (await call(fx.api.url, '/api/v1/invoices', { key: a.apiKey })).body.invoices;
    expect((await admin(`/invoices/${paid.id}/paid`, { method: 'POST' })).status).toBe(200);
    expect((await subscribe(a.apiKey, { ...PLAN, gbPerPeriod: 1 }, 'plan-2')).status).toBe(201);
  });

  test('at most PROXYFLEET_SUBSCRIPTIONS_MAX active at once; an ended one does not count', async () => {
    const a = await newAccount();
    const made = [];
    for (let i = 0; i < LIMITS.maxActive; i++)
      made.push(await subscribe(a.apiKey, { ...PLAN, gbPerPeriod: 1 }, `k${i}`));
    expect(made.map((r) => r.status)).toEqual([201, 201, 201]);
    expect(await subscribe(a.apiKey, { ...PLAN, gbPerPeriod: 1 }, 'one-more')).toMatchObject({
      status: 409,
      body: { error: 'An account can have at most 3 subscriptions active at once' },
    });
    await admin(`/accounts/${a.id}/subscriptions/${made[0]!.body.id}/cancel`, { method: 'POST' });
    expect((await subscribe(a.apiKey, { ...PLAN, gbPerPeriod: 1 }, 'one-more')).status).toBe(201);
  });

  test('two requests at once with one key make one subscription and one invoice; another body under it is 422', async () => {
    const a = await newAccount();
    await admin(`/accounts/${a.id}/credit-limit`, { method: 'PUT', body: { limit: 1000 } });
    for (let round = 0; round < 5; round++) {
      const key = `tabs-${round}`;
      const body = { ...PLAN, gbPerPeriod: 1 };
      const answers = await Promise.all([
        subscribe(a.apiKey, body, key),
        subscribe(a.apiKey, body, key),
        subscribe(a.apiKey, { ...body, product: 'mobile' }, key),
      ]);
      const won = answers.filter((r) => r.status === 201);
      expect(answers.every((r) => r.status === 201 || r.status === 422)).toBe(true);
      expect(new Set(won.map((r) => r.body.id)).size).toBe(1);
      expect(won.filter((r) => r.headers.get('idempotent-replayed') === 'false')).toHaveLength(1);
      expect([await subscriptions(a.id), await invoices(a.id)]).toEqual([round + 1, round + 1]);
      await fx.db.pool.query(`UPDATE subscriptions SET status = 'expired' WHERE account_id = $1`, [a.id]);
    }
  });

  test.each([
    [{ kind: 'gold' }, 'kind: must be "bandwidth_plan" or "isp_proxy"'],
    [{ ...PLAN, product: 'gold' }, 'product: must be one of'],
    [{ ...PLAN, gbPerPeriod: 0 }, 'gbPerPeriod: must be at least 1'],
    [{ ...PLAN, gbPerPeriod: 1.5 }, 'gbPerPeriod: must be an integer'],
    [{ ...PLAN, gbPerPeriod: 51 }, 'gbPerPeriod: must be at most 50'],
    [{ ...PLAN, paymentMethod: 'paypal' }, 'paymentMethod: must be "invoice" or "card"'],
    [{ ...PLAN, autoRenew: false }, 'autoRenew: unknown field'],
    [{ kind: 'isp_proxy', country: 'DE', proxyCount: 1 }, 'country: must be a two-letter country code'],
    [{ kind: 'isp_proxy', country: 'de', proxyCount: 0 }, 'proxyCount: must be at least 1'],
    [{ kind: 'isp_proxy', country: 'de' }, 'proxyCount: is required'],
    [{ kind: 'isp_proxy', country: 'de', proxyCount: 1, ispProxyIds: [] }, 'ispProxyIds: unknown field'],
  ])('%j is 400 and subscribes nothing', async (body, error) => {
    const a = await newAccount();
    const res = await subscribe(a.apiKey, body, 'x');
    expect(res.status).toBe(400);
    expect(res.body.error).toContain(error);
    expect(await subscriptions(a.id)).toBe(0);
  });

  test('without an Idempotency-Key it is 400; card payments without Stripe are 409; nothing subscribed', async () => {
    const a = await newAccount();
    expect(await subscribe(a.apiKey, PLAN)).toMatchObject({
      status: 400,
      body: { error: 'Invalid request: Idempotency-Key: is required' },
    });
    expect(await subscribe(a.apiKey, { ...PLAN, paymentMethod: 'card' }, 'card')).toMatchObject({
      status: 409,
      body: { error: 'Card payments are not set up on this platform; buy billed by invoice' },
    });
    expect(await subscriptions(a.id)).toBe(0);
  });

  test('a suspended account cannot subscribe: its key is refused, and the service refuses it too', async () => {
    const a = await newAccount();
    expect((await admin(`/accounts/${a.id}/suspend`, { method: 'POST' })).status).toBe(200);
    expect((await subscribe(a.apiKey, PLAN, 'k')).status).toBe(401);
    // Suspended between the key check and the subscription (the dashboard's session): refused in the transaction.
    const refused = subscribeAsCustomer(
      { pool: fx.db.pool, methods: paymentMethods(), limits: LIMITS },
      {
        accountId: a.id,
        request: { kind: 'bandwidth_plan', product: 'basic', gbPerPeriod: 1, paymentMethod: 'invoice' },
        idempotencyKey: 'k',
        actor: { kind: 'system', id: 'test' },
      },
    );
    await expect(refused).rejects.toEqual(new AppError('ACCOUNT_SUSPENDED'));
    expect([await subscriptions(a.id), await totalBytes(a.id)]).toEqual([0, 0]);
  });

  test('only with an API key', async () => {
    await expectApiKeyOnly(fx, 'POST', '/subscriptions', PLAN);
  });
});

describe('the first month paid by a card (a payment method that charges first)', () => {
  const calls: { key: string; amountCents: number }[] = [];
  let answer: () => Promise<{ ok: true } | { ok: false; reason: string }> = () =>
    Promise.resolve({ ok: true });
  const card: PaymentMethod = {
    name: 'card',
    settlement: 'charge',
    charge: (r) => {
      calls.push({ key: r.idempotencyKey, amountCents: r.amountCents });
      return answer();
    },
  };
  const deps = () => ({ pool: fx.db.pool, methods: paymentMethods(card), limits: LIMITS });
  const withCard = async () => {
    const a = await newAccount();
    await fx.db.pool.query(
      `INSERT INTO stripe_customers (account_id, customer_id, payment_method_id, card_label) VALUES ($1, $2, 'pm_1', 'visa 4242')`,
      [a.id, `cus_${a.id.slice(0, 8)}`],
    );
    return a;
  };
  const input = (accountId: string, idempotencyKey: string) => ({
    accountId,
    request: {
      kind: 'bandwidth_plan' as const,
      product: 'basic' as const,
      gbPerPeriod: 5,
      paymentMethod: 'card' as const,
    },
    idempotencyKey,
    actor: { kind: 'system' as const, id: 'test' },
  });

  test('charged: subscribed, its invoice settled by card; the charge is keyed by the account and the key', async () => {
    const a = await withCard();
    answer = () => Promise.resolve({ ok: true });
    const { subscription, replayed } = await subscribeAsCustomer(deps(), input(a.id, 'c-1'));
    expect([replayed, subscription.paymentMethod, subscription.status]).toEqual([false, 'card', 'active']);
    expect(calls.at(-1)).toEqual({ key: `${a.id}:subscription:c-1`, amountCents: 1000 });
    const { rows } = await fx.db.pool.query('SELECT settlement, payment_method FROM invoices WHERE id = $1', [
      subscription.invoiceId,
    ]);
    expect(rows).toEqual([{ settlement: 'charged', payment_method: 'card' }]);
    expect(await totalBytes(a.id)).toBe(5e9);
  });

  test.each([
    [
      'declined',
      () => Promise.resolve({ ok: false as const, reason: 'Your card was declined.' }),
      'CARD_PAYMENT_REFUSED',
    ],
    [
      '3-D Secure asked for',
      () =>
        Promise.resolve({
          ok: false as const,
          reason: 'the card asks its holder to confirm the payment (3-D Secure)',
        }),
      'CARD_PAYMENT_REFUSED',
    ],
    ['Stripe down', () => Promise.reject(new Error('connect ECONNREFUSED')), 'PAYMENT_PROVIDER_UNAVAILABLE'],
  ])('%s: refused, nothing subscribed or credited', async (_what, refuse, code) => {
    const a = await withCard();
    answer = refuse;
    const refused = subscribeAsCustomer(deps(), input(a.id, 'c-2'));
    await expect(refused).rejects.toMatchObject({ code });
    expect([await subscriptions(a.id), await invoices(a.id), await totalBytes(a.id)]).toEqual([0, 0, 0]);
  });

  test('the refusal names what the card said', async () => {
    const a = await withCard();
    answer = () => Promise.resolve({ ok: false, reason: 'Your card was declined.' });
    await expect(subscribeAsCustomer(deps(), input(a.id, 'c-3'))).rejects.toMatchObject({
      status: 402,
      message: 'The card payment was refused (Your card was declined); nothing was bought',
    });
  });

  test('without a saved card: 409, and the card is never asked', async () => {
    const a = await newAccount();
    const before = calls.length;
    await expect(subscribeAsCustomer(deps(), input(a.id, 'c-4'))).rejects.toMatchObject({
      code: 'NO_SAVED_CARD',
    });
    expect(calls.length).toBe(before);
  });
});
