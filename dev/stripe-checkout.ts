// `npm start` only: what stripe-mock cannot be, so that a person trying the platform can save a card
// and pay by it (docs/billing.md "Cards on npm start"). stripe-mock answers Stripe's API from
// fixtures: its Checkout URL is checkout.stripe.com (unreachable, and it would not know us), every
// PaymentIntent is requires_payment_method (a decline), an idempotency key is not remembered (a
// retry would be another PaymentIntent), and it sends no webhooks. This stand-in sits between the
// platform and stripe-mock (PROXYFLEET_STRIPE_API_BASE points here): every call still goes to
// stripe-mock, which validates it as Stripe would, and the answers are made what Stripe's would be,
// with ids of their own (one per idempotency key, as Stripe answers a retry):
// - a Checkout Session in setup mode links to this server's page, where "Save test card" sends
//   checkout.session.completed and setup_intent.succeeded to the API's /webhooks/stripe and goes
//   back to the session's success URL;
// - the saved card behaves as Stripe's test card 4000 0025 0000 3155: a customer's purchase asks for
//   3-D Secure (requires_action, confirmed on this server's page: "Pay" sends
//   payment_intent.succeeded, "Decline" payment_intent.payment_failed, then back to the return URL);
//   an off-session charge (auto-refill, renewal) succeeds at once, with its webhook as Stripe sends it.
// Events are signed with the webhook secret by the stripe package's own test header helper.
// Started by dev/main.ts only when stripe-mock runs in place of Stripe (no Stripe key set).
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';
import type { Logger } from '#common/logger.ts';
import { html, type Html } from '#api/modules/dashboard/html.ts';

export interface StripeStandIn {
  /** http://127.0.0.1:<port>: the platform's Stripe API base, and where its pages are. */
  url: string;
  /** Where events are delivered (the API's /webhooks/stripe), set once the API listens. */
  webhookUrl: string | null;
  close(): Promise<void>;
}

interface Session {
  customer: string;
  successUrl: string;
  cancelUrl: string;
}

interface Intent {
  id: string;
  amount: number;
  currency: string;
  customer: string;
  paymentMethod: string;
  metadata: Record<string, string>;
  returnUrl: string | null;
  status: 'requires_action' | 'succeeded' | 'requires_payment_method';
}

/** Stripe's pause before delivering an event again after a non-2xx (its schedule is longer). */
const REDELIVER_MS = 1_000;
const DELIVERIES = 3;

