// Subscription renewals end to end (docs/billing.md): the worker's renewal job against the real
// database functions, the billing clock moved across month ends (31 Jan -> 28 Feb, 29 Feb in a
// leap year), a refused payment through a payment method that charges first (past due, grace,
// expired), a suspended account, a stopped worker catching up, two workers racing, a worker
// killed mid-renewal, and the emails through a real SMTP server, also when it was down first.
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { listInvoices } from '#common/billing/invoices.ts';
import { paymentMethods, type ChargeRequest, type PaymentMethod } from '#common/billing/payment.ts';
import { renewDue, renewOne } from '#common/billing/renewals.ts';
import {
  createSubscription,
  listSubscriptions,
  subscriptionCreateSchema,
} from '#common/billing/subscriptions.ts';
import { createPool, type Pool } from '#common/db/pool.ts';
import { createLogger } from '#common/logger.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { billingAccount, setBillingClock } from '#test/billing.ts';
import { startTestSmtpServer, type TestSmtpServer } from '#test/smtp.ts';
import { until } from '#test/process.ts';
import type { JobContext } from '../jobs.ts';
import { emailSenderJob } from './email.ts';
import { renewalJob } from './renewals.ts';
import { billingConfigJob } from './auto-refill.ts';
import { DEFAULT_PRICES_PER_GB, ispPricesPerMonth } from '#common/billing/prices.ts';

let db: TestDatabase;
let ctx: JobContext;
let server: TestSmtpServer;
const logger = createLogger('test', 'silent');

/** A method that charges first and refuses while `refuse` is set; it records every key it was called with. */
class Card implements PaymentMethod {
  readonly name = 'card';
  readonly settlement = 'charge' as const;
  refuse = false;
  calls: ChargeRequest[] = [];
  hold: Promise<void> | undefined;
  async charge(request: ChargeRequest) {
    this.calls.push(request);
    if (this.hold) await this.hold;
    return this.refuse ? { ok: false as const, reason: 'card declined' } : { ok: true as const };
  }
}
const card = new Card();
const methods = paymentMethods(card);
const job = renewalJob({ methods, graceDays: 3 });

beforeAll(async () => {
  db = await createTestDatabase();
  ctx = { pool: db.pool, logger };
  server = await startTestSmtpServer();
});
// Each test's subscriptions end with it: the clock moves back and forth between tests.
afterEach(async () => {
  await db.pool.query(`UPDATE subscriptions SET status = 'cancelled' WHERE status IN ('active', 'past_due')`);
});
afterAll(async () => {
  await server.close();
  await db.drop();
});

/** Moves billing_now() to an instant (it runs on from there, by a few milliseconds per test step). */
let clock = '';
const clockAt = async (iso: string) => {
  clock = iso;
  const { rows } = await db.pool.query<{ o: string }>(`SELECT ($1::timestamptz - now())::text AS o`, [iso]);
  await setBillingClock(db.pool, rows[0]!.o);
};
const subscribe = async (accountId: string, input: Record<string, unknown>, method = 'invoice') => {
  const sub = await createSubscription(
    db.pool,
    accountId,
    subscriptionCreateSchema.parse({ startAt: clock, paymentMethod: method, ...input }),
    {
      kind: 'admin',
      id: 'test',
    },
  );
  return sub;
};
const renewals = async (id: string) =>
  (
    await db.pool.query<{ period: number; status: string; start: string; end: string }>(
      `SELECT period, status, to_char(period_start AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS start,
              to_char(period_end AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS end
         FROM subscription_renewals WHERE subscription_id = $1 ORDER BY period`,
      [id],
    )
  ).rows;
const sub = async (accountId: string) => (await listSubscriptions(db.pool, accountId))[0]!;
const sendEmails = (url = server.url) =>
  emailSenderJob({
    smtpUrl: url,
    from: 'proxyfleet <alerts@localhost>',
    logger,
    registry: new Registry(),
  }).run(ctx);

