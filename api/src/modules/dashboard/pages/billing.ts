// Billing: the invoices (the same listing as GET /api/v1/invoices), each product's remaining
// bandwidth (the usage snapshot of GET /api/v1/usage: bought - used) and auto-refill settings,
// changed in a form judged by the same schema as PUT /api/v1/auto-refill/:product, and the credit
// limit for bill-later payment (as GET /api/v1/account shows it). The operations are the shared
// ones of common/src/billing/.
import { z } from 'zod';
import {
  autoRefillUpdateSchema,
  getAutoRefill,
  putAutoRefill,
  type AutoRefillSettings,
} from '#common/billing/auto-refill.ts';
import { readCredit, type Credit } from '#common/billing/credit.ts';
import { listInvoices, type InvoiceView } from '#common/billing/invoices.ts';
import type { Pool } from '#common/db/pool.ts';
import { BYTES_PER_GB, PRODUCTS, type Product } from '#common/products.ts';
import { productBalances } from '#api/modules/usage/service.ts';
import { doneNotice, formProblem, formValues, type FieldWords } from '../forms.ts';
import { dashboardActor } from '#api/http/actor.ts';
import { html, type Html } from '../html.ts';
import { csrfField, dateText, gbText, layout, message, table, type PageContext } from '../layout.ts';
import { get, post, type PageModule, type SignedInVisit } from '../page.ts';
import { readSubscriptions, subscriptionRoutes, subscriptionsSection } from '../billing-subscriptions.ts';
import { buyRoutes, buySection, newBuyForm, type BuyForm } from '../billing-buy.ts';
import {
  newSubscribeForm,
  subscribeRoutes,
  subscribeSection,
  type SubscribeForm,
} from '../billing-subscribe.ts';
import { CARD_NOTICES, cardPageRoutes, cardSection, readCardState } from '../billing-card.ts';
import { detailsSection, fileRoutes, pdfLink, readBillingDetails } from '../billing-files.ts';

/** Invoices shown: one page of the API's listing, its largest. */
const INVOICES_SHOWN = 100;
const product = z.enum(PRODUCTS);
const NO_SUCH_PRODUCT = 'There is no such product.';
const NOTICES = new Map([
  ['refill', 'Auto-refill saved.'],
  ['renewal-off', 'Renewal turned off: the subscription ends when its paid time does.'],
  ['bought', 'Bandwidth bought: it is yours now, and its invoice is listed below.'],
  ['details', 'Billing details saved: every invoice PDF names you by them.'],
  [
    'subscribed',
    'Subscribed: the first month is paid, and the subscription and its invoice are listed below.',
  ],
  ...CARD_NOTICES,
]);

/** What the auto-refill form shows: the stored settings, or what was typed when it was refused. */
interface AutoRefillForm {
  enabled: boolean;
  thresholdGb: string;
  refillGb: string;
  maxRefillsPerMonth: string;
}

const SOURCES = { purchase: 'Purchase', 'auto-refill': 'Auto-refill', renewal: 'Renewal' } as const;

const GB_RULE = 'a number of GB greater than 0 and at most 1,000,000';
const REFILL_FIELDS = {
  thresholdGb: {
    label: 'When below (GB)',
    // The schema's own rule across two fields, named by the form's labels.
    says: (issue) => (issue.code === 'custom' ? 'must be less than Buy (GB)' : GB_RULE),
  },
  refillGb: { label: 'Buy (GB)', says: GB_RULE },
  maxRefillsPerMonth: { label: 'At most per month', says: 'a whole number from 1 to 100' },
} satisfies Record<string, FieldWords>;

