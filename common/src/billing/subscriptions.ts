// Subscriptions (docs/billing.md, docs/adr/0080): ISP proxy rentals and bandwidth plans that
// renew monthly. The worker renews them (renewals.ts); this module creates, changes, cancels and
// lists them for the admin API, the customer API, the CLI and the dashboard.
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { AppError } from '../errors.ts';
import { withTransaction, type Pool, type PoolClient } from '../db/pool.ts';
import { lockAccountForAudit, recordAudit, type AuditActor } from '../audit/record.ts';
import { PRODUCTS, type Product } from '../products.ts';

export const SUBSCRIPTION_STATUSES = ['active', 'past_due', 'cancelled', 'expired'] as const;
export type SubscriptionStatus = (typeof SUBSCRIPTION_STATUSES)[number];

/** What every kind of subscription is created with: renewal, payment method and start. */
const RENEWAL_TERMS = {
  autoRenew: z.boolean().default(true),
  paymentMethod: z
    .string()
    .regex(/^[a-z][a-z0-9_-]{0,31}$/, 'must be a payment method name')
    .default('invoice')
    .describe('As auto-refill: "invoice" (bill later, within the credit limit) or a configured method'),
  startAt: z.iso.datetime().optional().describe('Default: now; periods start on its anniversary (UTC)'),
};

export const subscriptionCreateSchema = z.discriminatedUnion('kind', [
  z.strictObject({
    kind: z.literal('isp_proxy'),
    country: z
      .string()
      .regex(/^[a-z]{2}$/, 'must be a two-letter country code in lower case')
      .describe('The country of the rented proxies (its price per proxy-month)'),
    proxyCount: z.number().int().min(1).max(1000).default(1),
    ispProxyIds: z
      .array(z.uuid())
      .max(1000)
      .default([])
      .describe("The account's ISP proxies this rental pays for (they show its status and paidUntil)"),
    ...RENEWAL_TERMS,
  }),
  z.strictObject({
    kind: z.literal('bandwidth_plan'),
    product: z.enum(PRODUCTS),
    gbPerPeriod: z.number().int().min(1).max(100_000).describe('GB added at every renewal'),
    ...RENEWAL_TERMS,
  }),
]);
export type SubscriptionCreate = z.infer<typeof subscriptionCreateSchema>;

export const subscriptionChangeSchema = z
  .strictObject({
    proxyCount: z.number().int().min(1).max(1000).optional(),
    gbPerPeriod: z.number().int().min(1).max(100_000).optional(),
    autoRenew: z.boolean().optional(),
  })
  .refine((v) => Object.keys(v).length > 0, 'give at least one of proxyCount, gbPerPeriod, autoRenew');
export type SubscriptionChange = z.infer<typeof subscriptionChangeSchema>;

export const subscriptionViewSchema = z.object({
  id: z.string(),
  kind: z.enum(['isp_proxy', 'bandwidth_plan']),
  country: z.string().nullable(),
  proxyCount: z.number().int().nullable(),
  product: z.enum(PRODUCTS).nullable(),
  gbPerPeriod: z.number().int().nullable(),
  status: z.enum(SUBSCRIPTION_STATUSES),
  autoRenew: z.boolean(),
  paymentMethod: z.string(),
  startedAt: z.string(),
  paidUntil: z.string(),
  nextRenewalAt: z
    .string()
    .nullable()
    .describe('null when it will not renew (renewal off, cancelled, expired)'),
  price: z.number().describe('Per period, in currency units, from the price table now'),
  currency: z.string(),
  period: z.literal('month'),
  unusedGb: z.literal('roll_over').nullable().describe("A plan's unused GB stay (remaining = bought - used)"),
  lastError: z.string().nullable(),
  graceEndsAt: z.string().nullable().describe('past_due only: when it expires unless paid'),
});
export type SubscriptionView = z.infer<typeof subscriptionViewSchema>;

interface Row {
  id: string;
  kind: 'isp_proxy' | 'bandwidth_plan';
  country: string | null;
  proxy_count: number | null;
  product: Product | null;
  gb_per_period: number | null;
  status: SubscriptionStatus;
  auto_renew: boolean;
  payment_method: string;
  started_at: Date;
  paid_until: Date;
  next_renewal_at: Date;
  cents: number;
  currency: string;
  last_error: string | null;
  grace_ends_at: Date | null;
}

