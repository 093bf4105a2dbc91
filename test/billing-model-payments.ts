// Card payments through Stripe and invoices settled by operators, as commands of the money model
// (test/billing-model.ts; docs/adr/0110, 0101), run against the real functions, not through HTTP
// and without stripe-mock: buyByCard (its card_payments row committed first, then Stripe's answer
// written), handleStripeEvent (the webhook's transaction, once per event id) and settleInvoice.
// Stripe's side is simulated here: PaymentIntents by idempotency key (a retry gets the first
// answer, as Stripe replays it), answers lost after Stripe charged, customers confirming 3-D
// Secure, cumulative refunds and disputes, and a queue of events delivered once, again later, or
// out of order (a refund before its payment's success is 'retry' and stays queued). The model
// expects: each success credits its bytes once, with one paid invoice; each rise of the money
// returned takes back the bytes it paid for, as far as unused, once, audited and emailed once;
// a void takes back the invoice's unused bytes; paid and void are final.
import { randomUUID } from 'node:crypto';
import type Stripe from 'stripe';
import fc from 'fast-check';
import { expect } from '@jest/globals';
import { AppError } from '#common/errors.ts';
import { createLogger } from '#common/logger.ts';
import { settleInvoice } from '#common/billing/settle.ts';
import { buyByCard } from '#api/modules/cards/service.ts';
import { handleStripeEvent, NotYet } from '#api/modules/cards/webhook.ts';
import { command, settle, UNIT, type Cmd, type Model, type Real } from './billing-model.ts';
import {
  fakeStripe,
  intentEvent,
  send,
  type Answer,
  type Card,
  type CardStatus,
  type Intent,
  type IntentStatus,
} from './billing-model-stripe.ts';

const logger = createLogger('test', 'silent');
const LIMITS = { perPurchaseGb: 1000, perDayGb: 1_000_000 };
const OPERATOR = { kind: 'admin', id: 'model' } as const;

/** What the runs did, for the test's closing line (how much of each case the property saw). */
export const paymentFigures = {
  cardsBought: 0,
  duplicates: 0,
  retries: 0,
  moneyReturned: 0,
  voided: 0,
  paid: 0,
  refused: 0,
};

const CARD_STATUS: Record<IntentStatus, CardStatus> = {
  succeeded: 'succeeded',
  processing: 'processing',
  requires_action: 'requires_action',
  requires_payment_method: 'failed',
};

/** The balance's unused bytes, as takeBackUnused counts them, before a take-back. */
async function unused(real: Real): Promise<number> {
  const { rows } = await real.db.query<{ n: number }>(
    `SELECT greatest(0, total_bytes - billing_used(used_bytes, reported_used_bytes) - leased_bytes - striped_bytes)::float8 AS n
       FROM balances WHERE account_id = $1 AND product = 'basic'`,
    [real.accountId],
  );
  return rows[0]!.n;
}

