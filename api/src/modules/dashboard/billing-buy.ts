// The Billing page's "Buy bandwidth" form (docs/dashboard.md "Billing"): the purchase
// POST /api/v1/purchases makes, through the same service and limits, audited with the signed-in
// person. The form carries its own idempotency key, made when the form is shown: a double click,
// a reload of the answer or a second submit of the same form buys once. A part of pages/billing.ts,
// kept beside it to hold that page to one concern per file.
import { randomUUID } from 'node:crypto';
import { PRODUCTS } from '#common/products.ts';
import { dashboardActor } from '#api/http/actor.ts';
import {
  customerPurchaseSchema,
  idempotencyKeySchema,
  type PurchaseLimits,
} from '#api/modules/purchases/schemas.ts';
import { buyAsCustomer } from '#api/modules/purchases/service.ts';
import { deleteSnapshot } from '#api/modules/usage/repo.ts';
import { attempt, formProblem, formValues, type FieldWords } from './forms.ts';
import { html, type Html } from './html.ts';
import { csrfField, type PageContext } from './layout.ts';
import { post, type PageRoute, type SignedInVisit } from './page.ts';
import type { Pool } from '#common/db/pool.ts';
import type { WaitForApiCaches } from '#api/modules/sync/wait.ts';

/** What the form shows: a new key and nothing typed, or what was typed when it was refused. */
export interface BuyForm {
  product: string;
  gb: string;
  key: string;
}

export const newBuyForm = (): BuyForm => ({ product: 'basic', gb: '', key: randomUUID() });

const FIELDS = (limits: PurchaseLimits) =>
  ({
    product: { label: 'Product', says: 'choose one of the products' },
    gb: {
      label: 'Bandwidth (GB)',
      says: `a number of GB greater than 0 and at most ${limits.perPurchaseGb.toLocaleString('en-US')}`,
    },
    key: { label: 'The form', says: 'reload the page and try again' },
  }) satisfies Record<string, FieldWords>;

export function buySection(
  ctx: PageContext,
  limits: PurchaseLimits,
  form: BuyForm,
  card: string | null = null,
): Html {
  return html`<section class="card" aria-labelledby="buy-h">
    <h2 id="buy-h">Buy bandwidth</h2>
    <form method="post" action="/billing/buy">
      ${csrfField(ctx)}
      <input type="hidden" name="key" value="${form.key}" />
      <label for="buy-product">Product</label>
      <select id="buy-product" name="product">
        ${PRODUCTS.map(
          (p) => html`<option value="${p}" ${p === form.product ? html` selected` : ''}>${p}</option>`,
        )}
      </select>
      <label for="buy-gb">Bandwidth (GB)</label>
      <p class="hint" id="buy-gb-hint">
        Up to ${limits.perPurchaseGb.toLocaleString('en-US')} GB per purchase and
        ${limits.perDayGb.toLocaleString('en-US')} GB per day (UTC). Billed by invoice, within your credit
        limit.
      </p>
      <input
        id="buy-gb"
        name="gb"
        type="number"
        min="0"
        step="any"
        required
        value="${form.gb}"
        aria-describedby="buy-gb-hint"
      />
      <button type="submit">Buy</button>
      ${card ? html`<button type="submit" formaction="/billing/buy-card">Pay by card (${card})</button>` : ''}
    </form>
  </section>`;
}

/** The purchase; a refusal comes back on the page with what was typed and the same key. */
export function buyRoutes(
  pool: Pool,
  limits: PurchaseLimits,
  waitForApiCaches: WaitForApiCaches,
  refuse: (visit: SignedInVisit, error: string, form: BuyForm, status: number) => Promise<void>,
): PageRoute[] {
  const schema = customerPurchaseSchema(limits).extend({ key: idempotencyKeySchema });
  return [
    post('/billing/buy', async (visit) => {
      const typed = formValues(visit.req.body, ['product', 'gb', 'key']);
      const parsed = schema.safeParse({
        product: typed.product,
        gb: typed.gb === '' ? Number.NaN : Number(typed.gb),
        key: typed.key,
      });
      if (!parsed.success) return refuse(visit, formProblem(parsed.error, FIELDS(limits)), typed, 422);
      const { accountId } = visit.person;
      const bought = await attempt(
        () =>
          buyAsCustomer(pool, limits, {
            accountId,
            product: parsed.data.product,
            gb: parsed.data.gb,
            idempotencyKey: parsed.data.key,
            actor: dashboardActor(visit.req, visit.person.email),
          }),
        (err) => err.status === 409 || err.status === 422 || err.status === 403,
      );
      if (!bought.ok) return refuse(visit, `${bought.refusal.message}.`, typed, bought.refusal.status);
      if (!bought.value.replayed) {
        await deleteSnapshot(pool, accountId);
        await waitForApiCaches();
      }
      visit.res.redirect(303, `/billing?done=bought`);
    }),
  ];
}
