// The Billing page's invoice files (docs/dashboard.md "Billing"): each invoice's PDF to download,
// as GET /api/v1/invoices/:id/pdf renders it, and the billing details it names the customer by
// (company, address, VAT id), changed in a form judged by the schema of PUT /api/v1/billing-details.
// A part of pages/billing.ts, kept beside it to hold that page to one concern per file.
import type { Pool } from '#common/db/pool.ts';
import { dashboardActor } from '#api/http/actor.ts';
import {
  billingDetailsSchema,
  readBillingDetails,
  saveBillingDetails,
  type BillingDetails,
} from '#api/modules/billing/details.ts';
import { accountInvoicePdf, pdfHeaders, type Seller } from '#api/modules/billing/pdf.ts';
import { formProblem, formValues, pathId, type FieldWords } from './forms.ts';
import { html, type Html } from './html.ts';
import { csrfField, layout, message, type PageContext } from './layout.ts';
import { get, post, type PageRoute, type SignedInVisit } from './page.ts';

export { readBillingDetails };

const FIELDS = {
  company: 'Company',
  address: 'Address',
  vatId: { label: 'VAT ID', says: 'letters, digits, spaces, dots or dashes, at most 50' },
} satisfies Record<keyof BillingDetails, FieldWords>;

const NO_SUCH_INVOICE = 'That invoice does not exist.';

/** The invoice table's last cell: the PDF to download. */
export const pdfLink = (i: { id: string; number: number }) =>
  html`<a href="/billing/invoices/${i.id}/pdf" aria-label="Download invoice #${i.number} as PDF">PDF</a>`;

export function detailsSection(details: BillingDetails, email: string): Html {
  const set = details.company || details.address || details.vatId;
  return html`<section class="card" aria-labelledby="details-h">
    <h2 id="details-h">Billing details</h2>
    ${
      set
        ? html`<p id="billing-details" class="address">
            ${[
              details.company,
              ...details.address.split('\n'),
              details.vatId ? `VAT ID: ${details.vatId}` : '',
            ]
              .filter(Boolean)
              .map((line, n) => html`${n ? html`<br />` : ''}${line}`)}
          </p>`
        : html`<p id="billing-details">Not set: invoices name you by ${email}.</p>`
    }
    <p><a href="/billing/details">Change billing details</a></p>
    <p class="hint">Every invoice PDF names you by these, invoices issued before a change included.</p>
  </section>`;
}

function detailsView(ctx: PageContext, form: BillingDetails, error?: string): Html {
  return layout(
    ctx,
    'Billing details',
    html`${message('error', error)}
      <form method="post" action="/billing/details">
        ${csrfField(ctx)}
        <label for="details-company">Company</label>
        <input
          id="details-company"
          name="company"
          maxlength="200"
          value="${form.company}"
          autocomplete="organization"
        />
        <label for="details-address">Address</label>
        <textarea id="details-address" name="address" rows="4" maxlength="1000" autocomplete="street-address">
${form.address}</textarea>
        <label for="details-vat">VAT ID</label>
        <input id="details-vat" name="vatId" maxlength="50" value="${form.vatId}" />
        <button type="submit">Save</button>
      </form>
      <p><a href="/billing">Back to billing</a></p>`,
    { narrow: true },
  );
}

export function fileRoutes(
  pool: Pool,
  seller: Seller,
  refuse: (visit: SignedInVisit, error: string) => Promise<void>,
): PageRoute[] {
  return [
    get('/billing/invoices/:invoiceId/pdf', async (visit) => {
      const id = pathId(visit.req, 'invoiceId');
      const file = id ? await accountInvoicePdf(pool, seller, visit.person.accountId, id) : null;
      if (!file) return refuse(visit, NO_SUCH_INVOICE);
      visit.res.set(pdfHeaders(file.number)).type('application/pdf').send(file.pdf);
    }),
    get('/billing/details', async (visit) => {
      visit.send(detailsView(visit.ctx, await readBillingDetails(pool, visit.person.accountId)));
    }),
    post('/billing/details', async (visit) => {
      const typed = formValues(visit.req.body, ['company', 'address', 'vatId']);
      const parsed = billingDetailsSchema.safeParse(typed);
      if (!parsed.success)
        return visit.send(detailsView(visit.ctx, typed, formProblem(parsed.error, FIELDS)), 422);
      await saveBillingDetails(
        pool,
        visit.person.accountId,
        parsed.data,
        dashboardActor(visit.req, visit.person.email),
      );
      visit.res.redirect(303, '/billing?done=details');
    }),
  ];
}