export const billingPage: PageModule = ({
  pool,
  usage,
  purchaseLimits,
  subscribe,
  seller,
  waitForApiCaches,
  stripe,
  linkBase,
}) => {
  const render = async (
    { person, ctx, send }: SignedInVisit,
    state: { notice?: string | undefined; error?: string; buyForm?: BuyForm; subscribeForm?: SubscribeForm },
    status = 200,
  ) => {
    const [invoices, autoRefill, snapshot, credit, subscriptions, details, card] = await Promise.all([
      listInvoices(pool, person.accountId, { limit: INVOICES_SHOWN }),
      configuredAutoRefill(pool, person.accountId),
      usage.snapshot(person.accountId),
      readCredit(pool, person.accountId),
      readSubscriptions(pool, person.accountId),
      readBillingDetails(pool, person.accountId),
      readCardState(pool, stripe, person.accountId),
    ]);
    const remaining = productBalances(snapshot.row);
    // A refused subscription is said on its own form, beside what was typed.
    const { subscribeForm, ...shown } = state;
    const subscribeError = subscribeForm ? state.error : undefined;
    const subs = html`${subscribeSection(ctx, subscribe, subscribeForm ?? newSubscribeForm(), card.label, subscribeError)}${subscriptionsSection(ctx, subscriptions)}`;
    const buy = html`${buySection(ctx, purchaseLimits, state.buyForm ?? newBuyForm(), card.label)}${cardSection(ctx, card)}`;
    const files = detailsSection(details, person.email);
    send(
      billingView(ctx, {
        invoices: invoices.invoices,
        autoRefill,
        remaining,
        credit,
        subs,
        buy,
        files,
        ...shown,
        ...(subscribeForm ? { error: undefined } : {}),
      }),
      status,
    );
  };

  return {
    nav: [{ href: '/billing', label: 'Billing' }],
    routes: [
      get('/billing', (visit) => render(visit, { notice: doneNotice(visit.req, NOTICES) })),
      ...subscriptionRoutes(pool, (visit, error) => render(visit, { error }, 404)),
      ...fileRoutes(pool, seller, (visit, error) => render(visit, { error }, 404)),
      ...buyRoutes(pool, purchaseLimits, waitForApiCaches, (visit, error, buyForm, status) =>
        render(visit, { error, buyForm }, status),
      ),
      ...subscribeRoutes({ ...subscribe, waitForApiCaches }, (visit, error, subscribeForm, status) =>
        render(visit, { error, subscribeForm }, status),
      ),
      ...cardPageRoutes(
        { pool, stripe, limits: purchaseLimits, waitForApiCaches, linkBase },
        (visit, error, buyForm, status) => render(visit, { error, buyForm }, status),
      ),

      get('/billing/auto-refill/:product', async (visit) => {
        const p = product.safeParse(visit.req.params.product);
        if (!p.success) return render(visit, { error: NO_SUCH_PRODUCT }, 404);
        const settings = await getAutoRefill(pool, visit.person.accountId, p.data);
        visit.send(autoRefillView(visit.ctx, { settings, form: formOf(settings) }));
      }),

      post('/billing/auto-refill/:product', async (visit) => {
        const p = product.safeParse(visit.req.params.product);
        if (!p.success) return render(visit, { error: NO_SUCH_PRODUCT }, 404);
        const typed = formValues(visit.req.body, [
          'enabled',
          'thresholdGb',
          'refillGb',
          'maxRefillsPerMonth',
        ]);
        // Empty or non-numeric fields become NaN, which the API's schema refuses, naming the field.
        const number = (v: string) => (v === '' ? Number.NaN : Number(v));
        const update = autoRefillUpdateSchema.safeParse({
          enabled: typed.enabled === 'on',
          thresholdGb: number(typed.thresholdGb),
          refillGb: number(typed.refillGb),
          maxRefillsPerMonth: number(typed.maxRefillsPerMonth),
        });
        if (!update.success) {
          // Nothing is lost: the form comes back with what was typed and what is wrong with it.
          return visit.send(
            autoRefillView(visit.ctx, {
              settings: await getAutoRefill(pool, visit.person.accountId, p.data),
              form: { ...typed, enabled: typed.enabled === 'on' },
              error: formProblem(update.error, REFILL_FIELDS),
            }),
            422,
          );
        }
        await putAutoRefill(
          pool,
          visit.person.accountId,
          p.data,
          update.data,
          undefined,
          dashboardActor(visit.req, visit.person.email),
        );
        visit.res.redirect(303, '/billing?done=refill');
      }),
    ],
  };
};

