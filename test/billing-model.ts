// A small in-memory model of the money path (docs/adr/0073, 0075) and fast-check commands that run
// against the real database functions: three simulated gateways relaying, reporting and flushing
// (test/billing.ts), folds, sweeps, operator purchases, setting changes, month changes, payments of
// charge-first refills and a worker killed mid-payment, and the emails rendered as they are sent;
// card payments through Stripe and operators settling invoices are in billing-model-payments.ts
// (Stripe's side in billing-model-stripe.ts).
// The model keeps what was bought, used and taken back and counts crossings of the thresholds on
// its own; each command checks the invariants of the issue against it.
import fc from 'fast-check';
import { expect } from '@jest/globals';
import { createPool, type Pool } from '#common/db/pool.ts';
import { createLogger } from '#common/logger.ts';
import { putAutoRefill } from '#common/billing/auto-refill.ts';
import { setCreditLimit } from '#common/billing/credit.ts';
import { paymentMethods, type PaymentMethod } from '#common/billing/payment.ts';
import { recordPurchase } from '#common/billing/purchases.ts';
import { payPendingRefill } from '#common/billing/refills.ts';
import { balanceSweepJob } from '../worker/src/jobs/auto-refill.ts';
import { formatBytes, renderEmail } from '../worker/src/jobs/render.ts';
import * as policy from '../gateway/src/accounting/policy.ts';
import { newBudgetState } from '../gateway/src/accounting/budget-state.ts';
import { allocate } from '../gateway/src/accounting/lease-book.ts';
import { relayed } from '../gateway/src/accounting/lease-client.ts';
import type { SimGateway } from './billing.ts';
import type { Payments } from './billing-model-stripe.ts';
import { foldAll, nextMonthOffset, setBillingClock } from './billing.ts';

/** The model's unit of bandwidth: amounts are whole units, so prices are whole cents. */
export const UNIT = 100_000_000;
const CENTS_PER_GB = 200; // basic, the seeded price (migrations/0060)
const logger = createLogger('test', 'silent');

export interface Model {
  bought: number;
  /** Every byte the gateways relayed (some not yet known to the database). */
  relayed: number;
  /** What the database says is used (billing_used), checked to stay within [folded, relayed]. */
  known: number;
  refill: { enabled: boolean; threshold: number; refill: number; max: number; method: 'invoice' | 'card' };
  alert: { percent: number; floor: number | null };
  creditLimitCents: number;
  refillArmed: boolean;
  refillCrossings: number;
  alertArmed: boolean;
  alertCrossings: number;
  /** Refills seen (checked against the caps) and bought (their bytes added). */
  seenRefills: Set<string>;
  paidRefills: Set<string>;
  /** The last email id seen by the checks. */
  seenEmail: number;
  /** Invoices settled (paid, void, refunded) by the model's reckoning; any other is 'issued'. */
  invoices: Map<string, 'paid' | 'void' | 'refunded'>;
  /** Bytes voids, refunds and disputes took back (bought already counts them out). */
  takenBack: number;
  /** Card payments and Stripe's side of them. */
  pay: Payments;
}

export interface Real {
  db: Pool;
  url: string;
  accountId: string;
  gateways: SimGateway[];
  /** Outcomes of the card: the next charges answer these (then ok). */
  declines: boolean[];
}

const card: (real: Real) => PaymentMethod = (real) => ({
  name: 'card',
  settlement: 'charge',
  charge: () =>
    Promise.resolve(real.declines.shift() ? { ok: false, reason: 'card declined' } : { ok: true }),
});

const alertThreshold = (m: Model) =>
  Math.max(Math.floor((m.bought * m.alert.percent) / 100), m.alert.floor ?? 0);

/** remaining fell (used rose): crossings of armed thresholds, as the database decides them. */
function fall(m: Model): void {
  const remaining = m.bought - m.known;
  if (m.refill.enabled && m.refillArmed && remaining < m.refill.threshold) {
    m.refillArmed = false;
    m.refillCrossings++;
  }
  if (m.bought > 0 && m.alertArmed && remaining <= alertThreshold(m)) {
    m.alertArmed = false;
    m.alertCrossings++;
  }
}

