// Card payments through Stripe, against stripe-mock behind test/stripe.ts's front: a card is saved
// by webhook, a card purchase buys nothing until Stripe says it succeeded, then exactly once;
// webhooks verified, idempotent by event id, tolerant of order; Stripe failing or slow during a
// purchase buys nothing and a retry under the same key asks Stripe under the same key.
import { describe, expect, test } from '@jest/globals';
import { exampleEmail } from '#test/fixtures.ts';
import { call, newAccountVia, startTestApi, useTestApi, adminOf } from '#test/api.ts';
import { deliver, intentIdOf, saveCardVia, signedEvent, useStripe } from '#test/stripe.ts';

const stripe = useStripe();
const fx = useTestApi({ env: stripe.env });
const admin = adminOf(fx);

async function customer() {
  const account = await newAccountVia(fx, exampleEmail());
  await saveCardVia(fx.api.url, fx.db.pool, account);
  return account;
}

const buy = (apiKey: string, body: unknown, key: string) =>
  call(fx.api.url, '/api/v1/card-purchases', { key: apiKey, body, headers: { 'Idempotency-Key': key } });

async function totalBytes(accountId: string, product = 'basic'): Promise<number> {
  const { rows } = await fx.db.pool.query<{ total_bytes: string }>(
    'SELECT total_bytes FROM balances WHERE account_id = $1 AND product = $2',
    [accountId, product],
  );
  return Number(rows[0]?.total_bytes ?? 0);
}

/** What Stripe sends when the payment succeeded (or another PaymentIntent event). */
function intentEvent(
  payment: { id: string; amountCents: number },
  type = 'payment_intent.succeeded',
  over: Record<string, unknown> = {},
  accountId = '',
) {
  return signedEvent(type, {
    id: intentIdOf(payment.id),
    object: 'payment_intent',
    amount: payment.amountCents,
    amount_received: type === 'payment_intent.succeeded' ? payment.amountCents : 0,
    currency: 'usd',
    status: type.slice('payment_intent.'.length),
    metadata: { card_payment_id: payment.id, kind: 'purchase', account_id: accountId },
    ...over,
  });
}

const intentCalls = () =>
  stripe.front.calls.filter((c) => c.method === 'POST' && c.path === '/v1/payment_intents');

