// The Billing page's card (docs/dashboard.md "Billing", docs/adr/0110): whether card payments are
// on (without a Stripe key the page says purchases are billed by invoice), "Save a card" (to
// Stripe's hosted page), "Pay by card" on the Buy form (the form's own idempotency key, as for
// "Buy"), and the card payments still waiting, with Stripe's page where 3-D Secure is confirmed.
// Nothing is credited by coming back from Stripe: the webhook buys. A part of pages/billing.ts.
import type Stripe from 'stripe';
import type { Pool } from '#common/db/pool.ts';
import { savedCard } from '#common/billing/stripe.ts';
import { bandwidthText } from '#common/billing/remaining.ts';
import {
  customerPurchaseSchema,
  idempotencyKeySchema,
  type PurchaseLimits,
} from '#api/modules/purchases/schemas.ts';
import { buyByCard, cardSetupUrl } from '#api/modules/cards/service.ts';
import { deleteSnapshot } from '#api/modules/usage/repo.ts';
import type { WaitForApiCaches } from '#api/modules/sync/wait.ts';
import { attempt, formValues } from './forms.ts';
import { html, type Html } from './html.ts';
import { csrfField, layout, type PageContext } from './layout.ts';
import { post, type PageRoute, type SignedInVisit } from './page.ts';
import type { BuyForm } from './billing-buy.ts';
import { moneyText } from '#api/modules/billing/pdf.ts';

export interface CardState {
  available: boolean;
  /** The saved card ("visa 4242"), null when none. */
  label: string | null;
  waiting: Array<{ id: string; bytes: number; product: string; status: string; actionUrl: string | null }>;
  /** Card payments that failed in the last 7 days (declined, or 3-D Secure refused), newest first. */
  failed: Array<{ bytes: number; product: string; amount: string; failure: string; at: Date }>;
}

/** How long a failed card payment stays on the Billing page. */
const FAILED_SHOWN_DAYS = 7;

export async function readCardState(
  pool: Pool,
  stripe: Stripe | null,
  accountId: string,
): Promise<CardState> {
  if (!stripe) return { available: false, label: null, waiting: [], failed: [] };
  const card = await savedCard(pool, accountId);
  const { rows } = await pool.query<{
    id: string;
    bytes: string;
    product: string;
    status: string;
    action_url: string | null;
  }>(
    `SELECT id, bytes, product, status, action_url FROM card_payments
      WHERE account_id = $1 AND status IN ('creating', 'requires_action', 'processing') ORDER BY created_at DESC LIMIT 20`,
    [accountId],
  );
  const failed = await pool.query<{
    bytes: string;
    product: string;
    amount_cents: string;
    currency: string;
    failure: string | null;
    updated_at: Date;
  }>(
    `SELECT bytes, product, amount_cents, currency, failure, updated_at FROM card_payments
      WHERE account_id = $1 AND status IN ('failed', 'canceled') AND updated_at > now() - make_interval(days => $2)
      ORDER BY updated_at DESC LIMIT 5`,
    [accountId, FAILED_SHOWN_DAYS],
  );
  return {
    available: true,
    label: card?.paymentMethodId ? (card.label ?? 'card') : null,
    waiting: rows.map((r) => ({ ...r, bytes: Number(r.bytes), actionUrl: r.action_url })),
    failed: failed.rows.map((r) => ({
      bytes: Number(r.bytes),
      product: r.product,
      amount: moneyText(Number(r.amount_cents), r.currency),
      failure: r.failure ?? 'the payment was not completed',
      at: r.updated_at,
    })),
  };
}

export function cardSection(ctx: PageContext, card: CardState): Html {
  if (!card.available)
    return html`<section class="card" aria-labelledby="card-h">
      <h2 id="card-h">Card</h2>
      <p>Card payments are not set up on this platform: purchases are billed by invoice.</p>
    </section>`;
  return html`<section class="card" aria-labelledby="card-h">
    <h2 id="card-h">Card</h2>
    <p>${card.label ? html`Saved card: <strong>${card.label}</strong>.` : 'No card is saved.'}</p>
    <form method="post" action="/billing/card">
      ${csrfField(ctx)}
      <button type="submit">${card.label ? 'Replace the card' : 'Save a card'}</button>
    </form>
    ${
      card.waiting.length
        ? html`<h3>Card payments waiting</h3>
            <ul>
              ${card.waiting.map(
                (w) =>
                  html`<li>
                    ${bandwidthText(w.bytes)} ${w.product}:
                    ${
                      w.status === 'requires_action' && w.actionUrl
                        ? html`<a href="${w.actionUrl}">Confirm the payment with your bank</a>`
                        : 'waiting for the card payment to complete'
                    }
                  </li>`,
              )}
            </ul>`
        : ''
    }
    ${
      card.failed.length
        ? html`<h3>Card payments that failed</h3>
            <p>Nothing was charged for these and no bandwidth was bought; buy again to retry.</p>
            <ul>
              ${card.failed.map(
                (f) =>
                  html`<li>
                    ${bandwidthText(f.bytes)} ${f.product}, ${f.amount}, ${f.at.toISOString().slice(0, 10)}:
                    ${f.failure}
                  </li>`,
              )}
            </ul>`
        : ''
    }
  </section>`;
}