/** remaining rose (a purchase, a refill) or a threshold fell: re-armed where above again. */
function rise(m: Model): void {
  const remaining = m.bought - m.known;
  if (!m.refillArmed && remaining >= m.refill.threshold) m.refillArmed = true;
  if (!m.alertArmed && remaining > alertThreshold(m)) m.alertArmed = true;
}

interface Snapshot {
  total: number;
  folded: number;
  /** What the database says is used (billing_used). */
  known: number;
  refills: {
    id: string;
    bytes: number;
    status: string;
    payment_method: string;
    /** Refills of its calendar month up to it (pending or bought). */
    in_month: number;
    /** The month's bill-later invoices up to its own. */
    credit: number | null;
  }[];
  /** Refills bought or pending, and those of them without exactly one invoice and one email. */
  refill_count: number;
  bad_refills: number;
  invoice_bytes: number;
  /** What voids and refunds took back of the invoices' bytes. */
  taken_bytes: number;
  invoice_cents: number;
  cents_due: number;
  /** Invoices whose status is not the model's. */
  bad_status: number;
  /** The month's unpaid bill-later invoices: credit_status's, and by the model's statuses. */
  credit_used: number;
  credit_model: number;
  low: number;
  new_low: number;
  last_email: number;
}

/** Everything the checks read, in one round trip (the sums over invoices and refills when `full`). */
async function snapshot(m: Model, real: Real, full: boolean): Promise<Snapshot> {
  const { rows } = await real.db.query<Snapshot>(
    `SELECT b.total_bytes AS total, b.used_bytes AS folded, billing_used(b.used_bytes, b.reported_used_bytes) AS known,
       coalesce((SELECT json_agg(x) FROM (
         SELECT r.id, r.bytes, r.status, r.payment_method,
                (SELECT count(*)::int FROM auto_refills y WHERE y.account_id = r.account_id
                    AND y.status IN ('pending', 'succeeded') AND y.created_at <= r.created_at
                    AND billing_month_start(y.created_at) = billing_month_start(r.created_at)) AS in_month,
                (SELECT sum(i2.amount_cents)::int FROM invoices i JOIN invoices i2 ON i2.account_id = i.account_id
                    AND i2.settlement = 'deferred' AND i2.status = 'issued' AND i2.number <= i.number
                    AND billing_month_start(i2.issued_at) = billing_month_start(i.issued_at)
                  WHERE i.purchase_id = r.purchase_id) AS credit
           FROM auto_refills r WHERE r.account_id = $1 AND r.status IN ('pending', 'succeeded')) x), '[]') AS refills,
       (SELECT count(*)::int FROM auto_refills WHERE account_id = $1 AND status IN ('pending', 'succeeded')) AS refill_count,
       (SELECT count(*)::int FROM auto_refills r WHERE $4 AND r.account_id = $1 AND r.status = 'succeeded'
           AND ((SELECT count(*) FROM invoices i WHERE i.purchase_id = r.purchase_id) <> 1
             OR (SELECT count(*) FROM email_outbox o JOIN invoices i ON o.dedupe_key = 'new_invoice:' || i.id
                  WHERE i.purchase_id = r.purchase_id) <> 1)) AS bad_refills,
       i.invoice_bytes, i.taken_bytes, i.invoice_cents, i.cents_due, i.bad_status,
       CASE WHEN $4 THEN (SELECT used_cents FROM credit_status($1)) END AS credit_used, i.credit_model,
       (SELECT count(*)::int FROM email_outbox WHERE account_id = $1 AND kind = 'low_bandwidth') AS low,
       (SELECT count(*)::int FROM email_outbox WHERE account_id = $1 AND kind = 'low_bandwidth' AND id > $3) AS new_low,
       (SELECT coalesce(max(id), 0)::int FROM email_outbox WHERE account_id = $1) AS last_email
       FROM balances b
       LEFT JOIN LATERAL (SELECT coalesce(sum(bytes), 0)::bigint AS invoice_bytes, coalesce(sum(amount_cents), 0)::bigint AS invoice_cents,
                                 coalesce(sum(coalesce(voided_bytes, 0) + refund_taken_bytes), 0)::bigint AS taken_bytes,
                                 coalesce(sum(round(bytes * $2::numeric / 1000000000)), 0)::bigint AS cents_due,
                                 count(*) FILTER (WHERE coalesce($5::jsonb ->> id::text, 'issued') <> status)::int AS bad_status,
                                 coalesce(sum(amount_cents) FILTER (WHERE settlement = 'deferred' AND $5::jsonb ->> id::text IS NULL
                                   AND issued_at >= billing_month_start(billing_now())), 0)::bigint AS credit_model
                            FROM invoices WHERE $4 AND account_id = $1) i ON true
      WHERE b.account_id = $1 AND b.product = 'basic'`,
    [
      real.accountId,
      CENTS_PER_GB,
      m.seenEmail,
      full,
      full ? JSON.stringify(Object.fromEntries(m.invoices)) : '{}',
    ],
  );
  return rows[0]!;
}

