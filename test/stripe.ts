// Stripe in tests: stripe-mock (dev/stripe-mock.ts) behind a small front that records every call
// the server makes (method, path, Idempotency-Key, form body) and can inject faults (a 500, an
// answer that never comes) or set the status of a PaymentIntent it answers. stripe-mock is
// stateless: it answers fixtures (a PaymentIntent is always requires_payment_method, ids are new
// each time, an idempotency key is not remembered), so what Stripe would decide is set here by
// the test, and what only Stripe's state could show (one charge per key) is shown by the calls
// carrying the same Idempotency-Key. Webhooks are signed as Stripe signs them.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';
import { startStripeMock, stripeMockBinary, type StripeMock } from '../dev/stripe-mock.ts';
import { toolsBinDir } from './kube/env.ts';
import { jestHooks } from './hooks.ts';

export const STRIPE_TEST_KEY = 'sk_test_proxyfleet';
export const STRIPE_WEBHOOK_SECRET = 'whsec_proxyfleet_test_secret';

export interface StripeCall {
  method: string;
  path: string;
  idempotencyKey: string | undefined;
  form: URLSearchParams;
}

export type Fault = '500' | 'hang';
export type IntentStatus = 'succeeded' | 'requires_action' | 'processing' | 'requires_payment_method';

export interface StripeFront {
  url: string;
  calls: StripeCall[];
  /** Faults for the next calls whose path starts with the prefix, in order. */
  faults: Array<{ prefix: string; fault: Fault }>;
  /** The status PaymentIntents are answered with (stripe-mock's fixture otherwise). */
  intentStatus: IntentStatus;
  /**
   * Stripe's rule for idempotency keys, which stripe-mock does not keep: a key is the platform's
   * (not a customer's), and used again with other parameters it is refused (400 idempotency_error).
   */
  keys: Map<string, string>;
  close(): Promise<void>;
}

/** A server in front of stripe-mock (port 0). */
export async function startFront(target: string): Promise<StripeFront> {
  const hanging = new Set<http.ServerResponse>();
  const front: StripeFront = {
    url: '',
    calls: [],
    faults: [],
    intentStatus: 'processing',
    keys: new Map(),
    close: async () => {
      for (const res of hanging) res.destroy();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections(); // the package's keep-alive sockets
      await closed;
    },
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const path = req.url ?? '/';
      const key = req.headers['idempotency-key'];
      front.calls.push({
        method: req.method ?? 'GET',
        path,
        idempotencyKey: typeof key === 'string' ? key : undefined,
        form: new URLSearchParams(body.toString()),
      });
      if (typeof key === 'string' && req.method === 'POST') {
        const sent = `${path} ${body.toString()}`;
        const first = front.keys.get(key);
        if (first !== undefined && first !== sent) {
          res.writeHead(400, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({
              error: {
                type: 'idempotency_error',
                message: `Keys for idempotent requests can only be used with the same parameters they were first used with (${key})`,
              },
            }),
          );
          return;
        }
        front.keys.set(key, sent);
      }
      const i = front.faults.findIndex((f) => path.startsWith(f.prefix));
      const fault = i >= 0 ? front.faults.splice(i, 1)[0]!.fault : null;
      if (fault === '500') {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { type: 'api_error', message: 'injected' } }));
        return;
      }
      void forward(target, req, body).then(({ status, text }) => {
        if (fault === 'hang') {
          // Stripe did the work; its answer never arrives.
          hanging.add(res);
          return;
        }
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(rewrite(front, req.method ?? 'GET', path, body, text));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  front.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return front;
}

async function forward(target: string, req: http.IncomingMessage, body: Buffer) {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && k !== 'host') headers[k] = v;
  const res = await fetch(target + (req.url ?? '/'), {
    method: req.method ?? 'GET',
    headers,
    ...(body.length ? { body } : {}),
  });
  return { status: res.status, text: await res.text() };
}

/** A PaymentIntent answered with the status the test chose; its amount and metadata as sent. */
function rewrite(front: StripeFront, method: string, path: string, body: Buffer, text: string): string {
  const route = path.split('?')[0]!;
  // One customer id per account, as Stripe keeps one customer per account here (stripe-mock's ids are new on every call).
  if (method === 'POST' && route === '/v1/customers') {
    const form = new URLSearchParams(body.toString());
    return JSON.stringify({
      ...JSON.parse(text),
      id: `cus_${createHash(form.get('metadata[account_id]') ?? '')}`,
    });
  }
  if (method !== 'POST' || route !== '/v1/payment_intents') return text;
  const intent = JSON.parse(text) as Record<string, unknown>;
  const form = new URLSearchParams(body.toString());
  const status = front.intentStatus;
  const metadata: Record<string, string> = {};
  for (const [k, v] of form) {
    const m = /^metadata\[(.+)\]$/.exec(k);
    if (m) metadata[m[1]!] = v;
  }
  return JSON.stringify({
    ...intent,
    id: intentIdOf(metadata.card_payment_id ?? createHash(metadata.idempotency_key ?? String(Math.random()))),
    status,
    amount: Number(form.get('amount')),
    amount_received: status === 'succeeded' ? Number(form.get('amount')) : 0,
    currency: form.get('currency'),
    metadata,
    last_payment_error: status === 'requires_payment_method' ? { message: 'Your card was declined.' } : null,
    next_action:
      status === 'requires_action'
        ? {
            type: 'redirect_to_url',
            redirect_to_url: { url: 'https://hooks.stripe.com/3d_secure/test', return_url: null },
          }
        : null,
  });
}