/** "paid on 3 Mar 2027": when an operator or a card payment settled it (docs/adr/0101, 0110). */
function statusText(i: InvoiceView): string {
  if (i.status === 'refunded') return 'refunded';
  if (i.paidAt) return `paid on ${dateText(new Date(i.paidAt))}`;
  if (i.voidedAt) return `void since ${dateText(new Date(i.voidedAt))}`;
  return 'issued, unpaid';
}

const formOf = (s: AutoRefillSettings): AutoRefillForm => ({
  enabled: s.enabled,
  thresholdGb: s.thresholdGb === null ? '' : String(s.thresholdGb),
  refillGb: s.refillGb === null ? '' : String(s.refillGb),
  maxRefillsPerMonth: String(s.maxRefillsPerMonth),
});

interface AutoRefillLine {
  product: string;
  enabled: boolean;
  thresholdBytes: number;
  refillBytes: number;
  maxRefillsPerMonth: number;
}

/** The products whose auto-refill was ever configured. */
async function configuredAutoRefill(pool: Pool, accountId: string): Promise<AutoRefillLine[]> {
  const settings = await Promise.all(PRODUCTS.map((p) => getAutoRefill(pool, accountId, p)));
  return settings.flatMap((s) =>
    s.thresholdGb === null || s.refillGb === null
      ? []
      : [
          {
            product: s.product,
            enabled: s.enabled,
            thresholdBytes: Math.round(s.thresholdGb * BYTES_PER_GB),
            refillBytes: Math.round(s.refillGb * BYTES_PER_GB),
            maxRefillsPerMonth: s.maxRefillsPerMonth,
          },
        ],
  );
}