describe('card payments', () => {
  test('a saved card pays a purchase: nothing until the webhook, then once, whatever is delivered again', async () => {
    const account = await customer();
    expect((await call(fx.api.url, '/api/v1/card', { key: account.apiKey })).body).toMatchObject({
      available: true,
      card: expect.any(String),
    });
    const before = intentCalls().length;
    const first = await buy(account.apiKey, { product: 'basic', gb: 2.5 }, 'card-1');
    expect(first).toMatchObject({
      status: 201,
      body: {
        status: 'processing',
        amountCents: 500,
        currency: 'USD',
        bytes: 2_500_000_000,
        invoiceId: null,
      },
    });
    // Amounts in the smallest unit of the currency, under the purchase's key.
    const sent = intentCalls().slice(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.form.get('amount')).toBe('500');
    expect(sent[0]!.form.get('currency')).toBe('usd');
    expect(sent[0]!.idempotencyKey).toBe(`${account.id}:customer:card-1`);
    expect(await totalBytes(account.id)).toBe(0);

    const event = intentEvent(first.body, 'payment_intent.succeeded', {}, account.id);
    expect(await deliver(fx.api.url, event)).toMatchObject({ status: 200, body: { outcome: 'applied' } });
    expect(await totalBytes(account.id)).toBe(2_500_000_000);
    // The same event again, and another event of the same success: nothing more.
    expect(await deliver(fx.api.url, event)).toMatchObject({ status: 200, body: { outcome: 'duplicate' } });
    const again = await deliver(fx.api.url, intentEvent(first.body));
    expect(again.body.outcome).toBe('ignored: already bought');
    expect(await totalBytes(account.id)).toBe(2_500_000_000);

    const paid = await call(fx.api.url, `/api/v1/card-payments/${first.body.id}`, { key: account.apiKey });
    expect(paid.body).toMatchObject({ status: 'succeeded', invoiceId: expect.any(String) });
    const invoices = await call(fx.api.url, '/api/v1/invoices', { key: account.apiKey });
    expect(invoices.body.invoices).toEqual([
      expect.objectContaining({
        id: paid.body.invoiceId,
        status: 'paid',
        amountCents: 500,
        paidAt: expect.any(String),
      }),
    ]);
    // The same key again answers the same payment and starts nothing.
    const replay = await buy(account.apiKey, { product: 'basic', gb: 2.5 }, 'card-1');
    expect(replay).toMatchObject({ status: 200, body: { id: first.body.id, status: 'succeeded' } });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(intentCalls().length).toBe(before + 1);
    expect((await buy(account.apiKey, { product: 'basic', gb: 3 }, 'card-1')).status).toBe(422);
  });

  test('forged, re-signed with another secret, stale (replayed) or unsigned webhooks are 400 and change nothing', async () => {
    const account = await customer();
    const payment = (await buy(account.apiKey, { product: 'basic', gb: 1 }, 'forged')).body;
    const good = intentEvent(payment);
    const forged = { payload: good.payload.replace('"amount":200', '"amount":1'), header: good.header };
    const otherSecret = signedEvent('payment_intent.succeeded', JSON.parse(good.payload).data.object, {
      secret: 'whsec_someone_else',
    });
    const stale = signedEvent('payment_intent.succeeded', JSON.parse(good.payload).data.object, {
      timestamp: Math.floor(Date.now() / 1000) - 600,
    });
    for (const event of [forged, otherSecret, stale, { payload: good.payload, header: '' }]) {
      expect((await deliver(fx.api.url, event)).status).toBe(400);
    }
    expect(await totalBytes(account.id)).toBe(0);
    const { rowCount } = await fx.db.pool.query('SELECT 1 FROM stripe_events WHERE id = $1', [
      JSON.parse(stale.payload).id,
    ]);
    expect(rowCount).toBe(0);
  });

  test('an event for no card payment, a wrong amount or a failure before the success buy nothing wrong', async () => {
    const account = await customer();
    const unknown = await deliver(
      fx.api.url,
      intentEvent({ id: '00000000-0000-4000-8000-000000000000', amountCents: 100 }),
    );
    expect(unknown).toMatchObject({
      status: 200,
      body: { outcome: 'ignored: no card payment for this payment intent' },
    });
    const payment = (await buy(account.apiKey, { product: 'basic', gb: 1 }, 'amount')).body;
    const short = await deliver(
      fx.api.url,
      intentEvent(payment, 'payment_intent.succeeded', { amount_received: 1 }),
    );
    expect(short.body.outcome).toMatch(/^ignored: received 1 usd, expected 200 USD/);
    expect(await totalBytes(account.id)).toBe(0);
    // Declined, then paid on a second try at the bank's page: the success still buys, once.
    await deliver(fx.api.url, intentEvent(payment, 'payment_intent.payment_failed'));
    expect(
      (await call(fx.api.url, `/api/v1/card-payments/${payment.id}`, { key: account.apiKey })).body.status,
    ).toBe('failed');
    await deliver(fx.api.url, intentEvent(payment));
    expect(await totalBytes(account.id)).toBe(1e9);
  });

  test('3-D Secure: the purchase waits with the bank page; the success webhook buys', async () => {
    const account = await customer();
    stripe.front.intentStatus = 'requires_action';
    try {
      const payment = await buy(account.apiKey, { product: 'mobile', gb: 1 }, '3ds');
      expect(payment.body).toMatchObject({
        status: 'requires_action',
        actionUrl: expect.stringMatching(/^https:/),
      });
      expect(await totalBytes(account.id, 'mobile')).toBe(0);
      await deliver(fx.api.url, intentEvent(payment.body));
      expect(await totalBytes(account.id, 'mobile')).toBe(1e9);
    } finally {
      stripe.front.intentStatus = 'processing';
    }
  });

  test('Stripe answering succeeded buys at once; its webhook later buys nothing more', async () => {
    const account = await customer();
    stripe.front.intentStatus = 'succeeded';
    try {
      const payment = await buy(account.apiKey, { product: 'basic', gb: 1 }, 'sync');
      expect(payment.body).toMatchObject({ status: 'succeeded', invoiceId: expect.any(String) });
      expect(await totalBytes(account.id)).toBe(1e9);
      expect((await deliver(fx.api.url, intentEvent(payment.body))).body.outcome).toBe(
        'ignored: already bought',
      );
      expect(await totalBytes(account.id)).toBe(1e9);
    } finally {
      stripe.front.intentStatus = 'processing';
    }
  });

  test.each([['500'], ['hang']] as const)(
    'Stripe %s during a purchase: 503, no bandwidth; the retry asks under the same key and pays once',
    async (fault) => {
      const account = await customer();
      const before = intentCalls().length;
      // The package tries three times (two retries) before the purchase answers.
      for (let i = 0; i < 3; i++) stripe.front.faults.push({ prefix: '/v1/payment_intents', fault });
      const failed = await buy(account.apiKey, { product: 'basic', gb: 1 }, `fault-${fault}`);
      expect(failed).toMatchObject({
        status: 503,
        body: { error: expect.stringContaining('retry with the same') },
      });
      expect(await totalBytes(account.id)).toBe(0);
      const retried = await buy(account.apiKey, { product: 'basic', gb: 1 }, `fault-${fault}`);
      expect(retried.body).toMatchObject({ status: 'processing' });
      const keys = intentCalls()
        .slice(before)
        .map((c) => c.idempotencyKey);
      expect(keys).toEqual(Array(4).fill(`${account.id}:customer:fault-${fault}`));
      await deliver(fx.api.url, intentEvent(retried.body));
      await deliver(fx.api.url, intentEvent(retried.body));
      expect(await totalBytes(account.id)).toBe(1e9);
    },
    60_000,
  );

  test('the webhook may come before the purchase has its answer from Stripe', async () => {
    const account = await customer();
    for (let i = 0; i < 3; i++) stripe.front.faults.push({ prefix: '/v1/payment_intents', fault: 'hang' });
    const buying = buy(account.apiKey, { product: 'basic', gb: 1 }, 'early');
    let row: { id: string } | undefined;
    while (!row) {
      const { rows } = await fx.db.pool.query<{ id: string }>(
        'SELECT id FROM card_payments WHERE account_id = $1',
        [account.id],
      );
      row = rows[0];
    }
    expect((await deliver(fx.api.url, intentEvent({ id: row.id, amountCents: 200 }))).body.outcome).toBe(
      'applied',
    );
    expect(await totalBytes(account.id)).toBe(1e9);
    expect((await buying).status).toBe(503);
    const retried = await buy(account.apiKey, { product: 'basic', gb: 1 }, 'early');
    expect(retried.body).toMatchObject({ status: 'succeeded' });
    expect(await totalBytes(account.id)).toBe(1e9);
  }, 60_000);

  test('two tabs buying at once with one key: one payment, one charge key, one credit', async () => {
    const account = await customer();
    const before = intentCalls().length;
    const answers = await Promise.all(
      [1, 2, 3].map(() => buy(account.apiKey, { product: 'light', gb: 1 }, 'tabs')),
    );
    expect(new Set(answers.map((a) => a.body.id)).size).toBe(1);
    expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 201]);
    expect(
      intentCalls()
        .slice(before)
        .every((c) => c.idempotencyKey === `${account.id}:customer:tabs`),
    ).toBe(true);
    await Promise.all([1, 2, 3].map(() => deliver(fx.api.url, intentEvent(answers[0]!.body))));
    expect(await totalBytes(account.id, 'light')).toBe(1e9);
  });

  test("two customers' purchases under the same Idempotency-Key are two payments at Stripe", async () => {
    // Stripe's keys are the platform's: with the customer's key alone the second purchase met the
    // first one's key with other parameters (another customer) and was refused (503).
    const [one, two] = [await customer(), await customer()];
    const first = await buy(one.apiKey, { product: 'basic', gb: 1 }, 'order-1');
    const second = await buy(two.apiKey, { product: 'basic', gb: 1 }, 'order-1');
    expect([first.status, second.status]).toEqual([201, 201]);
    expect(second.body).toMatchObject({ status: 'processing' });
    await deliver(fx.api.url, intentEvent(second.body, 'payment_intent.succeeded', {}, two.id));
    expect([await totalBytes(one.id), await totalBytes(two.id)]).toEqual([0, 1e9]);
  });

  test('a refund and a dispute take back what is unused, once each, audited and emailed', async () => {
    const account = await customer();
    const payment = (await buy(account.apiKey, { product: 'basic', gb: 4 }, 'refund')).body;
    const charge = (amount_refunded: number) =>
      signedEvent('charge.refunded', {
        id: 'ch_1',
        object: 'charge',
        amount: 800,
        amount_refunded,
        payment_intent: intentIdOf(payment.id),
        metadata: {},
      });
    // The refund before the success: not yet (Stripe delivers it again).
    const early = charge(200);
    expect((await deliver(fx.api.url, early)).status).toBe(409);
    await deliver(fx.api.url, intentEvent(payment));
    expect(await totalBytes(account.id)).toBe(4e9);
    expect((await deliver(fx.api.url, early)).body.outcome).toBe('applied');
    expect(await totalBytes(account.id)).toBe(3e9);
    expect((await deliver(fx.api.url, early)).body.outcome).toBe('duplicate');
    // Used 2.5 GB of the 3 GB left; the rest refunded: only the unused 0.5 GB can be taken.
    await fx.db.pool.query('UPDATE balances SET used_bytes = 2500000000 WHERE account_id = $1', [account.id]);
    expect((await deliver(fx.api.url, charge(800))).body.outcome).toBe('applied');
    expect(await totalBytes(account.id)).toBe(2.5e9);
    const dispute = signedEvent('charge.dispute.created', {
      id: 'dp_1',
      object: 'dispute',
      amount: 800,
      charge: 'ch_1',
      payment_intent: intentIdOf(payment.id),
    });
    expect((await deliver(fx.api.url, dispute)).body.outcome).toBe(
      'ignored: no more money returned than before',
    );
    const invoices = await call(fx.api.url, '/api/v1/invoices', { key: account.apiKey });
    expect(invoices.body.invoices[0]).toMatchObject({ status: 'refunded' });
    const audit = await admin(`/accounts/${account.id}/audit-log`);
    expect(
      audit.body.entries.filter((e: { action: string }) => e.action === 'invoice.refunded'),
    ).toHaveLength(2);
    const mails = await fx.db.pool.query(
      `SELECT subject FROM email_outbox WHERE account_id = $1 AND kind = 'card_refund'`,
      [account.id],
    );
    expect(mails.rows.map((r) => r.subject).sort()).toEqual([
      expect.stringContaining('2.00 USD refunded'),
      expect.stringContaining('8.00 USD refunded'),
    ]);
  });

  test('a suspended account cannot buy by card; without a card nothing is started', async () => {
    const bare = await newAccountVia(fx, exampleEmail());
    expect(await buy(bare.apiKey, { product: 'basic', gb: 1 }, 'x')).toMatchObject({
      status: 409,
      body: { error: 'No card is saved; save one on the Billing page first' },
    });
    const account = await customer();
    expect((await admin(`/accounts/${account.id}/suspend`, { method: 'POST' })).status).toBe(200);
    expect((await buy(account.apiKey, { product: 'basic', gb: 1 }, 'y')).status).toBe(401);
  });

  test('without a Stripe key: no card payments, no webhook, and the API says so', async () => {
    const plain = await startTestApi(fx.db);
    try {
      const account = await newAccountVia({ db: fx.db, api: plain }, exampleEmail());
      expect((await call(plain.url, '/api/v1/card', { key: account.apiKey })).body).toMatchObject({
        available: false,
        card: null,
      });
      expect(
        (
          await call(plain.url, '/api/v1/card-purchases', {
            key: account.apiKey,
            body: { product: 'basic', gb: 1 },
            headers: { 'Idempotency-Key': 'k' },
          })
        ).status,
      ).toBe(409);
      expect((await deliver(plain.url, signedEvent('payment_intent.succeeded', {}))).status).toBe(404);
    } finally {
      await plain.close();
    }
  });
});