/** The PaymentIntent id the front answers for a card payment (stable, as Stripe's for one key). */
export const intentIdOf = (cardPaymentId: string) => `pi_${cardPaymentId.replaceAll('-', '')}`;

/** A stable id per idempotency key, as Stripe would answer the same PaymentIntent again. */
function createHash(key: string): string {
  let h = 0x811c9dc5;
  for (const c of key) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193) >>> 0;
  return h.toString(36).padStart(8, '0');
}

/** A webhook body and its Stripe-Signature header, as Stripe sends them. */
export function signedEvent(
  type: string,
  object: Record<string, unknown>,
  options: { id?: string; timestamp?: number; secret?: string } = {},
): { payload: string; header: string; id: string } {
  const id = options.id ?? `evt_${Math.random().toString(36).slice(2)}`;
  const payload = JSON.stringify({
    id,
    object: 'event',
    type,
    api_version: '2025-01-01',
    created: Math.floor(Date.now() / 1000),
    data: { object },
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
  });
  const header = new Stripe(STRIPE_TEST_KEY).webhooks.generateTestHeaderString({
    payload,
    secret: options.secret ?? STRIPE_WEBHOOK_SECRET,
    ...(options.timestamp === undefined ? {} : { timestamp: options.timestamp }),
  });
  return { payload, header, id };
}

/** POSTs a signed event to the API's webhook. */
export async function deliver(
  apiUrl: string,
  event: { payload: string; header: string },
): Promise<{ status: number; body: any }> {
  const res = await fetch(`${apiUrl}/webhooks/stripe`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'stripe-signature': event.header },
    body: event.payload,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

export interface StripeFixture {
  mock: StripeMock;
  front: StripeFront;
  /** The API's environment for card payments (filled before the API starts: declare this first). */
  env: Record<string, string>;
}

/** stripe-mock and its front for the file; `env` goes to useTestApi({ env }). */
export function useStripe(extraEnv: Record<string, string> = {}): StripeFixture {
  const fixture = { env: {} } as StripeFixture;
  jestHooks().beforeAll(async () => {
    const binary = stripeMockBinary(toolsBinDir());
    if (!binary)
      throw new Error(`stripe-mock is not built in ${toolsBinDir()}: run bash scripts/install-tools.sh`);
    fixture.mock = await startStripeMock(binary);
    fixture.front = await startFront(fixture.mock.url);
    Object.assign(fixture.env, {
      PROXYFLEET_STRIPE_SECRET_KEY: STRIPE_TEST_KEY,
      PROXYFLEET_STRIPE_WEBHOOK_SECRET: STRIPE_WEBHOOK_SECRET,
      PROXYFLEET_STRIPE_API_BASE: fixture.front.url,
      PROXYFLEET_STRIPE_TIMEOUT_MS: '2000',
      ...extraEnv,
    });
  }, 120_000);
  jestHooks().afterAll(async () => {
    await fixture.front?.close();
    await fixture.mock?.close();
  });
  return fixture;
}

/** Saves a card for the account as a customer would: the hosted page, then Stripe's webhook. */
export async function saveCardVia(
  apiUrl: string,
  pool: { query: (sql: string, params: unknown[]) => Promise<{ rows: Array<Record<string, unknown>> }> },
  account: { id: string; apiKey: string },
): Promise<string> {
  const setup = await fetch(`${apiUrl}/api/v1/card/setup`, {
    method: 'POST',
    headers: { 'x-api-key': account.apiKey },
  });
  if (setup.status !== 201) throw new Error(`card setup answered ${setup.status}: ${await setup.text()}`);
  const { rows } = await pool.query('SELECT customer_id FROM stripe_customers WHERE account_id = $1', [
    account.id,
  ]);
  const customer = String(rows[0]!.customer_id);
  const saved = await deliver(
    apiUrl,
    signedEvent('setup_intent.succeeded', {
      id: `seti_${account.id.slice(0, 8)}`,
      object: 'setup_intent',
      customer,
      payment_method: `pm_${account.id.slice(0, 8)}`,
      status: 'succeeded',
    }),
  );
  if (saved.body?.outcome !== 'applied') throw new Error(`card not saved: ${JSON.stringify(saved.body)}`);
  return customer;
}