/** The model's card payments against the database: status, purchase, invoice, money returned. */
async function checkPayments(m: Model, real: Real): Promise<void> {
  const p = m.pay;
  const { rows } = await real.db.query<{
    id: string;
    status: string;
    purchases: number;
    invoices: number;
    invoice_id: string | null;
    bytes: number | null;
    settlement: string | null;
    payment_method: string | null;
    refunded_cents: number | null;
    disputed_cents: number | null;
    refund_taken_bytes: number | null;
  }>(
    `SELECT c.id, c.status,
            (SELECT count(*)::int FROM purchases x WHERE x.account_id = c.account_id AND x.idempotency_key = c.idempotency_key) AS purchases,
            (SELECT count(*)::int FROM invoices x WHERE x.purchase_id = c.purchase_id) AS invoices,
            i.id AS invoice_id, i.bytes::float8 AS bytes, i.settlement, i.payment_method,
            i.refunded_cents::float8 AS refunded_cents, i.disputed_cents::float8 AS disputed_cents,
            i.refund_taken_bytes::float8 AS refund_taken_bytes
       FROM card_payments c LEFT JOIN invoices i ON i.purchase_id = c.purchase_id
      WHERE c.account_id = $1`,
    [real.accountId],
  );
  expect(rows.length).toBe(p.cards.length);
  for (const c of p.cards) {
    const row = rows.find((r) => r.id === c.id)!;
    expect(row.status).toBe(c.status);
    const bought = c.status === 'succeeded';
    expect(row.purchases).toBe(bought ? 1 : 0); // credited once, and only by a success
    if (!bought) continue;
    expect(row).toMatchObject({
      invoices: 1,
      invoice_id: c.invoiceId,
      bytes: c.bytes,
      settlement: 'charged',
      payment_method: 'card',
      refunded_cents: c.refunded,
      disputed_cents: c.disputed,
      refund_taken_bytes: c.taken,
    });
  }
  const ids = (all: boolean) => p.queue.filter((e) => all || !p.recorded.has(e.id)).map((e) => e.id);
  const { rows: counts } = await real.db.query<{
    audits: number;
    emails: number;
    recorded: number;
    early: number;
  }>(
    `SELECT (SELECT count(*)::int FROM audit_log WHERE account_id = $1 AND action IN ('invoice.refunded', 'invoice.disputed')) AS audits,
            (SELECT count(*)::int FROM email_outbox WHERE account_id = $1 AND kind = 'card_refund') AS emails,
            (SELECT count(*)::int FROM stripe_events WHERE id = ANY($2)) AS recorded,
            (SELECT count(*)::int FROM stripe_events WHERE id = ANY($3)) AS early`,
    [real.accountId, [...p.recorded], ids(false)],
  );
  // Each rise of the money returned audited and emailed once; each event recorded once, a
  // 'retry' (a refund before its payment's success) not at all.
  expect(counts[0]).toEqual({ audits: p.returns, emails: p.returns, recorded: p.recorded.size, early: 0 });
}

async function cardAccount(real: Real): Promise<void> {
  await real.db.query(
    `INSERT INTO stripe_customers (account_id, customer_id, payment_method_id, card_label)
     VALUES ($1, $2, 'pm_card_visa', 'visa 4242') ON CONFLICT (account_id) DO NOTHING`,
    [real.accountId, `cus_${real.accountId}`],
  );
}

/**
 * A customer buys by card (POST /api/v1/card-purchases' service), or asks again with the same
 * Idempotency-Key (`retry`: the first card payment still 'creating' after Stripe failed).
 */
async function buy(m: Model, real: Real, key: string, bytes: number, answer: Answer): Promise<void> {
  const p = m.pay;
  await cardAccount(real);
  const before = p.cards.find((c) => c.key === key);
  const asks = !before || before.status === 'creating';
  const earlier = before && p.intents.find((i) => i.cardId === before.id);
  // Stripe's answer: the first one again under a used key, else what this call draws.
  const status = earlier
    ? (earlier.answer.status as IntentStatus)
    : answer === 'declined'
      ? 'requires_payment_method'
      : answer;
  const lost = !earlier && (answer === 'unreachable' || answer === 'lost');
  let outcome: Awaited<ReturnType<typeof buyByCard>> | null = null;
  try {
    outcome = await buyByCard(real.db, fakeStripe(p, answer), LIMITS, {
      accountId: real.accountId,
      product: 'basic',
      gb: bytes / 1e9,
      idempotencyKey: key,
      returnUrl: 'https://dashboard.test/billing',
    });
  } catch (err) {
    expect(asks && lost).toBe(true);
    expect((err as AppError).code).toBe('PAYMENT_PROVIDER_UNAVAILABLE');
  }
  const { rows } = await real.db.query<{ id: string; cents: number }>(
    `SELECT id, amount_cents::float8 AS cents FROM card_payments WHERE account_id = $1 AND idempotency_key = 'customer:' || $2`,
    [real.accountId, key],
  );
  const c: Card = before ?? {
    id: rows[0]!.id,
    key,
    bytes,
    cents: rows[0]!.cents,
    status: 'creating',
    invoiceId: null,
    refunded: 0,
    disputed: 0,
    taken: 0,
  };
  if (!before) p.cards.push(c);
  let purchased = 0;
  if (asks && !lost) {
    c.status = CARD_STATUS[status as IntentStatus];
    if (c.status === 'succeeded') {
      purchased = c.bytes;
      paymentFigures.cardsBought++;
      await boughtInvoice(m, real, c);
    }
  }
  if (outcome) {
    expect(outcome.replayed).toBe(!!before);
    expect(outcome.bought).toBe(purchased > 0);
    expect(outcome.payment.status).toBe(c.status);
  }
  await settle(m, real, purchased);
  await checkPayments(m, real);
}

