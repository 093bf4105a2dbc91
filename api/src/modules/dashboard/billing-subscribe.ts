// The Billing page's "Subscribe" form (docs/dashboard.md "Billing", docs/adr/0114): a bandwidth
// plan or an ISP rental, judged by the schema of POST /api/v1/subscriptions, then a confirmation
// page naming the monthly price, then the subscription that route makes (the same service, its
// first month paid at once, audited with the signed-in person). The form carries its own
// idempotency key, made when the form is shown and carried through the confirmation: a double
// click or a second submit subscribes once. A refusal comes back on the Billing page with what was
// typed. A part of pages/billing.ts, kept beside it to hold that page to one concern per file.
import { randomUUID } from 'node:crypto';
import type { Pool } from '#common/db/pool.ts';
import { PRODUCTS } from '#common/products.ts';
import { dashboardActor } from '#api/http/actor.ts';
import { idempotencyKeySchema } from '#api/modules/purchases/schemas.ts';
import { customerSubscriptionSchema, type CustomerSubscription } from '#api/modules/subscriptions/schemas.ts';
import { subscribeAsCustomer, type SubscribeDeps } from '#api/modules/subscriptions/service.ts';
import { deleteSnapshot } from '#api/modules/usage/repo.ts';
import type { WaitForApiCaches } from '#api/modules/sync/wait.ts';
import { attempt, formProblem, formValues, type FieldWords } from './forms.ts';
import { html, type Html } from './html.ts';
import { csrfField, layout, message, type PageContext } from './layout.ts';
import { post, type PageRoute, type SignedInVisit } from './page.ts';
import { countOf } from '#common/words.ts';
import { moneyText } from '#api/modules/billing/pdf.ts';

/** What the form shows: a new key and nothing typed, or what was typed when it was refused. */
export interface SubscribeForm {
  kind: string;
  product: string;
  gbPerPeriod: string;
  country: string;
  proxyCount: string;
  paymentMethod: string;
  key: string;
}

const NAMES = ['kind', 'product', 'gbPerPeriod', 'country', 'proxyCount', 'paymentMethod', 'key'] as const;

export const newSubscribeForm = (): SubscribeForm => ({
  kind: 'bandwidth_plan',
  product: 'basic',
  gbPerPeriod: '',
  country: '',
  proxyCount: '1',
  paymentMethod: 'invoice',
  key: randomUUID(),
});

const KINDS = { bandwidth_plan: 'Bandwidth plan', isp_proxy: 'ISP proxies' } as const;

const fields = (maxGb: number) =>
  ({
    kind: { label: 'Subscription', says: 'choose a bandwidth plan or ISP proxies' },
    product: { label: 'Product', says: 'choose one of the products' },
    gbPerPeriod: {
      label: 'GB per month',
      says: `a whole number of GB from 1 to ${maxGb.toLocaleString('en-US')}`,
    },
    country: { label: 'Country', says: 'a two-letter country code, such as de' },
    proxyCount: { label: 'Number of proxies', says: 'a whole number from 1 to 1,000' },
    paymentMethod: { label: 'Payment', says: 'choose invoice or your saved card' },
    key: { label: 'The form', says: 'reload the page and try again' },
  }) satisfies Record<string, FieldWords>;

const option = (value: string, label: string, chosen: string) =>
  html`<option value="${value}" ${value === chosen ? html` selected` : ''}>${label}</option>`;

export function subscribeSection(
  ctx: PageContext,
  deps: Pick<SubscribeDeps, 'limits'>,
  form: SubscribeForm,
  card: string | null,
  error?: string,
): Html {
  const maxGb = Math.floor(deps.limits.perPurchaseGb);
  return html`<section class="card" aria-labelledby="sub-h">
    <h2 id="sub-h">Subscribe</h2>
    ${message('error', error)}
    <form method="post" action="/billing/subscribe">
      ${csrfField(ctx)}
      <input type="hidden" name="key" value="${form.key}" />
      <label for="sub-kind">Subscription</label>
      <select id="sub-kind" name="kind">
        ${Object.entries(KINDS).map(([value, label]) => option(value, label, form.kind))}
      </select>
      <label for="sub-product">Product</label>
      <p class="hint" id="sub-plan-hint">
        A bandwidth plan: the GB are added every month; unused GB roll over. Up to
        ${maxGb.toLocaleString('en-US')} GB a month.
      </p>
      <select id="sub-product" name="product" aria-describedby="sub-plan-hint">
        ${PRODUCTS.map((p) => option(p, p, form.product))}
      </select>
      <label for="sub-gb">GB per month</label>
      <input id="sub-gb" name="gbPerPeriod" type="number" min="1" step="1" value="${form.gbPerPeriod}" />
      <label for="sub-country">Country</label>
      <p class="hint" id="sub-isp-hint">
        ISP proxies: rents that many of the ISP proxies assigned to your account in the country (a two-letter
        code, such as de) that no subscription pays for yet.
      </p>
      <input
        id="sub-country"
        name="country"
        maxlength="2"
        autocomplete="off"
        value="${form.country}"
        aria-describedby="sub-isp-hint"
      />
      <label for="sub-count">Number of proxies</label>
      <input
        id="sub-count"
        name="proxyCount"
        type="number"
        min="1"
        max="1000"
        step="1"
        value="${form.proxyCount}"
      />
      <label for="sub-payment">Payment</label>
      <select id="sub-payment" name="paymentMethod">
        ${option('invoice', 'Invoice (billed later, within your credit limit)', form.paymentMethod)}
        ${card ? option('card', `Card (${card})`, form.paymentMethod) : ''}
      </select>
      <button type="submit">Subscribe</button>
    </form>
    <p class="hint">
      You see the price per month before you confirm. The first month is paid when you confirm, then it renews
      monthly until you turn renewal off.
    </p>
  </section>`;
}