export interface CardPageDeps {
  pool: Pool;
  stripe: Stripe | null;
  limits: PurchaseLimits;
  waitForApiCaches: WaitForApiCaches;
  linkBase: () => string;
}

export function cardPageRoutes(
  deps: CardPageDeps,
  refuse: (visit: SignedInVisit, error: string, form: BuyForm, status: number) => Promise<void>,
): PageRoute[] {
  const schema = customerPurchaseSchema(deps.limits).extend({ key: idempotencyKeySchema });
  const base = () => `${deps.linkBase()}/billing`;
  return [
    post('/billing/card', async (visit) => {
      if (!deps.stripe)
        return refuse(visit, 'Card payments are not set up on this platform.', newForm(), 409);
      const url = await attempt(
        () =>
          cardSetupUrl(deps.pool, deps.stripe!, visit.person.accountId, {
            success: `${base()}?done=card-saved`,
            cancel: base(),
          }),
        (err) => err.status === 503,
      );
      if (!url.ok) return refuse(visit, `${url.refusal.message}.`, newForm(), 503);
      // A link, not a redirect: the page's CSP form-action is 'self', and Stripe's pages are elsewhere.
      visit.send(
        layout(
          visit.ctx,
          'Save a card',
          html`<p>The card is entered on Stripe's page; it never reaches this platform.</p>
            <p><a href="${url.value}">Continue to Stripe</a></p>
            <p><a href="/billing">Back to Billing</a></p>`,
          { narrow: true },
        ),
      );
    }),
    post('/billing/buy-card', async (visit) => {
      const typed = formValues(visit.req.body, ['product', 'gb', 'key']);
      if (!deps.stripe) return refuse(visit, 'Card payments are not set up on this platform.', typed, 409);
      const parsed = schema.safeParse({
        product: typed.product,
        gb: typed.gb === '' ? Number.NaN : Number(typed.gb),
        key: typed.key,
      });
      if (!parsed.success)
        return refuse(visit, 'Enter a product and a number of GB to pay by card.', typed, 422);
      const { accountId } = visit.person;
      const paid = await attempt(
        () =>
          buyByCard(deps.pool, deps.stripe!, deps.limits, {
            accountId,
            product: parsed.data.product,
            gb: parsed.data.gb,
            idempotencyKey: parsed.data.key,
            returnUrl: `${base()}?done=card-confirmed`,
          }),
        (err) => [403, 409, 422, 503].includes(err.status),
      );
      if (!paid.ok) return refuse(visit, `${paid.refusal.message}.`, typed, paid.refusal.status);
      const { payment, bought } = paid.value;
      if (bought) {
        await deleteSnapshot(deps.pool, accountId);
        await deps.waitForApiCaches();
      }
      // 3-D Secure: the Billing page links to the bank's page (a link: form-action is 'self').
      if (payment.status === 'requires_action') return visit.res.redirect(303, '/billing?done=card-confirm');
      if (payment.status === 'failed' || payment.status === 'canceled')
        return refuse(visit, `The card payment failed: ${payment.failure ?? payment.status}.`, typed, 402);
      visit.res.redirect(303, `/billing?done=${payment.status === 'succeeded' ? 'bought' : 'card-waiting'}`);
    }),
  ];
}

const newForm = (): BuyForm => ({ product: 'basic', gb: '', key: '' });

export const CARD_NOTICES: Array<[string, string]> = [
  ['card-saved', 'Back from Stripe: the card is saved when Stripe confirms it (reload in a moment).'],
  ['card-waiting', 'Card payment started: the bandwidth is yours when the payment completes.'],
  ['card-confirm', 'Your bank asks you to confirm the card payment: follow the link under Card.'],
  ['card-confirmed', 'Back from your bank: the bandwidth is yours when Stripe confirms the payment.'],
];