/**
 * After every command: the model judges a fall of remaining on what was bought before the command
 * (a refill is bought after the used that crossed), then adds what was bought (`purchased`, and
 * the refills the database bought or was paid for) and judges a rise; then the invariants.
 */
export async function settle(m: Model, real: Real, purchased = 0, full = true): Promise<void> {
  const o = await snapshot(m, real, full);
  expect(o.known).toBeGreaterThanOrEqual(o.folded);
  expect(o.known).toBeLessThanOrEqual(m.relayed);
  m.known = o.known;
  fall(m);
  for (const r of o.refills) {
    if (!m.seenRefills.has(r.id)) {
      m.seenRefills.add(r.id);
      expect(r.in_month).toBeLessThanOrEqual(m.refill.max); // never past the monthly cap
    }
    if (r.status === 'succeeded' && !m.paidRefills.has(r.id)) {
      m.paidRefills.add(r.id);
      purchased += r.bytes;
      // Never past the credit limit: the month's bill-later invoices up to this one.
      if (r.payment_method === 'invoice') expect(r.credit).toBeLessThanOrEqual(m.creditLimitCents);
    }
  }
  m.bought += purchased;
  expect(o.total).toBe(m.bought);
  rise(m);
  expect(o.refill_count).toBeLessThanOrEqual(m.refillCrossings); // refills <= crossings
  if (full) {
    expect(o.bad_refills).toBe(0); // each refill: one invoice, one new-invoice email
    expect(o.taken_bytes).toBe(m.takenBack); // each void, refund and dispute took back once ...
    expect(o.invoice_bytes - o.taken_bytes).toBe(m.bought); // ... and invoices add up to what was bought ...
    expect(o.invoice_cents).toBe(o.cents_due); // ... at the price
    expect(o.bad_status).toBe(0); // every invoice issued, paid, void or refunded as the model says
    expect(o.credit_used).toBe(o.credit_model); // the credit limit counts only unpaid bill-later invoices
  }
  expect(o.low).toBeLessThanOrEqual(m.alertCrossings); // at most one low email per crossing
  if (o.new_low > 0) expect(m.bought - m.known).toBeLessThanOrEqual(alertThreshold(m)); // none while above
  m.seenEmail = o.last_email;
}

export type Cmd = fc.AsyncCommand<Model, Real>;

export function command(
  label: string,
  run: (m: Model, real: Real) => Promise<void>,
  check = (_: Readonly<Model>) => true,
): Cmd {
  return { check, run, toString: () => label };
}

/** A gateway relays `bytes`, drawing leases as it runs out, as a customer's stream would. */
const relay = (g: number, bytes: number) =>
  command(`relay(gw${g}, ${bytes / UNIT}u)`, async (m, real) => {
    const gw = real.gateways[g]!;
    let left = bytes;
    while (left > 0) {
      const spent = gw.spend(left);
      left -= spent;
      m.relayed += spent;
      if (left === 0) break;
      const answer = await gw.draw(2 * UNIT);
      await settle(m, real, 0, false);
      if (answer.granted === 0) break;
    }
    await settle(m, real);
  });

/** A socket read, and the chunks of a 250 ms tick (16 MiB/s): a draw's report of exact counts lags by up to that. */
const CHUNK = 64 * 1024;
const TICK_CHUNKS = 64;