async function boughtInvoice(m: Model, real: Real, c: Card): Promise<void> {
  const { rows } = await real.db.query<{ id: string }>(
    `SELECT i.id FROM card_payments c JOIN invoices i ON i.purchase_id = c.purchase_id WHERE c.id = $1`,
    [c.id],
  );
  c.invoiceId = rows[0]!.id;
  m.invoices.set(c.invoiceId, 'paid');
}

const cardBuy = (bytes: number, answer: Answer) =>
  command(`cardBuy(${bytes / UNIT}u, ${answer})`, (m, real) => buy(m, real, randomUUID(), bytes, answer));

const cardRetry = (pick: number, answer: Answer) =>
  command(
    `cardRetry(${pick}, ${answer})`,
    (m, real) => {
      const c = m.pay.cards[pick % m.pay.cards.length]!;
      return buy(m, real, c.key, c.bytes, answer);
    },
    (m) => m.pay.cards.length > 0,
  );

/** The newest intent that `ok` accepts for pick 0, older ones for more. */
const pickIntent = (m: Model, pick: number, ok: (i: Intent) => boolean) => {
  const open = m.pay.intents.filter(ok);
  return open[open.length - 1 - (pick % open.length)];
};

/** At Stripe: the customer confirms 3-D Secure or pays again (ok), or the card is declined. */
const confirm = (pick: number, ok: boolean) =>
  command(
    `stripeConfirms(${pick}, ${ok ? 'succeeded' : 'declined'})`,
    (m) => {
      const i = pickIntent(m, pick, (x) => x.status !== 'succeeded')!;
      if (ok) {
        i.status = 'processing';
        intentEvent(m.pay, i);
      }
      i.status = ok ? 'succeeded' : 'requires_payment_method';
      intentEvent(m.pay, i);
      return Promise.resolve();
    },
    (m) => m.pay.intents.some((x) => x.status !== 'succeeded'),
  );

/** At Stripe: a refund of `quarters` of the charge (amount_refunded grows; full at the most). */
const refund = (pick: number, quarters: number) =>
  command(
    `stripeRefunds(${pick}, ${quarters}/4)`,
    (m) => {
      const i = pickIntent(m, pick, (x) => x.status === 'succeeded' && x.refunded < x.amount)!;
      i.refunded = Math.min(i.amount, i.refunded + Math.ceil((i.amount * quarters) / 4));
      send(m.pay, 'charge.refunded', {
        id: `ch_${i.id}`,
        object: 'charge',
        metadata: {},
        payment_intent: i.id,
        amount_refunded: i.refunded,
      });
      return Promise.resolve();
    },
    (m) => m.pay.intents.some((x) => x.status === 'succeeded' && x.refunded < x.amount),
  );

/** At Stripe: a dispute of the charge (all or half), then its funds withdrawn (the same amount). */
const dispute = (pick: number, all: boolean) =>
  command(
    `stripeDisputes(${pick}, ${all ? 'all' : 'half'})`,
    (m) => {
      const i = pickIntent(m, pick, (x) => x.status === 'succeeded')!;
      const type = i.dispute === null ? 'charge.dispute.created' : 'charge.dispute.funds_withdrawn';
      i.dispute ??= all ? i.amount : Math.ceil(i.amount / 2);
      send(m.pay, type, { id: `dp_${i.id}`, object: 'dispute', payment_intent: i.id, amount: i.dispute });
      return Promise.resolve();
    },
    (m) => m.pay.intents.some((x) => x.status === 'succeeded'),
  );

