// The Billing page's subscriptions (docs/dashboard.md "Billing", docs/billing.md): what renews,
// when and for how much (as GET /api/v1/subscriptions), and "Turn off renewal" after a
// confirmation, the change PATCH /api/v1/subscriptions/:id {autoRenew: false} makes (audited with
// the signed-in person). A part of pages/billing.ts, kept beside it to hold that page under 600 lines.
import {
  changeSubscription,
  listSubscriptions,
  type SubscriptionView,
} from '#common/billing/subscriptions.ts';
import type { Pool } from '#common/db/pool.ts';
import { dashboardActor } from '#api/http/actor.ts';
import { pathId } from './forms.ts';
import { html, type Html } from './html.ts';
import {
  confirmButton,
  confirmPage,
  dateText,
  table,
  type Confirmation,
  type PageContext,
} from './layout.ts';
import { get, post, type PageRoute, type SignedInVisit } from './page.ts';
import { countOf } from '#common/words.ts';

export const readSubscriptions = listSubscriptions;

const STATUS: Record<SubscriptionView['status'], string> = {
  active: 'Active',
  past_due: 'Payment due',
  cancelled: 'Cancelled',
  expired: 'Expired',
};

const what = (s: SubscriptionView) =>
  s.kind === 'isp_proxy'
    ? `${countOf(s.proxyCount ?? 0, 'ISP proxy', 'ISP proxies')} (${(s.country ?? '').toUpperCase()})`
    : `${s.gbPerPeriod} GB ${s.product} per month`;

const renewalOff = (s: SubscriptionView): Confirmation => ({
  id: `renewal-off-${s.id}`,
  action: `/billing/subscriptions/${s.id}/renewal-off`,
  open: 'Turn off renewal',
  title: `Turn off renewal of ${what(s)}?`,
  text:
    `It ends on ${dateText(new Date(s.paidUntil))} and nothing more is billed for it. ` +
    'What was paid stays yours until then.',
  confirm: 'Turn off renewal',
  back: '/billing',
  danger: true,
});

const money = (s: SubscriptionView) =>
  `${s.price.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })} ${s.currency}`;

export function subscriptionsSection(ctx: PageContext, subs: SubscriptionView[]): Html {
  return html`<section class="card" aria-labelledby="subs-h">
    <h2 id="subs-h">Subscriptions</h2>
    ${
      subs.length === 0
        ? html`<p>No subscriptions.</p>`
        : table({
            label: 'Subscriptions',
            caption: 'Subscriptions: what renews, when, and for how much',
            columns: [
              'Subscription',
              'Status',
              'Paid until',
              'Next renewal',
              { num: 'Price per month' },
              { hidden: 'Actions' },
            ],
            rows: subs.map(
              (s) =>
                html`<tr>
                  <th scope="row">${what(s)}</th>
                  <td>
                    ${STATUS[s.status]}${s.graceEndsAt ? html` (expires ${dateText(new Date(s.graceEndsAt))})` : ''}
                  </td>
                  <td>${dateText(new Date(s.paidUntil))}</td>
                  <td>${s.nextRenewalAt ? dateText(new Date(s.nextRenewalAt)) : 'Does not renew'}</td>
                  <td class="num">${money(s)}</td>
                  <td>${s.nextRenewalAt ? confirmButton(ctx, renewalOff(s)) : ''}</td>
                </tr>`,
            ),
          })
    }
    <p class="hint">
      Subscriptions renew monthly on their start day (UTC; the last day of shorter months), each renewal an
      invoice. A plan's unused GB roll over. A renewal that cannot be paid is retried for the grace period,
      then the subscription expires (docs/billing.md).
    </p>
  </section>`;
}

const NO_SUCH_SUBSCRIPTION = 'That subscription does not exist or no longer renews.';

/** The confirmation page (without JavaScript) and the change. */
export function subscriptionRoutes(
  pool: Pool,
  refuse: (visit: SignedInVisit, error: string) => Promise<void>,
): PageRoute[] {
  const renewing = async (visit: SignedInVisit) => {
    const id = pathId(visit.req, 'subscriptionId');
    const subs = id ? await listSubscriptions(pool, visit.person.accountId) : [];
    return subs.find((s) => s.id === id && s.nextRenewalAt !== null);
  };
  return [
    get('/billing/subscriptions/:subscriptionId/renewal-off', async (visit) => {
      const s = await renewing(visit);
      if (!s) return refuse(visit, NO_SUCH_SUBSCRIPTION);
      visit.send(confirmPage(visit.ctx, renewalOff(s)));
    }),
    post('/billing/subscriptions/:subscriptionId/renewal-off', async (visit) => {
      const s = await renewing(visit);
      if (!s) return refuse(visit, NO_SUCH_SUBSCRIPTION);
      await changeSubscription(
        pool,
        visit.person.accountId,
        s.id,
        { autoRenew: false },
        dashboardActor(visit.req, visit.person.email),
      );
      visit.res.redirect(303, '/billing?done=renewal-off');
    }),
  ];
}