/**
 * One customer's stream through gateway g as the real gateway runs it (docs/adr/0097): the ledger's
 * policy decides when to draw (prefetch at half a lease, leases growing x4 when spent fast), exact
 * counts arrive each tick while the estimate runs ahead of them, a draw reports `relayed` (lease-client.ts),
 * a denial is asked again while the leases hold bytes and once more when they are spent, and a cut
 * or a refused admission stops the stream. Draws are answered before the next chunk (no overdraft:
 * the overspend bound is policy.test.ts's). The lower bounds, when it stopped: no 402 while bytes
 * remain that no other gateway holds, and a refill configured and affordable was bought before.
 */
const stream = (g: number, bytes: number) =>
  command(`stream(gw${g}, ${bytes / UNIT}u)`, async (m, real) => {
    const gw = real.gateways[g]!;
    const s = newBudgetState();
    const far = Number.MAX_SAFE_INTEGER;
    s.leases = gw.leases.map((l) => Object.assign(l, { expiresAt: far }));
    policy.recompute(s);
    let now = 1_000_000;
    const draw = async (): Promise<boolean> => {
      const wanted = policy.leaseRequestSize(s, now);
      policy.drawStarted(s);
      const answer = await gw.draw(wanted, policy.MIN_LEASE_BYTES, relayed(s));
      if (answer.id) {
        policy.granted(s, { id: answer.id, granted: answer.granted, expiresAt: far }, answer.held, now);
        s.leases[s.leases.length - 1] = Object.assign(gw.leases.at(-1)!, { expiresAt: far });
      } else policy.denied(s, answer.held, now);
      await settle(m, real, 0, false);
      return policy.drawSettled(s) === 'cut';
    };
    let stopped = !policy.canAdmit(s) && ((await draw()) || !policy.canAdmit(s));
    let left = bytes;
    let sinceTick = 0;
    for (let chunks = 1; !stopped && left > 0; chunks++) {
      now += 250 / TICK_CHUNKS;
      // After a denial nothing passes the leases (the model's draws leave no overdraft to use).
      const room = s.deniedAt ? s.available - s.estimate : CHUNK;
      const c = Math.max(0, Math.min(CHUNK, left, room));
      s.estimate += c;
      sinceTick += c;
      left -= c;
      m.relayed += c;
      const past = c === 0 ? { ...s, estimate: s.estimate + 1 } : s;
      if (past.estimate > s.trigger) {
        const d = policy.pressure(past);
        if (d === 'cut') stopped = true;
        else if (d === 'draw' || d === 'redraw') stopped = await draw();
      }
      if (chunks % TICK_CHUNKS === 0 || stopped || left === 0) {
        allocate(s, sinceTick);
        gw.unflushed += sinceTick;
        sinceTick = 0;
        if (policy.tick(s, 250, now, true) && !stopped && left > 0) stopped = await draw();
      }
    }
    await settle(m, real);
    if (!stopped) return;
    // No 402 while bytes remain: what was bought and not relayed, outside the other gateways' leases.
    const othersHold = real.gateways.reduce((n, o, i) => n + (i === g ? 0 : o.available), 0);
    expect(m.bought - m.relayed - othersHold).toBeLessThanOrEqual(0);
    // Below the threshold by what this gateway relayed (all of it, reported or not: it stopped).
    const { rows } = await real.db.query<{ id: string; reported: number }>(
      'SELECT id, greatest(reported_bytes, charged_bytes) AS reported FROM bandwidth_leases WHERE id = ANY($1)',
      [gw.leases.map((l) => l.id)],
    );
    const unreported = gw.leases.reduce((n, l) => {
      const reported = rows.find((r) => r.id === l.id)?.reported ?? 0;
      return n + Math.max(0, Math.min(l.spent, l.granted) - reported);
    }, 0);
    // Not when nothing is left bought (a void took it all back): billing_check decides nothing at 0.
    if (m.refill.enabled && m.bought > 0 && m.bought - m.known - unreported < m.refill.threshold)
      await refillDecided(real);
  });

/**
 * Traffic stopped below the auto-refill threshold: the crossing was seen, and its refill was decided
 * (bought, pending a charge, failed) or could not be (off, the monthly cap, the credit limit).
 */