function billingView(
  ctx: PageContext,
  data: {
    invoices: InvoiceView[];
    autoRefill: AutoRefillLine[];
    remaining: Record<Product, { remaining: number }>;
    credit: Credit;
    subs: Html;
    buy: Html;
    files: Html;
    notice?: string | undefined;
    error?: string;
  },
): Html {
  const c = data.credit;
  const money = (amount: number, currency = c.currency) =>
    `${amount.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })} ${currency}`;
  const refill = new Map(data.autoRefill.map((r) => [r.product, r]));
  const change = (p: string) =>
    html`<td><a href="/billing/auto-refill/${p}" aria-label="Change auto-refill of ${p}">Change</a></td>`;
  return layout(
    ctx,
    'Billing',
    html`${message('error', data.error)}${message('success', data.notice)} ${data.buy}
      <section class="card" aria-labelledby="inv-h">
        <h2 id="inv-h">Invoices</h2>
        ${
          data.invoices.length === 0
            ? html`<p>No invoices yet.</p>`
            : table({
                label: 'Invoices',
                caption: 'Invoices, newest first',
                columns: [
                  'Invoice',
                  'Issued',
                  'Product',
                  { num: 'Bandwidth' },
                  'Source',
                  'Status',
                  { num: 'Amount' },
                  { hidden: 'Files' },
                ],
                rows: data.invoices.map(
                  (i) =>
                    html`<tr>
                      <td>#${i.number}</td>
                      <td>${dateText(new Date(i.issuedAt))}</td>
                      <td>${i.product ?? i.description}</td>
                      <td class="num">${i.product ? gbText(i.bytes) : '–'}</td>
                      <td>${SOURCES[i.source]}</td>
                      <td>${statusText(i)}</td>
                      <td class="num">${i.amount === null ? '–' : money(i.amount, i.currency)}</td>
                      <td>${pdfLink(i)}</td>
                    </tr>`,
                ),
              })
        }
      </section>
      ${data.files} ${data.subs}
      <section class="card" aria-labelledby="refill-h">
        <h2 id="refill-h">Auto-refill</h2>
        ${table({
          label: 'Auto-refill settings',
          caption: 'Auto-refill settings per product',
          columns: [
            'Product',
            { num: 'Remaining' },
            'Auto-refill',
            { num: 'When below' },
            { num: 'Buy' },
            { num: 'At most per month' },
            { hidden: 'Actions' },
          ],
          rows: PRODUCTS.map((p) => {
            const r = refill.get(p);
            return html`<tr>
              <th scope="row">${p}</th>
              <td class="num">${gbText(data.remaining[p].remaining)}</td>
              <td>${r?.enabled ? 'On' : 'Off'}</td>
              <td class="num">${r ? gbText(r.thresholdBytes) : '–'}</td>
              <td class="num">${r ? gbText(r.refillBytes) : '–'}</td>
              <td class="num">${r ? r.maxRefillsPerMonth : '–'}</td>
              ${change(p)}
            </tr>`;
          }),
        })}
        <p class="hint">
          Remaining is what was bought minus what was used, as <code>GET /api/v1/usage</code> says.
          Auto-refill buys the set amount once each time a product's remaining bandwidth falls below its
          threshold, at most the set number of times per calendar month (UTC), with an invoice for each. The
          API sets the same with <code>PUT /api/v1/auto-refill/&lt;product&gt;</code> (docs/api.md).
        </p>
      </section>
      <section class="card" aria-labelledby="credit-h">
        <h2 id="credit-h">Credit limit</h2>
        <p id="credit">
          Bill-later limit: ${money(c.limit)} per calendar month (UTC). Billed later in ${c.month}:
          ${money(c.usedThisMonth)}; available: ${money(c.available)}.
        </p>
        <p class="hint">
          Purchases and auto-refills paid by invoice stop at the limit: a refill that would pass it is not
          bought, and you get an email saying so. Only unpaid invoices count: one marked paid frees its
          amount.${c.default ? '' : ' This limit was set for your account.'}
        </p>
      </section>`,
  );
}

function autoRefillView(
  ctx: PageContext,
  state: { settings: AutoRefillSettings; form: AutoRefillForm; error?: string },
): Html {
  const { settings: s, form: f } = state;
  const field = (name: keyof typeof REFILL_FIELDS, hint: string, attrs: Html) =>
    html`<label for="refill-${name}">${REFILL_FIELDS[name].label}</label>
      <p class="hint" id="refill-${name}-hint">${hint}</p>
      <input
        id="refill-${name}"
        name="${name}"
        type="number"
        ${attrs}
        required
        value="${f[name]}"
        aria-describedby="refill-${name}-hint"
      />`;
  return layout(
    ctx,
    `Auto-refill of ${s.product}`,
    html`${message('error', state.error)}
      <p>
        Refills this month: ${s.refillsThisMonth}. Each refill is invoiced (${s.paymentMethod}) and announced
        by the new-invoice email when that alert is on.
      </p>
      <form method="post" action="/billing/auto-refill/${s.product}">
        ${csrfField(ctx)}
        <div class="checkbox">
          <input
            type="checkbox"
            id="refill-enabled"
            name="enabled"
            value="on"
            ${f.enabled ? html` checked` : ''}
          /><label for="refill-enabled">Auto-refill ${s.product}</label>
        </div>
        ${field('thresholdGb', 'Refill when the remaining bandwidth drops below this.', html`min="0" step="any"`)}
        ${field('refillGb', 'Bandwidth bought per refill; more than the threshold.', html`min="0" step="any"`)}
        ${field('maxRefillsPerMonth', 'Per calendar month (UTC), 1 to 100.', html`min="1" max="100" step="1"`)}
        <button type="submit">Save</button>
      </form>
      <p><a href="/billing">Back to billing</a></p>`,
    { narrow: true },
  );
}
