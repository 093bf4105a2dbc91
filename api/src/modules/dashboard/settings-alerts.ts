// The Settings page's alerts (docs/dashboard.md "Settings"): the email switches and the
// low-bandwidth threshold the admin API sets (the same operation, answered once every API process
// applied it), and the privacy setting of target statistics (docs/adr/0026). A part of
// pages/settings.ts, kept beside it as billing-subscriptions.ts is.
import { z } from 'zod';
import type { Pool } from '#common/db/pool.ts';
import { readAlerts, updateAlerts, type AlertsRow } from '#api/modules/account/repo.ts';
import { readTargetStatsEnabled, setTargetStats } from '#api/modules/targets/repo.ts';
import type { WaitForApiCaches } from '#api/modules/sync/wait.ts';
import { dashboardActor } from '#api/http/actor.ts';
import { formProblem } from './forms.ts';
import { html, type Html } from './html.ts';
import { csrfField, type PageContext } from './layout.ts';
import { post, type PageRoute, type SignedInVisit } from './page.ts';

export const ALERT_NOTICES: ReadonlyArray<[string, string]> = [
  ['saved', 'Alert settings saved.'],
  ['privacy', 'Privacy setting saved.'],
];

const box = z.literal('on').optional();
const alertsForm = z.object({
  lowBandwidth: box,
  newInvoice: box,
  serverAlerts: box,
  lowBandwidthPercent: z.coerce.number().int().min(1).max(99),
});
const LABELS = {
  lowBandwidth: 'Low bandwidth',
  newInvoice: 'New invoice',
  serverAlerts: 'Server alerts',
  lowBandwidthPercent: { label: 'Low-bandwidth threshold', says: 'a whole number from 1 to 99' },
};

export interface AlertsData {
  alerts: AlertsRow | undefined;
  targetStats: boolean;
}

export async function readAlertSettings(pool: Pool, accountId: string): Promise<AlertsData> {
  const [alerts, targetStats] = await Promise.all([
    readAlerts(pool, accountId),
    readTargetStatsEnabled(pool, accountId),
  ]);
  return { alerts, targetStats: targetStats ?? true };
}

/** The alert routes; `refuse` draws the whole Settings page with the form's problem. */
export function alertRoutes(
  pool: Pool,
  waitForApiCaches: WaitForApiCaches,
  refuse: (visit: SignedInVisit, error: string) => Promise<void>,
): PageRoute[] {
  return [
    post('/settings/alerts', async (visit) => {
      const form = alertsForm.safeParse(visit.req.body);
      if (!form.success) return refuse(visit, formProblem(form.error, LABELS));
      await updateAlerts(
        pool,
        visit.person.accountId,
        {
          lowBandwidth: form.data.lowBandwidth === 'on',
          newInvoice: form.data.newInvoice === 'on',
          serverAlerts: form.data.serverAlerts === 'on',
          lowBandwidthPercent: form.data.lowBandwidthPercent,
        },
        dashboardActor(visit.req, visit.person.email),
      );
      await waitForApiCaches();
      visit.res.redirect(303, '/settings?done=saved#alerts');
    }),

    // Target statistics on or off (docs/adr/0026): an unticked box is absent from the form.
    post('/settings/target-stats', async ({ req, res, person }) => {
      const body = (req.body ?? {}) as Record<string, unknown>;
      await setTargetStats(
        pool,
        person.accountId,
        body.targetStats === 'on',
        dashboardActor(req, person.email),
      );
      res.redirect(303, '/settings?done=privacy#alerts');
    }),
  ];
}

/** The alerts section: the email switches and threshold, and the privacy setting. */
export function alertsSection(ctx: PageContext, data: AlertsData & { alerts: AlertsRow }): Html {
  const a = data.alerts;
  const checkbox = (name: string, label: string, checked: boolean, hint: string) =>
    html`<div class="checkbox">
        <input
          type="checkbox"
          id="alert-${name}"
          name="${name}"
          value="on"
          ${checked ? html` checked` : ''}
          aria-describedby="alert-${name}-hint"
        /><label for="alert-${name}">${label}</label>
      </div>
      <p class="hint" id="alert-${name}-hint">${hint}</p>`;
  return html`<section class="card" id="alerts" aria-labelledby="alerts-h">
    <h2 id="alerts-h">Alerts</h2>
    <form method="post" action="/settings/alerts">
      ${csrfField(ctx)}
      <fieldset>
        <legend>Email me when</legend>
        ${checkbox('lowBandwidth', 'Low bandwidth', a.lowBandwidth, 'A product falls below the threshold below.')}
        ${checkbox('newInvoice', 'New invoice', a.newInvoice, 'An invoice is issued (a purchase or an auto-refill).')}
        ${checkbox('serverAlerts', 'Server alerts', a.serverAlerts, 'Gateway incidents and maintenance.')}
      </fieldset>
      <label for="alert-threshold">Low-bandwidth threshold (% remaining)</label>
      <input
        id="alert-threshold"
        name="lowBandwidthPercent"
        type="number"
        min="1"
        max="99"
        value="${a.lowBandwidthPercent}"
        required
      />
      <button type="submit">Save</button>
    </form>
    <form method="post" action="/settings/target-stats">
      ${csrfField(ctx)}
      <fieldset>
        <legend>Privacy</legend>
        ${checkbox(
          'targetStats',
          'Record target statistics',
          data.targetStats,
          'Bytes and requests per target domain (never a path or a query), kept 30 days, shown on the Overview. Turning this off deletes what is stored.',
        )}
      </fieldset>
      <button type="submit">Update privacy setting</button>
    </form>
  </section>`;
}