describe('subscription renewals', () => {
  it('the SQL period function and the TypeScript one agree across month ends and leap years', async () => {
    const { rows } = await db.pool.query<{ d: string }>(
      `SELECT to_char(subscription_period_start('2027-01-31T00:00:00Z', n) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS d
         FROM generate_series(0, 3) n`,
    );
    expect(rows.map((r) => r.d)).toEqual(['2027-01-31', '2027-02-28', '2027-03-31', '2027-04-30']);
  });

  it('ISP prices come from PROXYFLEET_ISP_PRICES per country, * for the rest, written by billing-config', async () => {
    const config = { prices: { currency: 'USD', perGb: DEFAULT_PRICES_PER_GB }, creditLimitCents: 100_000 };
    await billingConfigJob({ ...config, ispPrices: ispPricesPerMonth.parse('us=6.5,*=4') }).run(ctx);
    const price = async (country: string) =>
      (
        await db.pool.query<{ cents: string }>(
          `SELECT cents::text FROM subscription_price('isp_proxy', $1, 3, NULL, NULL)`,
          [country],
        )
      ).rows[0]!.cents;
    expect([await price('us'), await price('fr')]).toEqual(['1950', '1200']);
    await billingConfigJob({ ...config, ispPrices: ispPricesPerMonth.parse('') }).run(ctx);
    expect([await price('us'), await price('fr')]).toEqual(['1500', '1500']);
  });

  it('a plan started on 31 January renews on 28 February, not a second earlier, adds its GB and mails the invoice', async () => {
    await clockAt('2027-01-31T00:00:00Z');
    const account = await billingAccount(db.pool, 1e9, 'basic');
    const plan = await subscribe(account, {
      kind: 'bandwidth_plan',
      product: 'basic',
      gbPerPeriod: 10,
      autoRenew: true,
    });
    await job.run(ctx);
    expect(await renewals(plan.id)).toEqual([
      { period: 0, status: 'paid', start: '2027-01-31', end: '2027-02-28' },
    ]);
    await clockAt('2027-02-27T23:59:59Z');
    await job.run(ctx);
    expect(await renewals(plan.id)).toHaveLength(1);
    await clockAt('2027-02-28T00:00:00Z');
    await job.run(ctx);
    await job.run(ctx);
    expect((await renewals(plan.id)).map((r) => [r.start, r.end])).toEqual([
      ['2027-01-31', '2027-02-28'],
      ['2027-02-28', '2027-03-31'],
    ]);
    const s = await sub(account);
    expect([s.status, s.paidUntil, s.nextRenewalAt, s.price, s.unusedGb]).toEqual([
      'active',
      '2027-03-31T00:00:00.000Z',
      '2027-03-31T00:00:00.000Z',
      20,
      'roll_over',
    ]);
    const { rows } = await db.pool.query<{ total: string }>(
      `SELECT total_bytes::text AS total FROM balances WHERE account_id = $1 AND product = 'basic'`,
      [account],
    );
    expect(rows[0]!.total).toBe(String(21e9)); // 1 GB bought + 2 x 10 GB, nothing lapsed
    const { invoices } = await listInvoices(db.pool, account, { limit: 10 });
    expect(invoices.slice(0, 2).map((i) => [i.source, i.amount, i.gb, i.description])).toEqual([
      ['renewal', 20, 10, '10 GB basic plan, 2027-02-28 to 2027-03-31'],
      ['renewal', 20, 10, '10 GB basic plan, 2027-01-31 to 2027-02-28'],
    ]);
    await sendEmails();
    const mail = server.messages.find(
      (m) =>
        m.subject ===
        `Invoice #${invoices[0]!.number}: renewal of 10 GB basic plan, 2027-02-28 to 2027-03-31`,
    );
    expect(mail?.text).toContain('unused GB roll over');
    expect(mail?.text).toContain('It renews on 2027-03-31');
  });

  it('an ISP rental started on 31 January 2028 renews on 29 February and is paid until 31 March', async () => {
    await clockAt('2028-01-31T00:00:00Z');
    const account = await billingAccount(db.pool, 1e9);
    const isp = await subscribe(account, {
      kind: 'isp_proxy',
      country: 'de',
      proxyCount: 2,
      ispProxyIds: [],
      autoRenew: true,
    });
    await job.run(ctx);
    await clockAt('2028-02-29T00:00:00Z');
    await job.run(ctx);
    expect((await renewals(isp.id)).map((r) => r.end)).toEqual(['2028-02-29', '2028-03-31']);
    const { invoices } = await listInvoices(db.pool, account, { limit: 1 });
    expect(invoices[0]).toMatchObject({
      source: 'renewal',
      product: null,
      bytes: 0,
      amount: 10,
      description: '2 ISP proxies (DE), 2028-02-29 to 2028-03-31',
    });
  });

  it('a worker stopped for three months catches up one renewal per missed period; a clock step back renews nothing', async () => {
    await clockAt('2027-05-15T12:00:00Z');
    const account = await billingAccount(db.pool, 1e9);
    const s = await subscribe(account, {
      kind: 'bandwidth_plan',
      product: 'light',
      gbPerPeriod: 1,
      autoRenew: true,
    });
    await job.run(ctx);
    await clockAt('2027-08-16T00:00:00Z');
    await job.run(ctx);
    await job.run(ctx);
    expect((await renewals(s.id)).map((r) => r.start)).toEqual([
      '2027-05-15',
      '2027-06-15',
      '2027-07-15',
      '2027-08-15',
    ]);
    // The clock stepping back and forward again neither renews twice nor skips.
    await clockAt('2027-06-01T00:00:00Z');
    await job.run(ctx);
    await clockAt('2027-09-15T12:00:00Z'); // period 4 starts at the start's time of day, 12:00 UTC
    await job.run(ctx);
    await job.run(ctx);
    expect((await renewals(s.id)).map((r) => r.start)).toEqual([
      '2027-05-15',
      '2027-06-15',
      '2027-07-15',
      '2027-08-15',
      '2027-09-15',
    ]);
  });

  it('two workers racing over 24 due periods bill each exactly once', async () => {
    await clockAt('2025-01-10T00:00:00Z');
    const account = await billingAccount(db.pool, 1e9);
    const s = await subscribe(account, {
      kind: 'bandwidth_plan',
      product: 'light',
      gbPerPeriod: 1,
      autoRenew: true,
    });
    await clockAt('2026-12-10T00:00:00Z');
    const other: Pool = createPool({ url: db.url, max: 2, applicationName: 'renewals-test', logger });
    try {
      const [a, b] = await Promise.all([
        renewDue(db.pool, { methods, graceDays: 3, logger }),
        renewDue(other, { methods, graceDays: 3, logger }),
      ]);
      expect(a.renewed + b.renewed).toBe(24);
    } finally {
      await other.end();
    }
    const periods = (await renewals(s.id)).map((r) => r.period);
    expect(periods).toEqual(Array.from({ length: 24 }, (_, i) => i));
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM invoices WHERE subscription_id = $1`,
      [s.id],
    );
    expect(rows[0]!.n).toBe(24);
  });

  it('a worker killed mid-renewal bills the period once, with the same idempotency key on retry', async () => {
    await clockAt('2027-03-01T00:00:00Z');
    const account = await billingAccount(db.pool, 1e9);
    const s = await subscribe(
      account,
      { kind: 'isp_proxy', country: 'us', proxyCount: 1, ispProxyIds: [], autoRenew: true },
      'card',
    );
    let release!: () => void;
    card.hold = new Promise((r) => (release = r));
    const killed = createPool({ url: db.url, max: 2, applicationName: 'renewals-test', logger });
    killed.on('error', () => undefined);
    const first = renewOne(killed, { methods, graceDays: 3, logger });
    while (!card.calls.some((c) => c.idempotencyKey === `subscription:${s.id}:period:0`))
      await new Promise((r) => setTimeout(r, 20));
    // The worker's connection dies while the payment method answers: its transaction rolls back.
    await db.pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
          AND state = 'idle in transaction'`,
    );
    release();
    card.hold = undefined;
    await expect(first).rejects.toThrow();
    card.calls.length = 0;
    await killed.end().catch(() => undefined);
    expect(await renewals(s.id)).toEqual([]);
    expect(await renewOne(db.pool, { methods, graceDays: 3, logger })).toBe('renewed');
    expect(await renewOne(db.pool, { methods, graceDays: 3, logger })).toBe('none');
    expect(card.calls.map((c) => c.idempotencyKey)).toEqual([`subscription:${s.id}:period:0`]);
    expect(await renewals(s.id)).toHaveLength(1);
  });

  it("a plan's renewal takes the balance row before the credit lock, as a gateway's draw: no deadlock", async () => {
    await clockAt('2027-04-01T00:00:00Z');
    const account = await billingAccount(db.pool, 1e9, 'basic');
    const s = await subscribe(account, {
      kind: 'bandwidth_plan',
      product: 'basic',
      gbPerPeriod: 1,
      autoRenew: true,
    });
    // A draw: the balance row first...
    const draw = await db.pool.connect();
    try {
      await draw.query('BEGIN');
      await draw.query(`SELECT 1 FROM balances WHERE account_id = $1 AND product = 'basic' FOR UPDATE`, [
        account,
      ]);
      const drawPid = (await draw.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const renewing = renewOne(db.pool, { methods, graceDays: 3, logger });
      await until(
        async () =>
          (
            await db.pool.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> $1`,
              [drawPid],
            )
          ).rows[0]!.n === 1,
        'the renewal to wait for a lock the draw holds',
      );
      // ...then the credit lock (billing_refill's credit check): the renewal does not hold it.
      await draw.query('SELECT billing_credit_lock($1)', [account]);
      await draw.query('COMMIT');
      await expect(renewing).resolves.toBe('renewed');
    } finally {
      draw.release();
    }
    expect(await renewals(s.id)).toHaveLength(1);
  });

  it('a refused payment: past due with one email, retried during grace, then expired after 3 days with an email', async () => {
    await clockAt('2027-06-01T00:00:00Z');
    const account = await billingAccount(db.pool, 1e9);
    const { rows: proxy } = await db.pool.query<{ id: string }>(
      `INSERT INTO isp_proxies (account_id, host, port, username, password_enc, country)
       VALUES ($1, '203.0.113.7', 8000, 'isp-' || gen_random_uuid(), '\\x00', 'fr') RETURNING id`,
      [account],
    );
    const s = await subscribe(
      account,
      { kind: 'isp_proxy', country: 'fr', proxyCount: 1, ispProxyIds: [proxy[0]!.id], autoRenew: true },
      'card',
    );
    await job.run(ctx);
    card.refuse = true;
    await clockAt('2027-07-01T00:00:00Z');
    await job.run(ctx);
    expect(await sub(account)).toMatchObject({
      status: 'past_due',
      lastError: 'card declined',
      paidUntil: '2027-07-01T00:00:00.000Z',
      graceEndsAt: '2027-07-04T00:00:00.000Z',
    });
    await clockAt('2027-07-02T00:00:00Z');
    await job.run(ctx); // retried an hour later, refused again: no second email
    await clockAt('2027-07-03T23:59:00Z');
    await job.run(ctx);
    expect((await sub(account)).status).toBe('past_due');
    await clockAt('2027-07-04T00:00:00Z');
    await job.run(ctx);
    expect((await sub(account)).status).toBe('expired');
    const { rows: p } = await db.pool.query<{ status: string }>(
      'SELECT status FROM isp_proxies WHERE id = $1',
      [proxy[0]!.id],
    );
    expect(p[0]!.status).toBe('expired');
    const { rows: emails } = await db.pool.query<{ kind: string }>(
      `SELECT kind FROM email_outbox WHERE account_id = $1 AND kind LIKE 'subscription%' ORDER BY id`,
      [account],
    );
    expect(emails.map((e) => e.kind)).toEqual(['subscription_past_due', 'subscription_expired']);
    expect((await renewals(s.id)).map((r) => r.status)).toEqual(['paid', 'failed']);
    // Every renewal decision is in the audit log, by the system actor 'renewals'.
    const { rows: audit } = await db.pool.query<{
      action: string;
      actor: string;
      details: Record<string, unknown>;
    }>(
      `SELECT action, actor_kind || ':' || actor_id AS actor, details FROM audit_log
        WHERE account_id = $1 AND target_id = $2 ORDER BY id`,
      [account, s.id],
    );
    expect(audit.map((a) => [a.action, a.actor])).toEqual([
      ['subscription.created', 'admin:test'],
      ['subscription.renewed', 'system:renewals'],
      ['subscription.renewal_failed', 'system:renewals'], // 1 July
      ['subscription.renewal_failed', 'system:renewals'], // 2 July, retried
      ['subscription.renewal_failed', 'system:renewals'], // 3 July 23:59, retried
      ['subscription.expired', 'system:renewals'], // 4 July
    ]);
    expect(audit[2]!.details).toMatchObject({ period: 1, reason: 'card declined', retry: false });
    expect(audit[5]!.details).toMatchObject({ reason: 'not paid within 3 days' });
    // Nothing renews any more, however far the clock moves.
    await clockAt('2027-12-01T00:00:00Z');
    await job.run(ctx);
    expect(await renewals(s.id)).toHaveLength(2);
    card.refuse = false;
  });

  it('a suspended account does not renew: past due, then expired; SMTP down delays the emails and loses none', async () => {
    await clockAt('2027-09-10T00:00:00Z');
    const account = await billingAccount(db.pool, 1e9);
    await subscribe(account, { kind: 'bandwidth_plan', product: 'mobile', gbPerPeriod: 5, autoRenew: true });
    await job.run(ctx);
    await db.pool.query(`UPDATE accounts SET status = 'suspended' WHERE id = $1`, [account]);
    await clockAt('2027-10-10T00:00:00Z');
    await job.run(ctx);
    expect(await sub(account)).toMatchObject({ status: 'past_due', lastError: 'the account is suspended' });
    await clockAt('2027-10-13T00:00:00Z');
    await job.run(ctx);
    expect((await sub(account)).status).toBe('expired');
    // SMTP down: a closed port. The emails stay pending; nothing is lost.
    const down = await startTestSmtpServer();
    const downUrl = down.url;
    await down.close();
    await sendEmails(downUrl);
    const pending = async () =>
      (
        await db.pool.query<{ kind: string; status: string }>(
          `SELECT kind, status FROM email_outbox WHERE account_id = $1 AND kind LIKE 'subscription%' ORDER BY id`,
          [account],
        )
      ).rows;
    expect(await pending()).toEqual([
      { kind: 'subscription_past_due', status: 'pending' },
      { kind: 'subscription_expired', status: 'pending' },
    ]);
    await db.pool.query(`UPDATE email_outbox SET next_attempt_at = now() WHERE account_id = $1`, [account]);
    await sendEmails();
    expect((await pending()).map((e) => e.status)).toEqual(['sent', 'sent']);
    const subjects = server.messages.map((m) => m.subject);
    expect(subjects).toContain('Subscription expired: 5 GB mobile plan');
    // The invoice email, sent late, says what holds when it is sent: the plan no longer renews.
    const late = server.messages.find(
      (m) => m.subject?.startsWith('Invoice #') && m.subject.includes('5 GB mobile'),
    );
    expect(late?.text).toContain('It no longer renews (expired).');
  });
});