const SELECT = `SELECT s.id, s.kind, s.country, s.proxy_count, s.product, s.gb_per_period, s.status, s.auto_renew,
       s.payment_method, s.started_at, s.paid_until, s.next_renewal_at, p.cents, p.currency, s.last_error,
       CASE WHEN s.status = 'past_due' THEN s.grace_ends_at END AS grace_ends_at
  FROM subscriptions s
  CROSS JOIN LATERAL subscription_price(s.kind, s.country, s.proxy_count, s.product, s.gb_per_period) p`;

function toView(r: Row): SubscriptionView {
  const renews = r.auto_renew && (r.status === 'active' || r.status === 'past_due');
  return {
    id: r.id,
    kind: r.kind,
    country: r.country,
    proxyCount: r.proxy_count,
    product: r.product,
    gbPerPeriod: r.gb_per_period,
    status: r.status,
    autoRenew: r.auto_renew,
    paymentMethod: r.payment_method,
    startedAt: r.started_at.toISOString(),
    paidUntil: r.paid_until.toISOString(),
    nextRenewalAt: renews ? r.next_renewal_at.toISOString() : null,
    price: r.cents / 100,
    currency: r.currency,
    period: 'month',
    unusedGb: r.kind === 'bandwidth_plan' ? 'roll_over' : null,
    lastError: r.last_error,
    graceEndsAt: r.grace_ends_at?.toISOString() ?? null,
  };
}

type Db = Pool | PoolClient;

export async function listSubscriptions(db: Db, accountId: string): Promise<SubscriptionView[]> {
  const { rows } = await db.query<Row>(`${SELECT} WHERE s.account_id = $1 ORDER BY s.created_at, s.id`, [
    accountId,
  ]);
  return rows.map(toView);
}

export async function readSubscription(db: Db, accountId: string, id: string): Promise<SubscriptionView> {
  const { rows } = await db.query<Row>(`${SELECT} WHERE s.account_id = $1 AND s.id = $2`, [accountId, id]);
  if (!rows[0]) throw new AppError('SUBSCRIPTION_NOT_FOUND');
  return toView(rows[0]);
}

const audit = (
  client: PoolClient,
  accountId: string,
  actor: AuditActor,
  action: string,
  id: string,
  details: object,
) =>
  recordAudit(client, {
    accountId,
    actor,
    action,
    target: { type: 'subscription', id },
    details: details as Record<string, unknown>,
  });

/** Starts a subscription (audited); its first period is invoiced by the worker's next renewal pass. */
export async function createSubscription(
  pool: Pool,
  accountId: string,
  input: SubscriptionCreate,
  actor: AuditActor,
): Promise<SubscriptionView> {
  return withTransaction(pool, async (client) => {
    if (!(await lockAccountForAudit(client, accountId))) throw new AppError('ACCOUNT_NOT_FOUND');
    const id = await insertSubscription(client, accountId, input, actor);
    return readSubscription(client, accountId, id);
  });
}

/** The Idempotency-Key a customer subscribed with, and the request it came with. */
export interface SubscriptionKey {
  key: string;
  request: object;
}

/**
 * Inserts a subscription, links the ISP proxies it names and records `subscription.created`, in the
 * caller's transaction (which holds the account's row: lockAccountForAudit). Its first period is
 * unpaid: the worker's next pass pays it, or the caller does (payPeriod, renewals.ts).
 */
export async function insertSubscription(
  client: PoolClient,
  accountId: string,
  input: SubscriptionCreate,
  actor: AuditActor,
  idempotency?: SubscriptionKey,
): Promise<string> {
  const isp = input.kind === 'isp_proxy' ? input : null;
  const plan = input.kind === 'bandwidth_plan' ? input : null;
  const count = isp ? Math.max(isp.proxyCount, isp.ispProxyIds.length) : null;
  const { rows } = await client.query<{ id: string }>(
    `INSERT INTO subscriptions (account_id, kind, country, proxy_count, product, gb_per_period, auto_renew,
                                started_at, paid_until, next_renewal_at, payment_method, idempotency_key,
                                idempotency_request)
     SELECT $1, $2, $3, $4, $5, $6, $7, t, t, t, $9, $10, $11 FROM coalesce($8::timestamptz, billing_now()) t
     RETURNING id`,
    [
      accountId,
      input.kind,
      isp?.country ?? null,
      count,
      plan?.product ?? null,
      plan?.gbPerPeriod ?? null,
      input.autoRenew,
      input.startAt ?? null,
      input.paymentMethod,
      idempotency?.key ?? null,
      idempotency ? JSON.stringify(idempotency.request) : null,
    ],
  );
  const id = rows[0]!.id;
  if (isp && isp.ispProxyIds.length > 0) {
    const linked = await client.query(
      `UPDATE isp_proxies SET subscription_id = $3 WHERE account_id = $1 AND id = ANY($2::uuid[])`,
      [accountId, isp.ispProxyIds, id],
    );
    if (linked.rowCount !== new Set(isp.ispProxyIds).size) throw new AppError('ISP_PROXY_NOT_FOUND');
  }
  const view = await readSubscription(client, accountId, id);
  await audit(client, accountId, actor, 'subscription.created', id, {
    kind: view.kind,
    country: view.country,
    proxyCount: view.proxyCount,
    ispProxyIds: isp?.ispProxyIds ?? [],
    product: view.product,
    gbPerPeriod: view.gbPerPeriod,
    autoRenew: view.autoRenew,
    paymentMethod: view.paymentMethod,
    startedAt: view.startedAt,
    price: view.price,
    currency: view.currency,
  });
  return id;
}