async function refillDecided(real: Real): Promise<void> {
  const { rows } = await real.db.query<{ armed: boolean; decided: boolean; affordable: boolean }>(
    `SELECT c.armed,
            EXISTS (SELECT 1 FROM auto_refills r WHERE r.account_id = c.account_id
                       AND r.idempotency_key = 'auto-refill:basic:crossing:' || c.crossings) AS decided,
            v.allowed AS affordable
       FROM billing_crossings c, billing_refill_verdict(c.account_id, 'basic') v
      WHERE c.account_id = $1 AND c.product = 'basic' AND c.kind = 'auto_refill'`,
    [real.accountId],
  );
  const row = rows[0]!;
  expect(row.armed).toBe(false);
  expect(row.decided || !row.affordable).toBe(true);
}

const flush = (g: number, returnAll: boolean) =>
  command(`flush(gw${g}${returnAll ? ', return all' : ''})`, async (m, real) => {
    await real.gateways[g]!.flush(returnAll);
    await settle(m, real);
  });

const fold = command('fold', async (m, real) => {
  await foldAll(real.db);
  await settle(m, real);
});

const sweep = command('sweep', async (m, real) => {
  await balanceSweepJob.run({ pool: real.db, logger });
  await settle(m, real);
});

const purchase = (bytes: number) =>
  command(`purchase(${bytes / UNIT}u)`, async (m, real) => {
    await recordPurchase(real.db, { accountId: real.accountId, product: 'basic', bytes });
    await settle(m, real, bytes);
  });

const setAutoRefill = (s: Model['refill']) =>
  command(`autoRefill(${JSON.stringify(s)})`, async (m, real) => {
    await putAutoRefill(
      real.db,
      real.accountId,
      'basic',
      {
        enabled: s.enabled,
        thresholdGb: s.threshold / 1e9,
        refillGb: s.refill / 1e9,
        maxRefillsPerMonth: s.max,
      },
      s.method,
    );
    m.refill = { ...s };
    await settle(m, real);
  });

const setAlert = (percent: number, floor: number | null) =>
  command(`alert(${percent}%, floor ${floor === null ? 'none' : `${floor / UNIT}u`})`, async (m, real) => {
    await real.db.query(
      'UPDATE alert_settings SET low_bandwidth_percent = $2, low_bandwidth_floor_bytes = $3 WHERE account_id = $1',
      [real.accountId, percent, floor],
    );
    m.alert = { percent, floor };
    await settle(m, real);
  });

const setCredit = (cents: number) =>
  command(`creditLimit(${cents})`, async (m, real) => {
    await setCreditLimit(real.db, real.accountId, cents);
    m.creditLimitCents = cents;
    await settle(m, real);
  });

const nextMonth = command('nextMonth', async (m, real) => {
  await setBillingClock(real.db, await nextMonthOffset(real.db));
  await settle(m, real);
});

const pay = (decline: boolean) =>
  command(`pay(${decline ? 'declined' : 'ok'})`, async (m, real) => {
    real.declines.push(decline);
    while (await payPendingRefill(real.db, paymentMethods(card(real)), logger));
    real.declines.length = 0;
    await settle(m, real);
  });

/** The worker dies while a card is being charged: nothing is bought, the refill stays pending. */
const workerKilled = command(
  'workerKilled',
  async (m, real) => {
    const { rows } = await real.db.query(
      `SELECT 1 FROM auto_refills WHERE account_id = $1 AND status = 'pending'`,
      [real.accountId],
    );
    if (rows.length === 0) return;
    const name = `doomed-${process.pid}-${Date.now()}`;
    const pool = createPool({ url: real.url, max: 1, applicationName: name, logger });
    let charged: () => void = () => undefined;
    const charging = new Promise<void>((r) => (charged = r));
    let answer: (result: { ok: true }) => void = () => undefined;
    const hanging: PaymentMethod = {
      name: 'card',
      settlement: 'charge',
      charge: () => {
        charged();
        return new Promise((r) => (answer = r));
      },
    };
    const paying = payPendingRefill(pool, paymentMethods(hanging), logger).then(
      () => 'finished',
      () => 'killed',
    );
    await charging;
    await real.db.query(
      'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1',
      [name],
    );
    // The provider answers after the worker's session died: nothing can be recorded any more.
    answer({ ok: true });
    expect(await paying).toBe('killed');
    await pool.end().catch(() => undefined);
    await settle(m, real);
  },
  (m) => m.refill.method === 'card',
);