/** What the model expects of an event: the outcome, and what it bought. Updates the model. */
function expected(m: Model, e: Stripe.Event, free: number): { outcome: string; purchased: number } {
  const p = m.pay;
  if (p.recorded.has(e.id)) return { outcome: 'duplicate', purchased: 0 };
  const object = e.data.object as { metadata?: Record<string, string>; payment_intent?: string; id: string };
  const intent = p.intents.find((i) => i.id === (object.payment_intent ?? object.id))!;
  const c = p.cards.find((x) => x.id === intent.cardId)!;
  if (e.type.startsWith('payment_intent.')) {
    if (c.status === 'succeeded') return { outcome: 'ignored: already bought', purchased: 0 };
    const status = e.type.slice('payment_intent.'.length);
    c.status = status === 'payment_failed' ? 'failed' : (status as CardStatus);
    return { outcome: 'applied', purchased: c.status === 'succeeded' ? c.bytes : 0 };
  }
  if (c.status !== 'succeeded') return { outcome: 'retry', purchased: 0 };
  // Refunds and disputes are cumulative: only a rise of the money returned acts (card-settle.ts).
  const isRefund = e.type === 'charge.refunded';
  const amount = (e.data.object as { amount_refunded?: number; amount?: number })[
    isRefund ? 'amount_refunded' : 'amount'
  ]!;
  const cents = Math.min(c.cents, amount);
  const seen = isRefund ? c.refunded : c.disputed;
  const other = isRefund ? c.disputed : c.refunded;
  const back = Math.min(c.cents, cents + other);
  if (cents <= seen || back <= Math.min(c.cents, seen + other))
    return { outcome: 'ignored: no more money returned than before', purchased: 0 };
  // The bytes the money returned paid for, rounded up, less what was taken before; as far as unused.
  const owed = Math.ceil((c.bytes * back) / c.cents);
  const taken = Math.min(Math.max(0, owed - c.taken), free);
  if (isRefund) c.refunded = cents;
  else c.disputed = cents;
  c.taken += taken;
  m.bought -= taken;
  m.takenBack += taken;
  p.returns++;
  paymentFigures.moneyReturned++;
  if (back >= c.cents) m.invoices.set(c.invoiceId!, 'refunded');
  return { outcome: 'applied', purchased: 0 };
}

/** Stripe delivers one queued event; `again`: it will be delivered again later (a duplicate). */
const deliver = (pick: number, again: boolean) =>
  command(
    `deliver(${pick}${again ? ', again later' : ''})`,
    async (m, real) => {
      const p = m.pay;
      const at = p.queue.length - 1 - (pick % p.queue.length); // 0: the newest
      const event = p.queue[at]!;
      const want = expected(m, event, await unused(real));
      let outcome: string;
      try {
        const deps = { pool: real.db, stripe: fakeStripe(p, 'unreachable'), secret: 'whsec_model', logger };
        outcome = (await handleStripeEvent(deps, event)).outcome;
      } catch (err) {
        if (!(err instanceof NotYet)) throw err;
        outcome = 'retry';
      }
      expect(`${event.type}: ${outcome}`).toBe(`${event.type}: ${want.outcome}`);
      if (outcome === 'duplicate') paymentFigures.duplicates++;
      if (outcome === 'retry') paymentFigures.retries++;
      if (want.purchased) paymentFigures.cardsBought++;
      if (outcome !== 'retry') {
        p.recorded.add(event.id);
        if (!again) p.queue.splice(at, 1);
      }
      const c = want.purchased ? p.cards.find((x) => x.status === 'succeeded' && !x.invoiceId) : undefined;
      if (c) await boughtInvoice(m, real, c);
      await settle(m, real, want.purchased);
      await checkPayments(m, real);
    },
    (m) => m.pay.queue.length > 0,
  );