/** The request a form describes, judged by the API's schema (only the chosen kind's fields). */
function parse(typed: SubscribeForm, deps: Pick<SubscribeDeps, 'limits'>) {
  const number = (v: string) => (v === '' ? Number.NaN : Number(v));
  const request =
    typed.kind === 'isp_proxy'
      ? {
          kind: typed.kind,
          country: typed.country.toLowerCase(),
          proxyCount: number(typed.proxyCount),
          paymentMethod: typed.paymentMethod,
        }
      : {
          kind: typed.kind,
          product: typed.product,
          gbPerPeriod: number(typed.gbPerPeriod),
          paymentMethod: typed.paymentMethod,
        };
  const checked = customerSubscriptionSchema(deps.limits).safeParse(request);
  const key = idempotencyKeySchema.safeParse(typed.key);
  if (!checked.success)
    return {
      ok: false as const,
      problem: formProblem(checked.error, fields(Math.floor(deps.limits.perPurchaseGb))),
    };
  if (!key.success) return { ok: false as const, problem: 'The form: reload the page and try again.' };
  return { ok: true as const, request: checked.data, key: key.data };
}

const what = (r: CustomerSubscription) =>
  r.kind === 'isp_proxy'
    ? `${countOf(r.proxyCount, 'ISP proxy', 'ISP proxies')} (${r.country.toUpperCase()})`
    : `${r.gbPerPeriod} GB ${r.product} per month`;

async function monthlyPrice(pool: Pool, r: CustomerSubscription): Promise<string> {
  const { rows } = await pool.query<{ cents: string; currency: string }>(
    'SELECT cents, currency FROM subscription_price($1, $2, $3, $4, $5)',
    [
      r.kind,
      r.kind === 'isp_proxy' ? r.country : null,
      r.kind === 'isp_proxy' ? r.proxyCount : null,
      r.kind === 'bandwidth_plan' ? r.product : null,
      r.kind === 'bandwidth_plan' ? r.gbPerPeriod : null,
    ],
  );
  const { cents, currency } = rows[0]!;
  return moneyText(Number(cents), currency);
}

function confirmView(
  ctx: PageContext,
  typed: SubscribeForm,
  r: CustomerSubscription,
  price: string,
  card: boolean,
): Html {
  return layout(
    ctx,
    `Subscribe to ${what(r)}?`,
    html`<p id="sub-price">
        <strong>${price} per month.</strong> The first month is paid
        now${card ? ' by your saved card' : ', billed by invoice within your credit limit'}; it then renews
        monthly on the same day until you turn renewal off.
      </p>
      <form method="post" action="/billing/subscribe/confirm">
        ${csrfField(ctx)}
        ${NAMES.map((name) => html`<input type="hidden" name="${name}" value="${typed[name]}" />`)}
        <button type="submit">Confirm and subscribe</button>
      </form>
      <p><a href="/billing">Cancel</a></p>`,
    { narrow: true },
  );
}

/** The form, its confirmation and the subscription; refusals come back on the page. */
export function subscribeRoutes(
  deps: SubscribeDeps & { waitForApiCaches: WaitForApiCaches },
  refuse: (visit: SignedInVisit, error: string, form: SubscribeForm, status: number) => Promise<void>,
): PageRoute[] {
  return [
    post('/billing/subscribe', async (visit) => {
      const typed = formValues(visit.req.body, NAMES);
      const parsed = parse(typed, deps);
      if (!parsed.ok) return refuse(visit, parsed.problem, typed, 422);
      const price = await monthlyPrice(deps.pool, parsed.request);
      visit.send(
        confirmView(visit.ctx, typed, parsed.request, price, parsed.request.paymentMethod === 'card'),
      );
    }),
    post('/billing/subscribe/confirm', async (visit) => {
      const typed = formValues(visit.req.body, NAMES);
      const parsed = parse(typed, deps);
      if (!parsed.ok) return refuse(visit, parsed.problem, typed, 422);
      const { accountId } = visit.person;
      const made = await attempt(
        () =>
          subscribeAsCustomer(deps, {
            accountId,
            request: parsed.request,
            idempotencyKey: parsed.key,
            actor: dashboardActor(visit.req, visit.person.email),
          }),
        (err) => [402, 403, 409, 422, 503].includes(err.status),
      );
      if (!made.ok) {
        // A declined card answers the same under the same key (Stripe remembers it): a new key tries again.
        const form = made.refusal.code === 'CARD_PAYMENT_REFUSED' ? { ...typed, key: randomUUID() } : typed;
        return refuse(visit, `${made.refusal.message}.`, form, made.refusal.status);
      }
      if (!made.value.replayed && parsed.request.kind === 'bandwidth_plan') {
        await deleteSnapshot(deps.pool, accountId);
        await deps.waitForApiCaches();
      }
      visit.res.redirect(303, '/billing?done=subscribed');
    }),
  ];
}
