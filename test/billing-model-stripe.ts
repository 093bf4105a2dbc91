// Stripe's side of the money model's card payments (test/billing-model-payments.ts): the model's
// card payments and PaymentIntents, the events Stripe sends (queued until delivered for good),
// and the parts of the Stripe client the card code calls, answering from that state: a create
// under a used idempotency key gets the first answer again, as Stripe replays it; a new one is
// answered as the command drew (a status, unreachable, or charged with the answer lost).
import { randomUUID } from 'node:crypto';
import type Stripe from 'stripe';

export type CardStatus = 'creating' | 'requires_action' | 'processing' | 'succeeded' | 'failed';

/** A card purchase (its card_payments row) as the model expects it. */
export interface Card {
  id: string;
  /** The customer's Idempotency-Key. */
  key: string;
  bytes: number;
  cents: number;
  status: CardStatus;
  invoiceId: string | null;
  /** The largest refund and dispute applied (cents), and the bytes they took back. */
  refunded: number;
  disputed: number;
  taken: number;
}

export type IntentStatus = 'requires_action' | 'processing' | 'requires_payment_method' | 'succeeded';

/** A PaymentIntent at Stripe. */
export interface Intent {
  id: string;
  /** Stripe's idempotency key: the card payment's key. */
  key: string;
  cardId: string;
  status: IntentStatus;
  amount: number;
  currency: string;
  metadata: Record<string, string>;
  /** Stripe's answer to the create under this key, replayed to a retry. */
  answer: Stripe.PaymentIntent;
  /** Cumulative at Stripe: amount_refunded, and the dispute's amount. */
  refunded: number;
  dispute: number | null;
}

export interface Payments {
  cards: Card[];
  intents: Intent[];
  /** Events sent and not delivered for good: Stripe sends again until it gets a 2xx. */
  queue: Stripe.Event[];
  /** Event ids the webhook recorded (applied or ignored). */
  recorded: Set<string>;
  /** Refund and dispute events that took money back. */
  returns: number;
}

/** What Stripe does with the next create: answers a status, is unreachable, or charges and the answer is lost. */
export type Answer = 'succeeded' | 'processing' | 'requires_action' | 'declined' | 'unreachable' | 'lost';

export function intentObject(i: Intent): Stripe.PaymentIntent {
  return {
    id: i.id,
    object: 'payment_intent',
    status: i.status,
    amount: i.amount,
    amount_received: i.status === 'succeeded' ? i.amount : 0,
    currency: i.currency.toLowerCase(),
    metadata: { ...i.metadata },
    next_action:
      i.status === 'requires_action'
        ? { type: 'redirect_to_url', redirect_to_url: { url: 'https://bank.test' } }
        : null,
    last_payment_error:
      i.status === 'requires_payment_method' ? { message: 'Your card was declined.' } : null,
  } as unknown as Stripe.PaymentIntent;
}

export function send(p: Payments, type: string, object: unknown): void {
  p.queue.push({
    id: `evt_${randomUUID()}`,
    object: 'event',
    type,
    data: { object },
  } as unknown as Stripe.Event);
}

export const intentEvent = (p: Payments, i: Intent) =>
  send(
    p,
    i.status === 'requires_payment_method' ? 'payment_intent.payment_failed' : `payment_intent.${i.status}`,
    intentObject(i),
  );

/** The parts of the Stripe client the card code calls, answering from the model's Stripe. */
export function fakeStripe(p: Payments, answer: Answer): Stripe {
  const paymentIntents = {
    create: (params: Stripe.PaymentIntentCreateParams, options: { idempotencyKey: string }) => {
      const earlier = p.intents.find((i) => i.key === options.idempotencyKey);
      if (earlier) return Promise.resolve(earlier.answer);
      if (answer === 'unreachable') return Promise.reject(new Error('connect ECONNREFUSED'));
      const metadata = params.metadata as Record<string, string>;
      const status =
        answer === 'lost' ? 'succeeded' : answer === 'declined' ? 'requires_payment_method' : answer;
      const i: Intent = {
        id: `pi_${randomUUID()}`,
        key: options.idempotencyKey,
        cardId: metadata.card_payment_id!,
        status,
        amount: params.amount,
        currency: params.currency,
        metadata,
        answer: undefined as unknown as Stripe.PaymentIntent,
        refunded: 0,
        dispute: null,
      };
      i.answer = intentObject(i);
      p.intents.push(i);
      intentEvent(p, i);
      return answer === 'lost' ? Promise.reject(new Error('timeout')) : Promise.resolve(i.answer);
    },
    retrieve: (id: string) => {
      const i = p.intents.find((x) => x.id === id);
      return i
        ? Promise.resolve(intentObject(i))
        : Promise.reject(new Error(`no such payment_intent: ${id}`));
    },
  };
  return { paymentIntents } as unknown as Stripe;
}