/**
 * An operator marks one of the account's invoices paid or void (`twice`: the same request again).
 * Issued -> paid | void; the same state again answers it as it is; any other is INVOICE_SETTLED.
 */
const operatorSettles = (pick: number, to: 'paid' | 'void', twice: boolean) =>
  command(`operatorSettles(${pick}, ${to}${twice ? ', twice' : ''})`, async (m, real) => {
    const { rows } = await real.db.query<{ id: string; bytes: number | null }>(
      'SELECT id, bytes::float8 AS bytes FROM invoices WHERE account_id = $1 ORDER BY number',
      [real.accountId],
    );
    const invoice = rows[pick % rows.length]!;
    const was = m.invoices.get(invoice.id) ?? 'issued';
    const taken = to === 'void' ? Math.min(invoice.bytes ?? 0, await unused(real)) : 0;
    for (let n = twice ? 2 : 1; n > 0; n--) {
      try {
        const view = await settleInvoice(real.db, invoice.id, to, OPERATOR);
        expect(was === 'issued' || was === to).toBe(true);
        expect(view.status).toBe(to);
        if (to === 'void' && was === 'issued') expect(view.voidedBytes).toBe(taken);
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        expect(`${err.code} (${was} -> ${to})`).toBe(`INVOICE_SETTLED (${was} -> ${to})`);
        expect(was === 'issued' || was === to).toBe(false);
        paymentFigures.refused++;
      }
    }
    if (was === 'issued') {
      paymentFigures[to === 'void' ? 'voided' : 'paid']++;
      m.invoices.set(invoice.id, to);
      m.bought -= taken;
      m.takenBack += taken;
    }
    await settle(m, real);
  });

const answers = fc.constantFrom<Answer>(
  'succeeded',
  'processing',
  'requires_action',
  'declined',
  'unreachable',
  'lost',
);
const pick = fc.nat({ max: 1000 });

/** Stripe acting on a payment (pick 0: the newest), or delivering an event (0: the newest). */
const atStripe = (pick: fc.Arbitrary<number>) =>
  fc.oneof(
    { weight: 1, arbitrary: fc.tuple(pick, fc.boolean()).map(([i, ok]) => confirm(i, ok)) },
    { weight: 2, arbitrary: fc.tuple(pick, fc.integer({ min: 1, max: 4 })).map(([i, q]) => refund(i, q)) },
    { weight: 1, arbitrary: fc.tuple(pick, fc.boolean()).map(([i, all]) => dispute(i, all)) },
    { weight: 3, arbitrary: fc.tuple(pick, fc.boolean()).map(([i, again]) => deliver(i, again)) },
  );

/**
 * A card purchase and what follows at Stripe in one command, each step checked as its own
 * command is (steps that do not apply are skipped): random commands alone rarely line up a
 * purchase, its success, a refund and their deliveries. Events left queued are delivered by
 * later commands, between the gateways'.
 */
const journey = (bytes: number, answer: Answer, steps: Cmd[]) =>
  command(`cardJourney(${bytes / UNIT}u, ${answer}: ${steps.join(', ')})`, async (m, real) => {
    await buy(m, real, randomUUID(), bytes, answer);
    for (const step of steps) if (step.check(m)) await step.run(m, real);
  });

/** Commands of the payments, for fc.commands beside the model's own. */
export const paymentCommands = [
  fc
    .tuple(fc.integer({ min: 1, max: 10 }), answers, fc.array(atStripe(fc.nat({ max: 2 })), { maxLength: 8 }))
    .map(([n, a, steps]) => journey(n * UNIT, a, steps)),
  fc.oneof(
    fc.tuple(fc.integer({ min: 1, max: 10 }), answers).map(([n, a]) => cardBuy(n * UNIT, a)),
    fc.tuple(pick, answers).map(([i, a]) => cardRetry(i, a)),
  ),
  atStripe(pick),
  fc
    .tuple(pick, fc.constantFrom('paid' as const, 'void' as const), fc.boolean())
    .map(([i, to, twice]) => operatorSettles(i, to, twice)),
];