/**
 * Changes what the next renewals buy (the paid period is not billed again) or whether it renews;
 * audited as subscription.changed, or subscription.auto_renew_changed when only that changed.
 */
export async function changeSubscription(
  pool: Pool,
  accountId: string,
  id: string,
  change: SubscriptionChange,
  actor: AuditActor,
): Promise<SubscriptionView> {
  return withTransaction(pool, async (client) => {
    if (!(await lockAccountForAudit(client, accountId))) throw new AppError('ACCOUNT_NOT_FOUND');
    const before = await readSubscription(client, accountId, id);
    if (change.proxyCount !== undefined && before.kind !== 'isp_proxy')
      throw new AppError('VALIDATION_FAILED', {
        detail: 'proxyCount: only an ISP proxy rental has a proxy count',
      });
    if (change.gbPerPeriod !== undefined && before.kind !== 'bandwidth_plan')
      throw new AppError('VALIDATION_FAILED', {
        detail: 'gbPerPeriod: only a bandwidth plan has GB per period',
      });
    await client.query(
      `UPDATE subscriptions SET proxy_count = coalesce($3, proxy_count), gb_per_period = coalesce($4, gb_per_period),
              auto_renew = coalesce($5, auto_renew), updated_at = now()
        WHERE account_id = $1 AND id = $2`,
      [accountId, id, change.proxyCount ?? null, change.gbPerPeriod ?? null, change.autoRenew ?? null],
    );
    const after = await readSubscription(client, accountId, id);
    const onlyRenewal = change.proxyCount === undefined && change.gbPerPeriod === undefined;
    const what = (v: SubscriptionView) => [v.proxyCount, v.gbPerPeriod, v.autoRenew, v.price];
    // Only a change is audited: the same terms again write nothing (docs/security.md "Audit log").
    if (isDeepStrictEqual(what(before), what(after))) return after;
    await audit(
      client,
      accountId,
      actor,
      onlyRenewal ? 'subscription.auto_renew_changed' : 'subscription.changed',
      id,
      {
        before: {
          proxyCount: before.proxyCount,
          gbPerPeriod: before.gbPerPeriod,
          autoRenew: before.autoRenew,
          price: before.price,
        },
        after: {
          proxyCount: after.proxyCount,
          gbPerPeriod: after.gbPerPeriod,
          autoRenew: after.autoRenew,
          price: after.price,
        },
      },
    );
    return after;
  });
}

/** Cancels at once (audited): no more renewals; what was paid stays paid until paidUntil. */
export async function cancelSubscription(
  pool: Pool,
  accountId: string,
  id: string,
  actor: AuditActor,
): Promise<SubscriptionView> {
  return withTransaction(pool, async (client) => {
    if (!(await lockAccountForAudit(client, accountId))) throw new AppError('ACCOUNT_NOT_FOUND');
    const before = await readSubscription(client, accountId, id);
    const { rowCount } = await client.query(
      `UPDATE subscriptions SET status = 'cancelled', auto_renew = false, next_attempt_at = NULL, updated_at = now()
        WHERE account_id = $1 AND id = $2 AND status IN ('active', 'past_due')`,
      [accountId, id],
    );
    if (rowCount === 1)
      await audit(client, accountId, actor, 'subscription.cancelled', id, {
        statusBefore: before.status,
        paidUntil: before.paidUntil,
      });
    return readSubscription(client, accountId, id);
  });
}