export async function startStripeStandIn(opts: {
  mockUrl: string;
  webhookSecret: string;
  logger: Logger;
}): Promise<StripeStandIn> {
  const sessions = new Map<string, Session>();
  const intents = new Map<string, Intent>();
  const signer = new Stripe('sk_test_dev').webhooks;
  const standIn: StripeStandIn = { url: '', webhookUrl: null, close: () => Promise.resolve() };

  /** Sends one event as Stripe does; the API's answer, or why it was not delivered. */
  async function deliver(type: string, object: Record<string, unknown>): Promise<string | null> {
    if (!standIn.webhookUrl) return 'the API is not listening yet';
    const payload = JSON.stringify({
      id: `evt_dev_${randomBytes(12).toString('hex')}`,
      object: 'event',
      type,
      api_version: Stripe.API_VERSION,
      created: Math.floor(Date.now() / 1000),
      data: { object },
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
    });
    let last = '';
    for (let i = 0; i < DELIVERIES; i++) {
      if (i) await new Promise((r) => setTimeout(r, REDELIVER_MS));
      const header = signer.generateTestHeaderString({ payload, secret: opts.webhookSecret });
      try {
        const res = await fetch(standIn.webhookUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'stripe-signature': header },
          body: payload,
        });
        last = `${res.status} ${await res.text()}`;
        opts.logger.info({ type, status: res.status }, 'stripe-mock stand-in delivered an event');
        if (res.ok) return null;
      } catch (err) {
        last = (err as Error).message;
      }
    }
    opts.logger.warn({ type, answer: last }, 'stripe-mock stand-in could not deliver an event');
    return `${type} was not taken: ${last}`;
  }

  const intentObject = (i: Intent) => ({
    id: i.id,
    object: 'payment_intent',
    amount: i.amount,
    amount_received: i.status === 'succeeded' ? i.amount : 0,
    currency: i.currency,
    customer: i.customer,
    payment_method: i.paymentMethod,
    metadata: i.metadata,
    status: i.status,
    last_payment_error:
      i.status === 'requires_payment_method'
        ? { code: 'card_declined', message: 'Your card was declined (declined on the stripe-mock page).' }
        : null,
    next_action:
      i.status === 'requires_action'
        ? {
            type: 'redirect_to_url',
            redirect_to_url: { url: `${standIn.url}/pay/${i.id}`, return_url: i.returnUrl },
          }
        : null,
  });

  /** stripe-mock's answer, made the one Stripe would give. */
  function rewrite(
    method: string,
    route: string,
    form: URLSearchParams,
    key: string | undefined,
    text: string,
  ) {
    const answer = JSON.parse(text) as Record<string, unknown>;
    if (method === 'POST' && route === '/v1/customers') return { ...answer, id: `cus_dev_${idFor(key)}` };
    if (method === 'POST' && route === '/v1/checkout/sessions') {
      const id = `cs_test_dev_${idFor(undefined)}`;
      sessions.set(id, {
        customer: form.get('customer') ?? '',
        successUrl: form.get('success_url') ?? '',
        cancelUrl: form.get('cancel_url') ?? '',
      });
      return { ...answer, id, url: `${standIn.url}/checkout/${id}` };
    }
    if (method === 'POST' && route === '/v1/payment_intents') {
      // The same idempotency key is the same PaymentIntent, as at Stripe.
      const id = `pi_dev_${idFor(key)}`;
      let intent = intents.get(id);
      if (!intent) {
        const metadata: Record<string, string> = {};
        for (const [k, v] of form) {
          const m = /^metadata\[(.+)\]$/.exec(k);
          if (m) metadata[m[1]!] = v;
        }
        intent = {
          id,
          amount: Number(form.get('amount')),
          currency: form.get('currency') ?? 'usd',
          customer: form.get('customer') ?? '',
          paymentMethod: form.get('payment_method') ?? '',
          metadata,
          returnUrl: form.get('return_url'),
          status: form.get('off_session') === 'true' ? 'succeeded' : 'requires_action',
        };
        intents.set(id, intent);
        if (intent.status === 'succeeded') {
          const object = intentObject(intent);
          // After the answer, as Stripe's webhook comes after its answer.
          setImmediate(() => void deliver('payment_intent.succeeded', object));
        }
      }
      return { ...answer, ...intentObject(intent) };
    }
    // The saved test card as what it plays (the dashboard shows "visa 3155").
    if (method === 'GET' && /^\/v1\/payment_methods\/pm_dev_\w+$/.test(route))
      return { ...answer, card: { ...(answer.card as object), brand: 'visa', last4: '3155' } };
    const known = /^\/v1\/payment_intents\/([^/]+)$/.exec(route);
    const intent = method === 'GET' && known ? intents.get(known[1]!) : undefined;
    return intent ? { ...answer, ...intentObject(intent) } : answer;
  }

  async function api(req: http.IncomingMessage, body: Buffer, res: http.ServerResponse) {
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers))
      if (typeof v === 'string' && k !== 'host') headers[k] = v;
    const mock = await fetch(opts.mockUrl + (req.url ?? '/'), {
      method: req.method ?? 'GET',
      headers,
      ...(body.length ? { body } : {}),
    });
    const text = await mock.text();
    const route = (req.url ?? '/').split('?')[0]!;
    const key = req.headers['idempotency-key'];
    const answer = mock.ok
      ? JSON.stringify(
          rewrite(
            req.method ?? 'GET',
            route,
            new URLSearchParams(body.toString()),
            typeof key === 'string' ? key : undefined,
            text,
          ),
        )
      : text;
    res.writeHead(mock.status, { 'content-type': 'application/json' });
    res.end(answer);
  }

  async function checkout(id: string, method: string, form: URLSearchParams, res: http.ServerResponse) {
    const session = sessions.get(id);
    if (!session) return page(res, 404, 'No such session', html`<p>${GONE}</p>`);
    if (method === 'GET')
      return page(
        res,
        200,
        'Save a card',
        html`<p>
            Stripe's hosted page would ask for the card here. This platform runs on stripe-mock, so a test
            card is saved: it asks for 3-D Secure when you buy, and charges off-session without asking (as
            Stripe's test card 4000 0025 0000 3155).
          </p>
          <form method="post"><button type="submit" name="do" value="save">Save test card</button></form>
          <p><a href="${session.cancelUrl}">Cancel</a></p>`,
      );
    if (form.get('do') !== 'save') return page(res, 400, 'Save a card', html`<p>Nothing was asked.</p>`);
    const setup = {
      id: `seti_dev_${idFor(undefined)}`,
      object: 'setup_intent',
      customer: session.customer,
      payment_method: `pm_dev_${idFor(undefined)}`,
      status: 'succeeded',
      usage: 'off_session',
    };
    const problem =
      (await deliver('checkout.session.completed', {
        id,
        object: 'checkout.session',
        mode: 'setup',
        customer: session.customer,
        setup_intent: setup.id,
        status: 'complete',
      })) ?? (await deliver('setup_intent.succeeded', setup));
    if (problem) return page(res, 502, 'The card was not saved', html`<p>${problem}</p>`);
    sessions.delete(id);
    redirect(res, session.successUrl);
  }

  async function pay(id: string, method: string, form: URLSearchParams, res: http.ServerResponse) {
    const intent = intents.get(id);
    if (!intent || intent.status !== 'requires_action')
      return page(res, 404, 'No payment to confirm', html`<p>${GONE}</p>`);
    const amount = `${(intent.amount / 100).toFixed(2)} ${intent.currency.toUpperCase()}`;
    if (method === 'GET')
      return page(
        res,
        200,
        'Confirm the payment',
        html`<p>
            Your bank asks you to confirm a payment of <strong>${amount}</strong> (3-D Secure, played by
            stripe-mock's stand-in).
          </p>
          <form method="post">
            <button type="submit" name="do" value="pay">Pay ${amount}</button>
            <button type="submit" name="do" value="decline">Decline</button>
          </form>`,
      );
    const paid = form.get('do') === 'pay';
    intent.status = paid ? 'succeeded' : 'requires_payment_method';
    const problem = await deliver(
      paid ? 'payment_intent.succeeded' : 'payment_intent.payment_failed',
      intentObject(intent),
    );
    if (problem) {
      intent.status = 'requires_action';
      return page(res, 502, 'The payment was not settled', html`<p>${problem}</p>`);
    }
    if (intent.returnUrl) return redirect(res, intent.returnUrl);
    page(res, 200, 'Done', html`<p>${paid ? 'Paid' : 'Declined'}.</p>`);
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const method = req.method ?? 'GET';
      const route = (req.url ?? '/').split('?')[0]!;
      const form = new URLSearchParams(body.toString());
      const checkoutId = /^\/checkout\/([\w-]+)$/.exec(route)?.[1];
      const payId = /^\/pay\/([\w-]+)$/.exec(route)?.[1];
      const done = route.startsWith('/v1/')
        ? api(req, body, res)
        : checkoutId
          ? checkout(checkoutId, method, form, res)
          : payId
            ? pay(payId, method, form, res)
            : Promise.resolve(page(res, 404, 'Not found', html`<p>Nothing here.</p>`));
      done.catch((err: unknown) => {
        opts.logger.error({ err }, 'stripe-mock stand-in failed');
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(`stripe-mock stand-in: ${(err as Error).message}`);
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  standIn.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  standIn.close = async () => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections(); // the stripe package's keep-alive sockets
    await closed;
  };
  return standIn;
}

const GONE =
  'This page lives in the memory of `npm start` and is gone (a restart, or it was used): start again from the Billing page.';

/** A stable id per idempotency key (Stripe answers the same object again), else a new one. */
function idFor(key: string | undefined): string {
  return key ? createHash('sha256').update(key).digest('hex').slice(0, 24) : randomBytes(12).toString('hex');
}

function redirect(res: http.ServerResponse, location: string) {
  res.writeHead(303, { location });
  res.end();
}

function page(res: http.ServerResponse, status: number, title: string, body: Html) {
  res.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    // No form-action: "Save test card" and "Pay" redirect to the dashboard, another origin.
    'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'",
  });
  res.end(
    html`<!doctype html>
      <html lang="en">
        <head>
          <meta charset="utf-8" />
          <title>${title} - stripe-mock (npm start only)</title>
          <style>
            body {
              font:
                16px/1.5 system-ui,
                sans-serif;
              max-width: 36rem;
              margin: 3rem auto;
              padding: 0 1rem;
            }
            .test {
              background: #fff3cd;
              padding: 0.5rem 1rem;
              border-radius: 4px;
            }
          </style>
        </head>
        <body>
          <main>
            <p class="test">Test mode: stripe-mock's stand-in for Stripe's hosted pages (npm start only).</p>
            <h1>${title}</h1>
            ${body}
          </main>
        </body>
      </html>`.text,
  );
}
