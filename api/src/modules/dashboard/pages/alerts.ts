// Alerts: the email switches and the low-bandwidth threshold the admin API sets (the same
// operation, answered once every API process applied it), and the privacy setting of target
// statistics (docs/adr/0026).
import { z } from 'zod';
import { AppError } from '#common/errors.ts';
import { readAlerts, updateAlerts, type AlertsRow } from '../../account/repo.ts';
import { readTargetStatsEnabled, setTargetStats } from '../../targets/repo.ts';
import { doneNotice, formProblem } from '../forms.ts';
import { dashboardActor } from '../../../http/actor.ts';
import { html, type Html } from '../html.ts';
import { csrfField, layout, message, type PageContext } from '../layout.ts';
import { get, post, type PageModule, type SignedInVisit } from '../page.ts';

const NOTICES: ReadonlyMap<string, string> = new Map([
  ['saved', 'Alert settings saved.'],
  ['privacy', 'Privacy setting saved.'],
]);

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

export const alertsPage: PageModule = ({ pool, waitForApiCaches }) => {
  const render = async (
    { person, ctx, send }: SignedInVisit,
    state: { notice?: string | undefined; error?: string },
    status = 200,
  ) => {
    const alerts = await readAlerts(pool, person.accountId);
    if (!alerts) throw new AppError('ACCOUNT_NOT_FOUND');
    const targetStats = (await readTargetStatsEnabled(pool, person.accountId)) ?? true;
    send(alertsView(ctx, { alerts, targetStats, ...state }), status);
  };

  return {
    nav: { href: '/alerts', label: 'Alerts' },
    routes: [
      get('/alerts', (visit) => render(visit, { notice: doneNotice(visit.req, NOTICES) })),

      post('/alerts', async (visit) => {
        const form = alertsForm.safeParse(visit.req.body);
        if (!form.success) return render(visit, { error: formProblem(form.error, LABELS) }, 422);
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
        visit.res.redirect(303, '/alerts?done=saved');
      }),

      // Target statistics on or off (docs/adr/0026): an unticked box is absent from the form.
      post('/target-stats', async ({ req, res, person }) => {
        const body = (req.body ?? {}) as Record<string, unknown>;
        await setTargetStats(
          pool,
          person.accountId,
          body.targetStats === 'on',
          dashboardActor(req, person.email),
        );
        res.redirect(303, '/alerts?done=privacy');
      }),
    ],
  };
};

function alertsView(
  ctx: PageContext,
  data: { alerts: AlertsRow; targetStats: boolean; notice?: string | undefined; error?: string },
): Html {
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
  return layout(
    ctx,
    'Alerts',
    html`${message('error', data.error)}${message('success', data.notice)}
      <form method="post" action="/alerts">
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
      <form method="post" action="/target-stats">
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
      </form>`,
    { narrow: true },
  );
}