/** Every gateway flushes, the worker folds, and every due email is rendered as the sender would. */
const sendEmails = command('sendEmails', async (m, real) => {
  for (const gw of real.gateways) await gw.flush();
  await foldAll(real.db);
  await settle(m, real);
  expect(m.known).toBe(m.relayed); // quiescent: everything relayed is folded
  const { rows } = await real.db.query<{ id: number; kind: string; payload: unknown }>(
    `SELECT id, kind, payload FROM email_outbox WHERE account_id = $1 AND status = 'pending' ORDER BY id`,
    [real.accountId],
  );
  for (const row of rows) {
    const rendered = await renderEmail(real.db, row.kind, real.accountId, row.payload);
    await real.db.query('UPDATE email_outbox SET status = $2 WHERE id = $1', [
      row.id,
      'drop' in rendered ? 'dropped' : 'sent',
    ]);
    if (row.kind !== 'low_bandwidth') continue;
    const remaining = m.bought - m.relayed;
    if ('drop' in rendered) {
      // Dropped: no longer low, or nothing bought any more (a void took it all back: 'no balance').
      if (m.bought > 0) expect(remaining).toBeGreaterThan(alertThreshold(m));
      continue;
    }
    // The remaining stated is the model's bought - used.
    expect(rendered.body).toContain(`${formatBytes(remaining)} of ${formatBytes(m.bought)} left`);
    expect(rendered.subject.includes('used up')).toBe(remaining <= 0);
  }
});

const units = (min: number, max: number) => fc.integer({ min, max }).map((n) => n * UNIT);
const gateway = fc.integer({ min: 0, max: 2 });

export const commands = [
  fc.tuple(gateway, units(1, 8)).map(([g, b]) => relay(g, b)),
  fc.tuple(gateway, units(1, 8)).map(([g, b]) => relay(g, b)),
  fc.tuple(gateway, units(1, 8)).map(([g, b]) => stream(g, b)),
  fc.tuple(gateway, fc.boolean()).map(([g, all]) => flush(g, all)),
  fc.constant(fold),
  fc.constant(sweep),
  units(1, 20).map((b) => purchase(b)),
  fc
    .record({
      enabled: fc.boolean(),
      // Also thresholds smaller than a grown lease (1-64 MB): the refill must come before the cut.
      threshold: fc.oneof(
        units(1, 10),
        fc.integer({ min: 1, max: 64 }).map((n) => n * 1e6),
      ),
      extra: units(1, 20),
      max: fc.integer({ min: 1, max: 4 }),
      method: fc.constantFrom('invoice' as const, 'card' as const),
    })
    .map((s) => setAutoRefill({ ...s, refill: Math.ceil(s.threshold / UNIT) * UNIT + s.extra })),
  fc
    .tuple(fc.integer({ min: 5, max: 60 }), fc.option(units(1, 10), { nil: null }))
    .map(([p, f]) => setAlert(p, f)),
  fc.integer({ min: 0, max: 1500 }).map((c) => setCredit(c)),
  fc.constant(nextMonth),
  fc.boolean().map((d) => pay(d)),
  fc.constant(workerKilled),
  fc.constant(sendEmails),
];

/** A fresh model for an account that bought `bought` bytes, with the defaults. */
export function initialModel(bought: number): Model {
  return {
    bought,
    relayed: 0,
    known: 0,
    refill: { enabled: false, threshold: 0, refill: 0, max: 5, method: 'invoice' },
    alert: { percent: 10, floor: null },
    creditLimitCents: 100_000,
    refillArmed: true,
    refillCrossings: 0,
    alertArmed: true,
    alertCrossings: 0,
    seenRefills: new Set(),
    paidRefills: new Set(),
    seenEmail: 0,
    invoices: new Map(),
    takenBack: 0,
    pay: { cards: [], intents: [], queue: [], recorded: new Set(), returns: 0 },
  };
}
