// `node loadtest/bench-stripe.ts`: card purchases end to end against stripe-mock (test/stripe.ts's
// front before it), and the Stripe webhook handler under 200 concurrent events, on one in-process
// API over a scratch database. A benchmark, not a test: it prints figures for docs/benchmarks.md.
//
// Env: DATABASE_URL (a server; default postgres://postgres@127.0.0.1:5432/postgres; a scratch
// database is created and dropped), BENCH_PURCHASES (default 200), BENCH_EVENTS (200).
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { migrate } from '#common/db/migrate.ts';
import { createPool } from '#common/db/pool.ts';
import { createLogger } from '#common/logger.ts';
import { call, startTestApi } from '#test/api.ts';
import { TEST_ADMIN_TOKEN, exampleEmail } from '#test/fixtures.ts';
import { withDatabase } from '#test/global-setup.ts';
import { toolsBinDir } from '#test/kube/env.ts';
import {
  STRIPE_TEST_KEY,
  STRIPE_WEBHOOK_SECRET,
  deliver,
  intentIdOf,
  saveCardVia,
  signedEvent,
  startFront,
} from '#test/stripe.ts';
import { startStripeMock, stripeMockBinary } from '../dev/stripe-mock.ts';

const PURCHASES = Number(process.env.BENCH_PURCHASES ?? 200);
const EVENTS = Number(process.env.BENCH_EVENTS ?? 200);
const GB = 1;

interface Paid {
  id: string;
  amountCents: number;
}

const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

async function inBatches<T>(n: number, width: number, fn: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < n; i += width)
    out.push(...(await Promise.all(Array.from({ length: Math.min(width, n - i) }, (_, j) => fn(i + j)))));
  return out;
}

async function main() {
  const binary = stripeMockBinary(toolsBinDir());
  if (!binary) throw new Error(`stripe-mock is not built in ${toolsBinDir()}: bash scripts/install-tools.sh`);
  const serverUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const name = `pf_bench_${randomBytes(4).toString('hex')}`;
  const control = new pg.Client({ connectionString: withDatabase(serverUrl, 'postgres') });
  await control.connect();
  await control.query(`CREATE DATABASE ${name}`);
  const url = withDatabase(serverUrl, name);
  const mock = await startStripeMock(binary);
  const front = await startFront(mock.url);
  const pool = createPool({
    url,
    max: 20,
    applicationName: 'bench-stripe',
    logger: createLogger('bench', 'silent'),
  });
  try {
    await migrate(url);
    const api = await startTestApi(
      { url, pool },
      {
        env: {
          PROXYFLEET_STRIPE_SECRET_KEY: STRIPE_TEST_KEY,
          PROXYFLEET_STRIPE_WEBHOOK_SECRET: STRIPE_WEBHOOK_SECRET,
          PROXYFLEET_STRIPE_API_BASE: front.url,
          PROXYFLEET_RATE_LIMIT_PER_MINUTE: '600000000',
          PROXYFLEET_RATE_LIMIT_BURST: '1000000',
          PROXYFLEET_PURCHASE_DAILY_MAX_GB: '1000000',
        },
      },
    );
    const accounts = await inBatches(PURCHASES + EVENTS, 8, async () => {
      const res = await call(api.url, '/admin/v1/accounts', {
        admin: TEST_ADMIN_TOKEN,
        body: { email: exampleEmail('bench') },
      });
      const account = res.body as { id: string; apiKey: string };
      await saveCardVia(api.url, pool, account);
      return account;
    });
    const pay = (a: { apiKey: string }, key: string) =>
      call(api.url, '/api/v1/card-purchases', {
        key: a.apiKey,
        body: { product: 'basic', gb: GB },
        headers: { 'Idempotency-Key': key },
      });
    const succeeded = (p: Paid) =>
      signedEvent('payment_intent.succeeded', {
        id: intentIdOf(p.id),
        object: 'payment_intent',
        amount: p.amountCents,
        amount_received: p.amountCents,
        currency: 'usd',
        status: 'succeeded',
        metadata: { card_payment_id: p.id, kind: 'purchase' },
      });

    // 1. Purchases end to end: pay (twice with one key), the success webhook twice, then count.
    const started = performance.now();
    await inBatches(PURCHASES, 16, async (i) => {
      const a = accounts[i]!;
      const [first] = await Promise.all([pay(a, 'e2e'), pay(a, 'e2e')]);
      const payment = first.body as Paid;
      const event = succeeded(payment);
      await deliver(api.url, event);
      await deliver(api.url, event);
      await deliver(api.url, succeeded(payment));
    });
    const e2eSeconds = (performance.now() - started) / 1000;
    const { rows } = await pool.query<{ account_id: string; total_bytes: string }>(
      'SELECT account_id, total_bytes FROM balances WHERE account_id = ANY($1)',
      [accounts.slice(0, PURCHASES).map((a) => a.id)],
    );
    const credited = rows.filter((r) => Number(r.total_bytes) === GB * 1e9).length;
    const doubled = rows.filter((r) => Number(r.total_bytes) > GB * 1e9).length;
    const intents = front.calls.filter((c) => c.path === '/v1/payment_intents').length;
    console.log(
      `purchases end to end: ${PURCHASES} (each paid twice at once with one key, its success delivered 3 times) in ${e2eSeconds.toFixed(1)} s; ` +
        `credited once: ${credited}, credited more than once: ${doubled}, missing: ${PURCHASES - rows.length}; PaymentIntent requests: ${intents}`,
    );

    // 2. The webhook handler under EVENTS concurrent success events (each buys), then the same again (duplicates).
    const payments = await inBatches(
      EVENTS,
      16,
      async (i) => (await pay(accounts[PURCHASES + i]!, 'hook')).body as Paid,
    );
    const events = payments.map(succeeded);
    for (const round of ['applied', 'duplicate']) {
      const t0 = performance.now();
      const ms = await Promise.all(
        events.map(async (e) => {
          const t = performance.now();
          const res = await deliver(api.url, e);
          if ((res.body as { outcome?: string } | undefined)?.outcome !== round)
            throw new Error(`expected ${round}, got ${JSON.stringify(res.body)}`);
          return performance.now() - t;
        }),
      );
      const sorted = ms.sort((x, y) => x - y);
      console.log(
        `webhook, ${EVENTS} concurrent ${round === 'applied' ? 'success events (each buys)' : 'duplicates'}: ` +
          `p50 ${pct(sorted, 50).toFixed(0)} ms, p99 ${pct(sorted, 99).toFixed(0)} ms, max ${sorted.at(-1)!.toFixed(0)} ms, ` +
          `all in ${(performance.now() - t0).toFixed(0)} ms`,
      );
    }
    await api.close();
  } finally {
    await pool.end();
    await front.close();
    await mock.close();
    await control.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await control.end();
  }
}

await main();
